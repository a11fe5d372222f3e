#!/usr/bin/env python3
"""Copy Cluster API's CRDs that the provider files and the docs' samples use into tests/data/cluster-api/, for the
tests to validate those objects against them offline (lab/capvco_lab/crdschema.py).

From a Cluster API git repository (kubernetes-sigs/cluster-api; a bare clone will do) at a commit: the CRDs of the
kinds the cluster templates and the samples make (Cluster, MachineDeployment, MachineHealthCheck, KubeadmControlPlane,
KubeadmConfigTemplate) and clusterctl's Metadata, each cut to the API version the files use (v1beta2; v1alpha3 for
Metadata) and without its descriptions (the schema as it is otherwise: types, required fields, patterns, bounds),
and an annotation naming the repository, the commit and the path. Written as JSON (a YAML document too, which
tests/crdschema.py reads as it is): data, not a file to lint.

    .venv/bin/python hack/cluster-api-crds.py CLUSTER_API_GIT_DIR [COMMIT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "cluster-api")
#: The annotation that records where a copy comes from.
SOURCE = "capvco.whitesky.cloud/copied-from"

#: (path in the repository, the version kept)
CRDS = (
    ("core/config/crd/bases/cluster.x-k8s.io_clusters.yaml", "v1beta2"),
    ("core/config/crd/bases/cluster.x-k8s.io_machinedeployments.yaml", "v1beta2"),
    ("core/config/crd/bases/cluster.x-k8s.io_machinehealthchecks.yaml", "v1beta2"),
    ("controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml", "v1beta2"),
    ("bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml", "v1beta2"),
    ("cmd/clusterctl/config/crd/bases/clusterctl.cluster.x-k8s.io_metadata.yaml", "v1alpha3"),
)


def strip(node):
    """The schema without its descriptions (a property that is itself named ``description`` stays)."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                continue
            if key == "properties":
                out[key] = {name: strip(sub) for name, sub in value.items()}
            else:
                out[key] = strip(value)
        return out
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir")
    ap.add_argument("commit", nargs="?", default="HEAD")
    args = ap.parse_args(argv)

    def git(*cmd):
        return subprocess.run(["git", "--git-dir", args.git_dir, *cmd], capture_output=True, text=True, check=True)

    commit = git("rev-parse", args.commit).stdout.strip()
    os.makedirs(OUT, exist_ok=True)
    for path, version in CRDS:
        crd = yaml.safe_load(git("show", "%s:%s" % (commit, path)).stdout)
        kept = [v for v in crd["spec"]["versions"] if v["name"] == version]
        if not kept:
            sys.exit("%s serves no %s at %s" % (path, version, commit))
        crd["spec"]["versions"] = [strip(kept[0])]
        crd["metadata"].setdefault("annotations", {})[SOURCE] = "kubernetes-sigs/cluster-api@%s:%s (%s only)" % (
            commit,
            path,
            version,
        )
        name = os.path.basename(path)[: -len(".yaml")] + ".json"
        with open(os.path.join(OUT, name), "w", encoding="utf-8") as fh:
            json.dump(crd, fh, indent=1, sort_keys=False)
            fh.write("\n")
        print(os.path.relpath(os.path.join(OUT, name), ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
