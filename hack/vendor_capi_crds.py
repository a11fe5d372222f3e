#!/usr/bin/env python3
"""Vendor Cluster API's published CRDs for the tests: ``lab/capvco_lab/data/cluster-api/<tag>/<plural>.yaml``.

Two kinds of reader, one copy:

* the fake API server (``lab/capvco_lab/kubecapi.py``) serves a release's Cluster and Machine (v1.14.0: the v1beta2
  contract; v1.10.0: the v1beta1 one), and tests/unit/controller/test_contract_rules.py reads their schemas;
* tests/providerfiles.py validates clusterctl's templates and the docs' samples offline against v1.14.0's kinds
  they make (Cluster, MachineDeployment, MachineHealthCheck, KubeadmControlPlane, KubeadmConfigTemplate) and
  clusterctl's Metadata (``lab/capvco_lab/crdschema.py``).

From a clone of https://github.com/kubernetes-sigs/cluster-api (a bare one will do) at a release tag, each CRD is
trimmed only where it is huge and nothing reads it:

* every ``description`` text dropped (two thirds of the text; a property that is itself named ``description``, as
  a bootstrap token's, stays), and the versions the release no longer serves;
* the conversion webhook that the release's kustomization patches in (``<crd folder>/patches/webhook_in_*.yaml``)
  written in, as ``clusterctl init`` installs the CRDs (clusterctl's Metadata has none: it is never installed).

Every schema node that remains (types, required fields, enums, patterns, bounds, defaults, CEL rules) is Cluster
API's own. Each file's header names the tag, its commit, the path and the patch (tests/unit/suites/test_vendored_crds.py
reads it back, and compares the files with a fresh vendoring when given the clone).

    python hack/vendor_capi_crds.py CLUSTER_API_CLONE [TAG ...]     # default: every tag of RELEASES
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "lab", "capvco_lab", "data", "cluster-api")
#: plural -> (the CRD folders that may hold it, the newest layout first; its API group). The core's CRDs moved from
#: config/crd to core/config/crd in v1.11.
CRDS = {
    "clusters": (("core/config/crd", "config/crd"), "cluster.x-k8s.io"),
    "machines": (("core/config/crd", "config/crd"), "cluster.x-k8s.io"),
    "machinedeployments": (("core/config/crd", "config/crd"), "cluster.x-k8s.io"),
    "machinehealthchecks": (("core/config/crd", "config/crd"), "cluster.x-k8s.io"),
    "kubeadmcontrolplanes": (("controlplane/kubeadm/config/crd",), "controlplane.cluster.x-k8s.io"),
    "kubeadmconfigtemplates": (("bootstrap/kubeadm/config/crd",), "bootstrap.cluster.x-k8s.io"),
    "metadata": (("cmd/clusterctl/config/crd",), "clusterctl.cluster.x-k8s.io"),
}
#: The releases vendored and the CRDs of each.
RELEASES = {
    "v1.14.0": tuple(CRDS),
    "v1.10.0": ("clusters", "machines"),
}
HEADER = """\
# Cluster API's CustomResourceDefinition %(name)s, as release %(tag)s publishes it:
#   https://github.com/kubernetes-sigs/cluster-api/blob/%(tag)s/%(path)s
# (tag %(tag)s: commit %(commit)s)
# %(patched)s
# trimmed by hack/vendor_capi_crds.py: descriptions dropped, and the versions the release does not serve.
# Vendored for the tests (lab/capvco_lab/kubecapi.py, tests/providerfiles.py); never edited by hand.
"""
#: What a header says, read back: the tag, the commit, the path and the patch (None: none).
HEADER_RE = re.compile(
    r"\A# Cluster API's CustomResourceDefinition (?P<name>\S+), as release (?P<tag>\S+) publishes it:\n"
    r"#   https://github\.com/kubernetes-sigs/cluster-api/blob/(?P=tag)/(?P<path>\S+)\n"
    r"# \(tag (?P=tag): commit (?P<commit>[0-9a-f]{40})\)\n"
    r"# (?:with the conversion webhook of (?P<patch>\S+),|with no conversion webhook,)\n"
)


def show(clone: str, rev: str, path: str) -> str | None:
    got = subprocess.run(["git", "-C", clone, "show", "%s:%s" % (rev, path)], capture_output=True, text=True)
    return got.stdout if got.returncode == 0 else None


def commit_of(clone: str, tag: str) -> str:
    got = subprocess.run(
        ["git", "-C", clone, "rev-parse", "%s^{commit}" % tag], capture_output=True, text=True, check=True
    )
    return got.stdout.strip()


def strip(node: object) -> object:
    """The CRD without its description texts (a property named ``description`` is a schema, not a text: it stays)."""
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if not (k == "description" and isinstance(v, str))}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def source(clone: str, tag: str, plural: str) -> tuple[str, str | None]:
    """The paths of ``plural``'s CRD and of its conversion webhook patch (None: none) at ``tag``."""
    folders, group = CRDS[plural]
    for folder in folders:
        path = "%s/bases/%s_%s.yaml" % (folder, group, plural)
        if show(clone, tag, path) is not None:
            patch = "%s/patches/webhook_in_%s.yaml" % (folder, plural)
            return path, patch if show(clone, tag, patch) is not None else None
    raise SystemExit("%s: no CRD of %s in %s" % (tag, plural, ", ".join(folders)))


def render(clone: str, tag: str, plural: str) -> str:
    """The vendored file of ``plural`` at ``tag``, as text."""
    path, patch_path = source(clone, tag, plural)
    crd = yaml.safe_load(show(clone, tag, path) or "")
    crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v.get("served")]
    if patch_path:
        crd["spec"]["conversion"] = yaml.safe_load(show(clone, tag, patch_path) or "")["spec"]["conversion"]
    crd = strip(crd)
    text = HEADER % {
        "name": crd["metadata"]["name"],
        "tag": tag,
        "commit": commit_of(clone, tag),
        "path": path,
        "patched": "with the conversion webhook of %s," % patch_path if patch_path else "with no conversion webhook,",
    }
    return text + yaml.safe_dump(crd, sort_keys=False, width=120)


def vendor(clone: str, tag: str, out: str = OUT) -> list[str]:
    """Write ``tag``'s CRDs under ``out/<tag>/``; the paths written."""
    os.makedirs(os.path.join(out, tag), exist_ok=True)
    written = []
    for plural in RELEASES[tag]:
        target = os.path.join(out, tag, plural + ".yaml")
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(render(clone, tag, plural))
        written.append(target)
    return written


def main(argv: list[str]) -> int:
    if not argv:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    clone, tags = argv[0], argv[1:] or list(RELEASES)
    for tag in tags:
        for path in vendor(clone, tag):
            print(os.path.relpath(path, ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
