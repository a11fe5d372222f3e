#!/usr/bin/env python3
"""Vendor Cluster API's published Cluster and Machine CRDs for the fake API server (``lab/capvco_lab/kubecapi.py``).

Reads them from a clone of https://github.com/kubernetes-sigs/cluster-api at a release tag and writes
``lab/capvco_lab/data/cluster-api/<tag>/<plural>.yaml``, trimmed only where they are huge and nothing reads it:

* every ``description`` dropped (two thirds of the text), and the versions the release no longer serves;
* the conversion webhook that the release's kustomization patches in (``config/crd/patches/webhook_in_*.yaml``)
  written in, as ``clusterctl init`` installs the CRDs.

Every schema node that remains (types, required fields, enums, patterns, bounds, defaults) is Cluster API's own.

    python hack/vendor_capi_crds.py CLUSTER_API_CLONE v1.14.0 v1.10.0
"""

from __future__ import annotations

import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "lab", "capvco_lab", "data", "cluster-api")
KINDS = ("clusters", "machines")
HEADER = """\
# Cluster API's CustomResourceDefinition %(name)s, as release %(tag)s publishes it:
#   https://github.com/kubernetes-sigs/cluster-api/blob/%(tag)s/%(path)s
# with the conversion webhook of %(patch)s,
# trimmed by hack/vendor_capi_crds.py: descriptions dropped, and the versions the release does not serve.
# Vendored for the fake API server of the tests (lab/capvco_lab/kubecapi.py); never edited by hand.
"""


def show(clone: str, tag: str, path: str) -> str | None:
    got = subprocess.run(["git", "-C", clone, "show", "%s:%s" % (tag, path)], capture_output=True, text=True)
    return got.stdout if got.returncode == 0 else None


def strip(node: object) -> object:
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def vendor(clone: str, tag: str) -> None:
    base = next(b for b in ("core/config/crd", "config/crd") if show(clone, tag, b + "/kustomization.yaml"))
    os.makedirs(os.path.join(OUT, tag), exist_ok=True)
    for plural in KINDS:
        path = "%s/bases/cluster.x-k8s.io_%s.yaml" % (base, plural)
        patch_path = "%s/patches/webhook_in_%s.yaml" % (base, plural)
        crd = yaml.safe_load(show(clone, tag, path) or "")
        patch = yaml.safe_load(show(clone, tag, patch_path) or "")
        crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v.get("served")]
        crd["spec"]["conversion"] = patch["spec"]["conversion"]
        crd = strip(crd)
        text = HEADER % {"name": crd["metadata"]["name"], "tag": tag, "path": path, "patch": patch_path}
        with open(os.path.join(OUT, tag, plural + ".yaml"), "w", encoding="utf-8") as fh:
            fh.write(text + yaml.safe_dump(crd, sort_keys=False, width=120))


def main(argv: list[str]) -> int:
    clone, tags = argv[0], argv[1:]
    for tag in tags:
        vendor(clone, tag)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
