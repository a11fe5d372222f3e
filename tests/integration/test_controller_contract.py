"""The controller on Cluster API's contract for infrastructure providers, on each contract it speaks (issue 48):
against the fake API server serving Cluster API's own published CRDs and its core's side of the contract
(``capvco_lab.kubecapi``: v1.14.0, the v1beta2 contract, v1beta1 still served; v1.10.0, v1beta1 only) and the
emulator.

- A cluster with two GPU machines walked through create, scale, a lost VM and delete, by the controller process,
  read as Cluster API's core reads it: the Cluster's and the Machines' own fields (``initialization``,
  ``providerID``, ``InfrastructureReady``, the lost VM's failure where that version keeps it).
- Each reconcile writes its object's status once at most, counted on the fake API server (the reconciles run
  in-process, one at a time).
- The core reads the contract's fields only where the CRDs' labels say it may.
"""

from __future__ import annotations

import pytest

from capvco_controller import vcocluster, vcomachine, vcomachinetemplate
from capvco_controller.context import Context, Settings
from capvco_controller.credentials import Credentials
from capvco_controller.informer import Store
from capvco_controller.kube import Kube
from capvco_controller.metrics import Registry
from capvco_lab import kubecapi
from capvco_lab.capi import A100x2, cv, make_cluster, make_machine, v1beta1_condition
from capvco_lab.controller import Controller, kube_with_crds

from helpers import wait_for
from test_gpu import live

CONTRACTS = pytest.mark.parametrize("release", ["v1.14.0", "v1.10.0"])
ONE_A100 = {"type": "NVIDIA A100", "count": 1}
METAV1 = {"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"}


@pytest.fixture
def capi_kube(tmp_path, request):
    fake = kube_with_crds(tmp_path, cluster_api=request.param)
    yield fake
    fake.stop()


def status(kube, obj):
    return (kube.get(obj) or {}).get("status") or {}


def cond(obj, ctype):
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


def capi_of(kube, kind, name):
    return kube.get((cv(kube), kind), name) or {}


def infrastructure_provisioned(kube, owner):
    """What the core says of ``owner``'s infrastructure: v1beta2's ``status.initialization``, v1beta1's
    ``status.infrastructureReady`` (each version has only its own)."""
    st = owner.get("status") or {}
    if kube.capi_version == "v1beta2":
        assert "infrastructureReady" not in st, st
        return (st.get("initialization") or {}).get("infrastructureProvisioned") is True
    return st.get("infrastructureReady") is True


