"""clusterctl's provider files for the tests: ``hack/clusterctl.py`` (which writes them), the values the tests give
their variables, and the files as ``clusterctl init`` and ``clusterctl generate cluster`` turn them into objects
(tests/envsubst.py, clusterctl's variable substitution). Used by tests/integration/test_clusterctl.py (clusterctl's
rules, Cluster API's schemas) and test_manifests_policy.py (kubernetes-validate, checkov)."""

from __future__ import annotations

import glob
import importlib.util
import os

import yaml

from capvco_lab import crdschema, kubecapi

import envsubst
from helpers import ROOT, read_text

_spec = importlib.util.spec_from_file_location("clusterctl_files", os.path.join(ROOT, "hack", "clusterctl.py"))
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

#: Cluster API's CRDs of the release whose v1beta2 kinds the templates and the samples make, clusterctl's Metadata
#: among them (lab/capvco_lab/data/cluster-api/, vendored by hack/vendor_capi_crds.py).
CAPI_CRDS = sorted(glob.glob(os.path.join(kubecapi.DATA, kubecapi.LATEST, "*.yaml")))

#: What clusterctl generate cluster always sets from its command line (cmd/clusterctl/client/config.go,
#: ``templateOptions``; the defaults of cmd/clusterctl/cmd/generate_cluster.go's flags), besides CLUSTER_NAME (its
#: argument) and NAMESPACE (--target-namespace, or the kubeconfig context's).
CLUSTERCTL_SETS = {"CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": "0"}
#: Sample values of the variables that have no default (the documented defaults come from the files themselves).
COMPONENT_VALUES = {"CAPVCO_CONTROLLER_IMAGE": "registry.example/capvco-controller:0.1.0"}
TEMPLATE_VALUES = dict(
    CLUSTERCTL_SETS,
    CLUSTER_NAME="demo",
    KUBERNETES_VERSION="v1.34.0",
    VCO_LOCATION="be-gen-1",
    VCO_CONTROL_PLANE_ENDPOINT_HOST="192.0.2.10",
    VCO_IMAGE_ID="12",
    VCO_GPU_TYPE="NVIDIA A100",
)
#: The namespace the templates are generated for (clusterctl's --target-namespace).
NAMESPACE = "default"


def docs_of(text):
    return [d for d in yaml.safe_load_all(text) if d]


def stored(crd):
    """The version a CRD stores (Cluster API's v1beta2 at the release vendored; v1alpha3 for Metadata)."""
    return next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))


def crd_schemas():
    """Cluster API's CRDs at the version each stores (v1beta2; v1alpha3 for clusterctl's Metadata: the older
    versions the release still serves are left out, so an object of them has no schema here) and this provider's,
    by (apiVersion, kind)."""
    out = {}
    for path in CAPI_CRDS:
        out.update({k: v for k, v in crdschema.load_crds(path).items() if k[0].endswith("/" + stored(v[0]))})
    out.update(crdschema.load_crds(gen.CRDS))
    return out


def read(folder, name):
    return read_text(os.path.join(folder, name))


def components(folder, values=None):
    """The components as ``clusterctl init`` applies them (the variables substituted), before its namespace rules."""
    return docs_of(envsubst.process(read(folder, "infrastructure-components.yaml"), values or COMPONENT_VALUES))


def rendered(folder, name, values=None):
    """A template as ``clusterctl generate cluster`` prints it (substituted, every object in the target namespace)."""
    objs = docs_of(envsubst.process(read(folder, name), values or TEMPLATE_VALUES))
    for obj in objs:
        assert "namespace" not in obj["metadata"], "a template's object names no namespace: clusterctl sets it"
        obj["metadata"]["namespace"] = NAMESPACE
    return objs
