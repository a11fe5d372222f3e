"""The CAPVCO CRDs and the controller's writes against Cluster API's contract for infrastructure providers (v1beta2,
https://cluster-api.sigs.k8s.io/developer/providers/contracts/infra-cluster and .../infra-machine), checked against
Cluster API's own published CRDs (vendored in the lab: ``capvco_lab/data/cluster-api``), without a server."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import conditions
from capvco_controller.kube import CURRENT, ClusterAPI
from capvco_controller.scope import Scope, combine
from capvco_lab import crdschema, kubecapi
from capvco_lab.controller import CRDS


def ours():
    with open(CRDS, encoding="utf-8") as fh:
        return {c["spec"]["names"]["kind"]: c for c in yaml.safe_load(fh)["items"]}


def status_schema(crd, version=None):
    v = next(v for v in crd["spec"]["versions"] if version in (None, v["name"]))
    return v["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]


def bare(schema):
    """A schema without its descriptions (Cluster API's vendored CRDs have none)."""
    if isinstance(schema, dict):
        return {k: bare(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [bare(v) for v in schema]
    return schema


def capi_machine_status():
    (_cluster, machine) = kubecapi.crds("v1.14.0")
    return status_schema(machine, "v1beta2")


@pytest.mark.parametrize("kind", ["VCOCluster", "VCOMachine"])
def test_the_crds_hold_what_the_v1beta2_contract_reads(kind):
    """``status.initialization.provisioned`` ("initialization completed"), the conditions as metav1.Conditions with
    Cluster API's own schema (type, status, reason of Kubernetes' form, message, lastTransitionTime,
    observedGeneration: no severity), the old ones under ``status.deprecated.v1beta1`` with Cluster API's v1beta1
    Condition schema; and the v1beta1 contract's fields kept while it is served."""
    status = status_schema(ours()[kind])
    assert status["initialization"]["properties"]["provisioned"]["type"] == "boolean"
    capi = capi_machine_status()
    assert bare(status["conditions"]["items"]) == capi["conditions"]["items"]
    assert "severity" not in status["conditions"]["items"]["properties"]
    deprecated = status["deprecated"]["properties"]["v1beta1"]["properties"]["conditions"]["items"]
    assert bare(deprecated) == capi["deprecated"]["properties"]["v1beta1"]["properties"]["conditions"]["items"]
    assert {"ready", "failureReason", "failureMessage"} <= set(status)


def test_the_crds_carry_the_contract_labels_of_their_served_versions():
    for kind, crd in ours().items():
        served = "_".join(v["name"] for v in crd["spec"]["versions"] if v["served"])
        labels = crd["metadata"]["labels"]
        assert labels["cluster.x-k8s.io/v1beta2"] == served == "v1beta1", kind  # CAPVCO's own version is kept
        assert labels["cluster.x-k8s.io/v1beta1"] == served, kind


def test_a_status_the_controller_writes_is_admitted_by_the_crd():
    """A machine's status as the scope writes it (provisioned, metav1 conditions with Ready, the v1beta1 shape)
    validates against the CRD, as the API server validates it."""
    from ansible_collections.whitesky.capvco.plugins.module_utils.faces import kube

    crds = crdschema.load_crds(CRDS)
    obj = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VCOMachine",
        "metadata": {"name": "m", "namespace": "d", "generation": 2},
        "spec": {"vcpus": 1, "memory": 1024},
        "status": {},
    }
    given = [
        conditions.true("VMProvisioned", "Provisioned", "VM m (7)"),
        conditions.false("GPUsReserved", "ReconcileFailed", "HTTP 500", "Error"),
    ]
    given.append(conditions.summary({c.type: c for c in given}, ("VMProvisioned", "GPUsReserved")))
    _set, _patch, after = kube.plan_write(
        obj, "VCOMachine", "2026-01-01T00:00:00Z", status={"initialization": {"provisioned": True}}, conditions=given
    )
    assert crdschema.check(crds, dict(obj, status=after)) == []
    assert [c["reason"] for c in after["conditions"]] == ["Provisioned", "ReconcileFailed", "NotReady"]


def test_discovery_decides_the_version_read_and_the_v1beta1_fields():
    assert (CURRENT.version, CURRENT.v1beta1) == ("v1beta2", True)  # Cluster API 1.11 to 1.15
    old = ClusterAPI(("v1beta1",))  # 1.10
    assert (old.version, old.v1beta1, old.cluster.api_version) == ("v1beta1", True, "cluster.x-k8s.io/v1beta1")
    new = ClusterAPI(("v1beta2",))  # 1.16: v1beta1 no longer served
    assert (new.version, new.v1beta1, new.machine.api_version) == ("v1beta2", False, "cluster.x-k8s.io/v1beta2")
    assert kubecapi.served("v1.14.0") == ["v1beta1", "v1beta2"] and kubecapi.served("v1.10.0") == ["v1beta1"]


class Writes:
    """A context that records the scope's one write."""

    def __init__(self, capi):
        self.capi, self.calls = capi, []

    def status(self, kind, obj, **fields):
        self.calls.append(fields)
        return {}


@pytest.mark.parametrize(
    "capi,removed",
    [(CURRENT, False), (ClusterAPI(("v1beta2",)), True)],
)
def test_the_v1beta1_fields_go_once_cluster_api_serves_v1beta1_no_more(capi, removed):
    ctx = Writes(capi)
    obj = {"metadata": {"name": "m"}, "status": {"ready": True, "conditions": []}}
    with Scope(ctx, "VCOMachine", obj, ("VMProvisioned",)) as scope:
        scope.provisioned(True)
        scope.condition(conditions.true("VMProvisioned", "Provisioned", "VM m"))
        scope.event("VMCreated", "created VM m")
    (call,) = ctx.calls  # one write, at the end
    status = call["status"]
    assert status["initialization"] == {"provisioned": True}
    assert [c.type for c in call["conditions"]] == ["VMProvisioned", "Ready"] and call["events"][0]["reason"]
    if removed:
        assert all(status[k] is None for k in ("ready", "failureReason", "failureMessage", "deprecated")), status
    else:
        assert status["ready"] is True and "deprecated" not in status


def test_two_merge_patches_are_one():
    assert combine({"a": {"b": 1}, "c": 2}, {"a": {"d": None}, "c": None}) == {"a": {"b": 1, "d": None}, "c": None}


def test_a_drift_pass_finds_no_change_in_an_orphan_report_the_status_holds():
    """The pass compares its report with the cluster's status as the reconcile writes it (conditions observing the
    object's generation): an unchanged report wakes nothing, a new orphan does."""
    from types import SimpleNamespace

    from ansible_collections.whitesky.capvco.plugins.module_utils.faces import kube
    from capvco_controller import drift, vcocluster
    from capvco_controller.objects import VCOCluster

    obj = {"metadata": {"name": "c", "namespace": "d", "generation": 3}, "spec": {"location": "l"}, "status": {}}
    update = vcocluster.orphan_update(VCOCluster.read(obj), {"reservations": [], "vms": []})
    _set, _patch, after = kube.plan_write(
        obj, "VCOCluster", "2026-01-01T00:00:00Z", status=update["status"], conditions=update["conditions"],
        gpu_orphans=update["gpu_orphans"],
    )  # fmt: skip
    c = VCOCluster.read(dict(obj, status=after))
    ctx = SimpleNamespace(capi=CURRENT)
    assert not drift._differs(ctx, c, vcocluster.orphan_update(c, {"reservations": [], "vms": []}))
    row = {"vgpu_name": "capvco.c.m.00.x", "vgpu_id": "v1", "age": 999}
    assert drift._differs(ctx, c, vcocluster.orphan_update(c, {"reservations": [row], "vms": []}))
