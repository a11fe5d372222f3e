"""Read the platform's Swagger spec from ../shared when it is there (contract tests only)."""

from __future__ import annotations

import json
import os

from helpers import ROOT

CANDIDATES = [
    os.environ.get("WHITESKY_SPEC", ""),
    os.path.join(os.path.dirname(ROOT), "shared", "reference", "whitesky-api.json"),
]


def load_spec():
    for path in CANDIDATES:
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                return json.load(fh)
    return None


def operations(spec):
    """operationId -> (method, path, {param name: location}, body field names)."""
    defs = spec["definitions"]
    out = {}
    for path, item in spec["paths"].items():
        shared = item.get("parameters", [])
        for method, op in item.items():
            if method == "parameters":
                continue
            params, body = {}, set()
            for prm in shared + op.get("parameters", []):
                params[prm["name"]] = prm["in"]
                if prm["in"] == "body" and "$ref" in prm.get("schema", {}):
                    body |= set(defs[prm["schema"]["$ref"].split("/")[-1]].get("properties", {}))
            out[op["operationId"]] = (method.upper(), path, params, body)
    return out
