"""The cluster spec's fields (clusterspec.SPEC), and every place that must agree with them: the CRDs, the AWX
surveys, the docs.  No server: the checks against the emulator are tests/integration/test_cluster_spec.py; a spec
checked against them is test_speccheck.py."""

from __future__ import annotations

import os
from unittest.mock import ANY

import yaml

from ansible_collections.whitesky.capvco.plugins.module_utils.spec import clusterspec, reference, schema

from helpers import ROOT, read_text


def crds():
    docs = yaml.safe_load(read_text(os.path.join(ROOT, "roles", "capvco_controller", "files", "crds.yaml")))
    out = {}
    for crd in docs["items"]:
        out[crd["spec"]["names"]["kind"]] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
            "spec"
        ]
    return out


def bare(schema):
    """A schema without its descriptions (and the structural keys Kubernetes adds)."""
    if isinstance(schema, dict):
        return {
            k: bare(v) for k, v in schema.items() if k not in ("description", "x-kubernetes-preserve-unknown-fields")
        }
    if isinstance(schema, list):
        return [bare(v) for v in schema]
    return schema


def agrees(crd, field, path, problems):
    """Every key the CRD has in common with the schema says the same thing (the CRD may omit options)."""
    ours = reference.openapi(field)
    crd = bare(crd)
    for key in sorted(set(ours) | set(crd)):
        if key == "properties":
            for name in crd.get("properties", {}):
                if name in field.fields:
                    agrees(crd["properties"][name], field.fields[name], "%s.%s" % (path, name), problems)
        elif key == "items":
            agrees(crd.get("items", {}), field.items, path + "[]", problems)
        elif key == "required":
            if sorted(crd.get("required", [])) != [
                r for r in ours.get("required", []) if r in crd.get("properties", {})
            ]:
                problems.append(
                    "%s: required %s in the CRD, %s in the schema" % (path, crd.get("required"), ours.get("required"))
                )
        elif crd.get(key) != ours.get(key):
            problems.append("%s.%s: %r in the CRD, %r in the schema" % (path, key, crd.get(key), ours.get(key)))


def test_the_crds_agree_with_the_cluster_spec():
    kinds = crds()
    problems = []
    machine = schema.Field(
        "object",
        "",
        fields=dict(
            clusterspec.machine_fields(),
            gpu=clusterspec.SPEC.fields["pools"].items.fields["gpu"],
            firstBoot=clusterspec.SPEC.fields["first_boot"],
        ),
    )
    for kind in ("VCOMachine",):
        spec = dict(kinds[kind])
        spec["properties"] = {k: v for k, v in spec["properties"].items() if k != "providerID"}
        agrees(spec, machine, kind, problems)
    cluster = schema.Field(
        "object",
        "",
        fields=dict(
            location=clusterspec.SPEC.fields["cluster"].fields["location"],
            cloudspace=clusterspec.SPEC.fields["cluster"].fields["cloudspace"],
            # the controller deploys the add-on with Cluster API's kubeconfig Secret: no kubeconfig field
            sriov=schema.Field(
                "object",
                clusterspec.SPEC.fields["sriov"].doc,
                default={},
                fields={k: v for k, v in clusterspec.SPEC.fields["sriov"].fields.items() if k != "kubeconfig"},
            ),
        ),
    )
    spec = dict(kinds["VCOCluster"])
    spec["properties"] = {k: v for k, v in spec["properties"].items() if k in cluster.fields}
    spec["required"] = [r for r in spec["required"] if r != "cloudspace"]  # the spec defaults it to the name
    for name in ("location", "cloudspace"):  # immutable once set: a rule of updating an object, which a spec is not
        prop = dict(spec["properties"][name])
        assert prop.pop("x-kubernetes-validations") == [{"rule": "self == oldSelf", "message": ANY}]
        spec["properties"][name] = prop
    sriov = dict(spec["properties"]["sriov"])
    sriov.pop("required")  # the controller takes the credential from a Secret only: stricter than the spec
    sriov["properties"]["networks"] = {k: v for k, v in sriov["properties"]["networks"].items() if k != "minItems"}
    spec["properties"]["sriov"] = sriov
    agrees(spec, cluster, "VCOCluster", problems)
    assert problems == [], problems


def test_a_mismatch_is_seen():
    """The comparison itself can fail: a CRD that allows 17 vGPUs is caught."""
    gpu = clusterspec.SPEC.fields["pools"].items.fields["gpu"]
    crd = reference.openapi(gpu)
    crd["properties"]["count"]["maximum"] = 17
    problems = []
    agrees(crd, gpu, "gpu", problems)
    assert problems == ["gpu.count.maximum: 17 in the CRD, 16 in the schema"]


def test_the_awx_surveys_agree_with_the_cluster_spec():
    """Each survey question that becomes a spec field has the field's type and bounds."""
    templates = yaml.safe_load(read_text(os.path.join(ROOT, "awx", "job_templates.yml")))["awx_job_templates"]
    pool = clusterspec.SPEC.fields["pools"].items.fields
    cluster = clusterspec.SPEC.fields["cluster"].fields
    fields = {
        "cluster_name": cluster["name"],
        "cluster_location": cluster["location"],
        "cluster_cloudspace": cluster["cloudspace"],
        "gpu_replicas": pool["replicas"],
        "gpu_type": pool["gpu"].fields["type"],
        "gpu_count": pool["gpu"].fields["count"],
        "gpu_driver_version": pool["gpu"].fields["driverVersion"],
    }
    seen = 0
    for template in templates:
        for q in template.get("survey", []):
            field = fields.get(q["variable"])
            if field is None:
                continue
            seen += 1
            if field.kind == "int":
                assert q["type"] == "integer", q
                assert (q.get("min"), q.get("max")) == (field.minimum, field.maximum), q
            else:
                assert q["type"] == "text", q
                assert q.get("max") == field.max_length, q
                assert q.get("min", 0) == (field.min_length or 0), q
            if "default" in q:  # a default the survey offers is one the schema takes
                schema.parse(q["default"], field, q["variable"], errors := schema.Errors())
                assert errors == [], errors
    assert seen >= 13


def test_the_docs_reference_is_generated_from_the_schema():
    text = read_text(os.path.join(ROOT, "docs", "lifecycle.md"))
    begin, end = "<!-- spec reference: generated by spec/reference.py -->\n", "<!-- end of spec reference -->"
    assert begin in text and end in text
    assert text.split(begin, 1)[1].split(end, 1)[0] == reference.reference(), (
        "docs/lifecycle.md's spec reference is stale: run hack/spec-reference.py"
    )