@pytest.mark.parametrize("capi_kube", ["v1.14.0", "v1.10.0"], indirect=True)
def test_a_cluster_with_two_gpu_machines_through_create_scale_a_lost_vm_and_delete(capi_kube, emulator, tmp_path):
    kube = capi_kube
    ctl = Controller(kube, emulator, tmp_path, "--drift-period", "1", "--driver-poll", "1").start()
    try:
        version = kubecapi.RELEASES[kube.cluster_api]
        assert "reading Cluster and Machine at %s" % version in ctl.text(), "found by discovery"

        # create: the cluster's infrastructure, as the core sees it
        vc = make_cluster(kube)
        assert wait_for(lambda: infrastructure_provisioned(kube, capi_of(kube, "Cluster", "gpu1")), 60), ctl.text()
        got = kube.get(vc)
        assert got["status"]["initialization"] == {"provisioned": True} and got["status"]["ready"] is True
        assert (cond(got, "Ready")["status"], cond(got, "Ready")["reason"]) == ("True", "Ready")
        assert all(set(c) == METAV1 for c in got["status"]["conditions"]), got["status"]["conditions"]
        assert v1beta1_condition(got, "CloudspaceReady")["status"] == "True", "the v1beta1 shape beside"
        cluster = capi_of(kube, "Cluster", "gpu1")
        assert cluster["spec"]["controlPlaneEndpoint"] == got["spec"]["controlPlaneEndpoint"], "copied by the core"
        assert cond(cluster, "InfrastructureReady")["status"] == "True", "Ready mirrored by the core"

        machines = [make_machine(kube, "gpu1-md-0-%s" % n, gpu=ONE_A100) for n in ("a", "b")]

        def provisioned(machine):
            return infrastructure_provisioned(kube, capi_of(kube, "Machine", machine["metadata"]["name"]))

        assert wait_for(lambda: all(provisioned(m) for _vm, m in machines), 90), ctl.text()[-3000:]
        for vm, machine in machines:
            obj, owner = kube.get(vm), capi_of(kube, "Machine", machine["metadata"]["name"])
            assert owner["spec"]["providerID"] == obj["spec"]["providerID"], "the core's copy of the providerID"
            assert owner["status"]["addresses"] == [{"type": "Hostname", "address": vm["metadata"]["name"]}]
            assert cond(owner, "InfrastructureReady")["status"] == "True"
            assert obj["status"]["initialization"] == {"provisioned": True}
            assert (cond(obj, "Ready")["status"], cond(obj, "Ready")["reason"]) == ("True", "Ready")
            assert all(set(c) == METAV1 for c in obj["status"]["conditions"]), obj["status"]["conditions"]
        assert len(live(emulator, "gpu1")) == 2

        # scale up (the MachineSet's new Machine) and down (a Machine deleted, its VCOMachine with it)
        third = make_machine(kube, "gpu1-md-0-c", gpu=ONE_A100)
        assert wait_for(lambda: provisioned(third[1]), 90), ctl.text()[-3000:]
        assert len(live(emulator, "gpu1")) == 3
        gone_vm, gone_machine = machines.pop(0)
        kube.delete(gone_machine)
        kube.delete(gone_vm)
        assert wait_for(lambda: kube.get(gone_vm) is None, 60), ctl.text()[-3000:]
        assert len(live(emulator, "gpu1")) == 2
        machines.append(third)

        # a lost VM: Ready False with the terminal reason, where each version of the core reads it
        lost_vm, lost_machine = machines[0]
        obj = kube.get(lost_vm)
        made = emulator.op_count("createVirtualMachine")
        with emulator.client() as client:
            client.delete_vm(
                obj["spec"]["providerID"].split("/")[3], obj["status"]["vmID"], permanently=True, detach_gpu=True
            )
        assert wait_for(lambda: cond(kube.get(lost_vm), "Ready").get("reason") == "VMDeleted", 60), ctl.text()[-3000:]
        obj = kube.get(lost_vm)
        assert cond(obj, "Ready")["status"] == "False" and obj["status"]["initialization"] == {"provisioned": True}
        assert obj["status"]["failureReason"] == "UpdateError", "the v1beta1 contract's, while v1beta1 is served"
        owner = capi_of(kube, "Machine", lost_machine["metadata"]["name"])
        assert (cond(owner, "InfrastructureReady")["status"], cond(owner, "InfrastructureReady")["reason"]) == (
            "False",
            "VMDeleted",
        )
        failure = (owner["status"].get("deprecated") or {}).get("v1beta1") if version == "v1beta2" else owner["status"]
        assert failure["failureReason"] == "UpdateError", owner["status"]  # what a v1beta1 MachineHealthCheck reads
        assert wait_for(lambda: len(live(emulator, "gpu1")) == 1, 30), "the lost VM's vGPU released at once"
        assert emulator.op_count("createVirtualMachine") == made, "never made again"

        # delete: the machines, then the cluster; nothing left, nothing billed
        for vm, machine in machines:
            kube.delete(machine)
            kube.delete(vm)
        assert wait_for(lambda: all(kube.get(vm) is None for vm, _ in machines), 60), ctl.text()[-3000:]
        kube.delete(vc)
        assert wait_for(lambda: kube.get(vc) is None, 60), ctl.text()[-3000:]
        assert live(emulator, "gpu1") == [] and emulator.ledger()["accruing"] == 0
        with emulator.client() as client:
            assert [c for c in client.cloudspaces() if c["name"] == "gpu1-cs"] == []
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]


# -- one status write per reconcile, counted on the API server -----------------------------------------------------


class InProcess:
    """The controller's reconciles run here, one at a time, on stores listed from the fake API server."""

    def __init__(self, kube, emulator):
        self.fake = kube
        k = Kube.connect(kube.kubeconfig)
        capi = k.cluster_api()
        self.stores = {kind.kind: Store() for kind in capi.watched()}
        self.ctx = Context(k, self.stores, Credentials(None, emulator.env()), Settings(), Registry(), capi=capi)

    def sync(self):
        for kind in self.ctx.capi.watched():
            items, _version = self.ctx.kube.list_all(kind, None)
            self.stores[kind.kind].replace(items, None)

    def reconcile(self, module, kind, name):
        """One reconcile of ``kind`` ``name``: its result, and the status writes the API server saw during it."""
        self.sync()
        self.fake.call("DELETE", "/_fake/requests")
        result = module.reconcile(self.ctx, self.ctx.cached(kind, "default", name))
        writes = [
            r
            for r in self.fake.requests()
            if r["method"] in ("PATCH", "PUT") and r["path"].endswith("/%s/status" % name)
        ]
        return result, writes


