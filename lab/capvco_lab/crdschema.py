#!/usr/bin/env python3
"""Validate custom resources against their CRD's structural schema, offline.

This is what the API server does on create and update, as far as the CAPVCO
kinds need it: defaults are applied, then the object is checked with strict
field validation (kubectl's default since 1.27), so an unknown field is an
error, as is a wrong type, a value out of range or a missing required field.

    python -m capvco_lab.crdschema CRDS.yaml SAMPLE.yaml [...]          # exit 1 on an invalid CR
    python -m capvco_lab.crdschema --expect-invalid CRDS.yaml BAD.yaml  # exit 1 on a valid CR
"""

from __future__ import annotations

import argparse
import copy
import sys

import jsonschema
import yaml


def objects(path):
    """The objects of a YAML file: its documents, with a List's items in its place."""
    with open(path, encoding="utf-8") as fh:
        for doc in yaml.safe_load_all(fh):
            if doc and doc.get("kind") == "List":
                yield from doc.get("items") or []
            elif doc:
                yield doc


def load_crds(path):
    """``{(apiVersion, kind): (crd, version schema)}`` from a file of CRDs (or a List of them)."""
    out = {}
    for crd in objects(path):
        if crd.get("kind") != "CustomResourceDefinition":
            continue
        for version in crd["spec"]["versions"]:
            key = ("%s/%s" % (crd["spec"]["group"], version["name"]), crd["spec"]["names"]["kind"])
            out[key] = (crd, version["schema"]["openAPIV3Schema"])
    return out


def _strict(schema, top=True):
    """The OpenAPI schema as JSON Schema with strict field validation (unknown fields are errors)."""
    s = {k: v for k, v in schema.items() if not k.startswith("x-kubernetes-") and k not in ("default", "format")}
    if "properties" in schema:
        s["properties"] = {k: _strict(v, False) for k, v in schema["properties"].items()}
        if top:
            s["properties"]["metadata"] = {"type": "object"}
        if "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            s["additionalProperties"] = False
    if isinstance(schema.get("additionalProperties"), dict):
        s["additionalProperties"] = _strict(schema["additionalProperties"], False)
    if "items" in schema:
        s["items"] = _strict(schema["items"], False)
    if schema.get("type") == "integer":
        s["type"] = "integer"
    return s


def apply_defaults(schema, value):
    """Fill in the schema's defaults, as the API server does before validation."""
    if isinstance(value, dict) and "properties" in schema:
        for name, sub in schema["properties"].items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = apply_defaults(sub, value[name])
    elif isinstance(value, list) and "items" in schema:
        value = [apply_defaults(schema["items"], v) for v in value]
    return value


def validate(schema, obj):
    """``(defaulted object, [error lines])`` for one custom resource."""
    obj = apply_defaults(schema, copy.deepcopy(obj))
    validator = jsonschema.Draft7Validator(_strict(schema))
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    lines = ["%s: %s" % (".".join(str(p) for p in e.absolute_path) or "<root>", e.message) for e in errors]
    return obj, lines


def transition_errors(schema, old, new, path=""):
    """The errors of an update against the CRD's transition rules (``x-kubernetes-validations`` whose rule reads
    ``oldSelf``), checked where both the old and the new object have a value, as the API server does. This fake
    evaluates one rule, ``self == oldSelf`` (immutability); any other rule is refused loudly, never ignored."""
    errors = []
    for rule in schema.get("x-kubernetes-validations") or []:
        if rule.get("rule") != "self == oldSelf":
            raise ValueError("crdschema understands only the rule self == oldSelf, not %r" % rule.get("rule"))
        if old != new:
            errors.append("%s: Invalid value: %s" % (path or "<root>", rule.get("message") or "self == oldSelf"))
    if isinstance(old, dict) and isinstance(new, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name in old and name in new:
                errors += transition_errors(sub, old[name], new[name], path + "." + name if path else name)
    return errors


def check(crds, obj):
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key not in crds:
        return ["no CRD serves %s %s" % key]
    return validate(crds[key][1], obj)[1]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--expect-invalid", action="store_true", help="every custom resource must be rejected")
    ap.add_argument("crds")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    crds = load_crds(args.crds)
    groups = {g.split("/")[0] for g, _ in crds}
    bad = 0
    for path in args.files:
        for obj in objects(path):
            if obj.get("apiVersion", "").split("/")[0] not in groups:
                continue
            errors = check(crds, obj)
            label = "%s %s/%s" % (path, obj["kind"], obj.get("metadata", {}).get("name"))
            if args.expect_invalid:
                print("%s: %s" % (label, "rejected: " + "; ".join(errors) if errors else "ACCEPTED"))
                bad += not errors
            else:
                print("%s: %s" % (label, "; ".join(errors) or "valid"))
                bad += bool(errors)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