def test_each_reconcile_writes_its_objects_status_once_at_most(kube, emulator):
    """A cluster and a GPU machine made from nothing, then idle, a template published: every reconcile (the
    VCOCluster's: the cloudspace and the orphan check; each of the machine's: its placement, then its VM, vGPUs and
    driver report in one; a template's: its capacity, conditions and Events) writes its status with one patch at
    most, and an idle one writes nothing."""
    run = InProcess(kube, emulator)
    make_cluster(kube)
    _result, writes = run.reconcile(vcocluster, "VCOCluster", "gpu1")
    assert len(writes) == 1, writes
    assert status(kube, kube.get(("infrastructure.cluster.x-k8s.io/v1beta1", "VCOCluster"), "gpu1"))["ready"]
    vm, _machine = make_machine(kube, "gpu1-md-0-one", gpu=A100x2)
    counts = []
    for _ in range(6):
        result, writes = run.reconcile(vcomachine, "VCOMachine", "gpu1-md-0-one")
        counts.append(len(writes))
        if status(kube, vm).get("vmID") and result.requeue_after != 0.0:
            break
    got = status(kube, vm)
    assert got["initialization"] == {"provisioned": True} and len(got["gpu"]["reservations"]) == 2, got
    assert cond(kube.get(vm), "GPUDriverReady")["reason"] == "WaitingForFirstBoot"
    assert counts[:2] == [1, 1], "the placement, then the VM, its vGPUs and its driver's report: one write each"
    assert max(counts) <= 1, counts
    for module, kind, name in ((vcomachine, "VCOMachine", "gpu1-md-0-one"), (vcocluster, "VCOCluster", "gpu1")):
        _result, writes = run.reconcile(module, kind, name)
        assert writes == [], (kind, "idle: nothing written")
    template = {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "VCOMachineTemplate",
        "metadata": {"name": "gpu1-md-z9", "namespace": "default", "labels": {"cluster.x-k8s.io/cluster-name": "gpu1"}},
        "spec": {"template": {"spec": {"vcpus": 4, "memory": 8192, "image": 999, "gpu": {"type": "NVIDIA Z9000"}}}},
    }
    kube.create(template)
    _result, writes = run.reconcile(vcomachinetemplate, "VCOMachineTemplate", "gpu1-md-z9")
    assert len(writes) == 1, writes
    events = [e["reason"] for e in kube.events()]
    assert {"InvalidConfiguration", "GPUTypeNotOffered"} <= set(events), "two Events, one status write"


@CONTRACTS
def test_the_core_reads_the_contract_where_the_crds_labels_say(release):
    """Cluster API's core picks the newest contract it speaks that a CRD's labels name for its version (the value:
    the CRD's served versions, underscore-separated); the CAPVCO CRDs say both, so 1.11 and later read v1beta2's
    status.initialization.provisioned, 1.10 v1beta1's status.ready; a CRD without the labels is not read at all."""
    import os

    import yaml

    from capvco_lab.controller import CRDS

    core = kubecapi.Core(release)
    with open(CRDS, encoding="utf-8") as fh:
        crds = yaml.safe_load(fh)["items"]
    newest = kubecapi.RELEASES[release]
    for crd in crds:
        assert core.contract_of(crd, "v1beta1") == newest, crd["metadata"]["name"]
        assert core.contract_of(crd, "v1beta2") is None, "a version the CRD does not serve"
        bare = dict(crd, metadata=dict(crd["metadata"], labels={}))
        assert core.contract_of(bare, "v1beta1") is None
    old = dict(crds[0], metadata=dict(crds[0]["metadata"], labels={"cluster.x-k8s.io/v1beta1": "v1beta1"}))
    assert core.contract_of(old, "v1beta1") == "v1beta1", "a provider of the v1beta1 contract only"
    assert os.path.exists(os.path.join(kubecapi.DATA, release, "machines.yaml"))


def test_without_cluster_api_the_controller_says_so_and_stops(tmp_path, emulator):
    """Discovery finds no cluster.x-k8s.io: the controller exits at once (2), saying what it found, instead of
    watching kinds that are not served."""
    kube = kube_with_crds(tmp_path, cluster_api=None)
    try:
        ctl = Controller(kube, emulator, tmp_path)
        with pytest.raises(RuntimeError, match="the controller exited 2") as failed:
            ctl.start()
        assert "none of v1beta2, v1beta1 is served" in str(failed.value)
        assert "Cluster API is not installed" in str(failed.value)
    finally:
        kube.stop()
