"""The controller itself (``python -m capvco_controller``: its informers, its work queue, its finalizers, its drift
pass, its leader election) against the fake API server and the emulator, over real HTTP.

Every wait is on a condition with a deadline; the drift period is shortened to seconds so that a pass happens
within a test.
"""

from __future__ import annotations

import signal

from test_controller import MUTATING_K8S, A100x2, condition, make_cluster, make_machine

from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import machine as machines
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.api import MUTATING

from helpers import Controller, wait_for
from test_gpu import live


def status(kube, obj):
    got = kube.get(obj)
    return (got or {}).get("status") or {}


def cond(kube, obj, ctype):
    """A condition of the object now ({} while it has none, or no status yet)."""
    return condition({"status": status(kube, obj)}, ctype) or {}


def drift_passes(ctl):
    return sum(v for k, v in ctl.metrics().items() if k.startswith("capvco_drift_pass_seconds_count"))


def test_create_idle_drift_and_delete(kube, emulator, tmp_path):
    ctl = Controller(kube, emulator, tmp_path, "--drift-period", "1", "--driver-poll", "1").start()
    try:
        vc = make_cluster(kube)
        assert wait_for(lambda: status(kube, vc).get("ready"), 60), ctl.text()[-3000:]
        cs = status(kube, vc)["cloudspaceID"]
        with emulator.client() as client:
            assert cloudspaces.creator(client, cs) == "gpu1"
        assert wait_for(lambda: cond(kube, vc, "GPUReservationsClean").get("status") == "True", 30)

        # CAPI's order: no owner Machine, no bootstrap data yet: it waits, and creates nothing
        vm, machine = make_machine(kube, "gpu1-md-0-abc", gpu=A100x2, owned=False, bootstrap=False)
        assert wait_for(lambda: cond(kube, vm, "VMProvisioned").get("reason") == "WaitingForOwnerMachine", 30)
        owner = {"apiVersion": machine["apiVersion"], "kind": "Machine", "name": machine["metadata"]["name"]}
        kube.merge(vm, {"metadata": {"ownerReferences": [dict(owner, uid=machine["metadata"]["uid"])]}})
        assert wait_for(lambda: cond(kube, vm, "VMProvisioned").get("reason") == "WaitingForBootstrapData", 30)
        assert emulator.op_count("createVirtualMachine") == 0
        kube.merge(machine, {"spec": {"bootstrap": {"dataSecretName": "gpu1-md-0-abc"}}})
        assert wait_for(lambda: status(kube, vm).get("ready") is True, 60), ctl.text()[-3000:]
        obj = kube.get(vm)
        assert obj["spec"]["providerID"] == "whitesky://be-gen-1/%s/gpu1-md-0-abc" % cs
        assert "vcomachine.infrastructure.cluster.x-k8s.io" in obj["metadata"]["finalizers"]
        reservations = obj["status"]["gpu"]["reservations"]
        assert len(reservations) == 2 and all(r["attached"] for r in reservations)
        assert sorted(r["name"] for r in reservations) == sorted(r["vgpu_name"] for r in live(emulator, "gpu1"))
        assert sorted(e["reason"] for e in kube.events()) == ["CloudspaceCreated", "VMCreated"]

        # the driver is not verified (no first boot reports here): GPUDriverReady stays Unknown, read every poll,
        # and nothing else is written; the drift passes read, and write nothing
        kube.call("DELETE", "/_fake/requests")
        emulator.reset_stats()
        before = drift_passes(ctl)
        assert wait_for(lambda: drift_passes(ctl) >= before + 3, 30)
        ops = emulator.stats()["operations"]
        assert not set(ops) & set(MUTATING), ops
        assert [r for r in kube.requests() if r["method"] in MUTATING_K8S] == []

        # a vGPU detached behind the controller's back: the drift pass finds it, the reconcile attaches it again
        with emulator.client() as client:
            client.detach_vgpu(cs, obj["status"]["vmID"], reservations[0]["vgpuID"])

        def attached():
            with emulator.client() as client:
                return {v for x in client.vms(cs) for v in machines.vm_view(x)["vgpus"]}

        assert wait_for(lambda: attached() == {r["vgpuID"] for r in reservations}, 30), ctl.text()[-3000:]

        # deletion: the finalizer releases the vGPUs, deletes the VM, and lets the object go
        assert kube.delete(vm)[0] == 200
        assert wait_for(lambda: kube.get(vm) is None, 60), ctl.text()[-3000:]
        assert live(emulator, "gpu1") == []
        with emulator.client() as client:
            assert [v["name"] for v in client.vms(cs)] == []
        assert emulator.ledger()["accruing"] == 0
        metrics = ctl.metrics()
        assert metrics['controller_runtime_reconcile_total{controller="vcomachine",result="success"}'] >= 1
        assert ctl.probe("/healthz") == 200 and ctl.probe("/readyz") == 200
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]


def test_force_delete_is_reported_by_the_drift_pass_and_swept_by_the_cluster_finalizer(kube, emulator, tmp_path):
    ctl = Controller(kube, emulator, tmp_path, "--drift-period", "1").start()
    try:
        vc = make_cluster(kube, spec={"gpuOrphanGracePeriod": 0})
        vm, _ = make_machine(kube, "gpu1-md-0-f1", gpu=A100x2)
        keep, _ = make_machine(kube, "gpu1-md-0-k1", gpu={"type": "NVIDIA A100", "count": 1})
        assert wait_for(lambda: status(kube, vm).get("ready") and status(kube, keep).get("ready"), 90)
        assert len(live(emulator, "gpu1")) == 3
        kube.merge(vm, {"metadata": {"annotations": {"capvco.whitesky.cloud/force-delete": "true"}}})
        kube.delete(vm)
        assert wait_for(lambda: kube.get(vm) is None, 60)
        assert len(live(emulator, "gpu1")) == 3  # the force-deleted machine's two are still billed

        def reported():
            return (
                cond(kube, vc, "GPUReservationsClean").get("reason") == "OrphansFound"
                and status(kube, vc).get("gpu", {}).get("orphans") == 2
            )

        assert wait_for(reported, 30), ctl.text()[-3000:]
        names = status(kube, vc)["gpu"]["orphanNames"]
        assert all(n.startswith("capvco.gpu1.gpu1-md-0-f1.") for n in names)
        warnings = [e for e in kube.events() if e["type"] == "Warning"]
        assert {e["reason"] for e in warnings} == {"GPUOrphansFound"} and "gpu1-md-0-f1" in warnings[0]["message"]

        kube.delete(keep)
        assert wait_for(lambda: kube.get(keep) is None, 60)
        kube.delete(vc)
        assert wait_for(lambda: kube.get(vc) is None, 60), ctl.text()[-3000:]
        assert live(emulator, "gpu1") == []
        assert emulator.ledger()["accruing"] == 0
        with emulator.client() as client:
            assert [c["name"] for c in client.cloudspaces() if c["name"] == "gpu1-cs"] == []
    finally:
        ctl.stop()


def test_terminal_input_and_a_platform_error_retried_with_backoff(kube, emulator, tmp_path):
    ctl = Controller(kube, emulator, tmp_path).start()
    try:
        make_cluster(kube)
        bad, _ = make_machine(kube, "gpu1-md-0-bad", gpu={"type": "NVIDIA Z9000", "count": 1})
        assert wait_for(lambda: status(kube, bad).get("failureReason") == "InvalidConfiguration", 60)
        message = status(kube, bad)["failureMessage"]
        assert "NVIDIA Z9000" in message and "NVIDIA A100" in message

        emulator.faults(fail_next={"reserveAndAttachVGPUToVM": [500, 1]})
        flaky, _ = make_machine(kube, "gpu1-md-0-fl", gpu={"type": "NVIDIA A100", "count": 1})
        assert wait_for(lambda: status(kube, flaky).get("ready") is True, 60), ctl.text()[-3000:]
        assert "ReconcileFailed" in [e["reason"] for e in kube.events()]
        assert "failureReason" not in status(kube, flaky)
        assert len(status(kube, flaky)["gpu"]["reservations"]) == 1
        big, _ = make_machine(kube, "gpu1-md-0-big", gpu={"type": "NVIDIA A100", "count": 15})
        assert wait_for(lambda: "not enough NVIDIA A100" in cond(kube, big, "GPUsReserved").get("message", ""), 60)
        assert "failureReason" not in status(kube, big)
    finally:
        ctl.stop()


def test_two_replicas_elect_one_leader_and_a_stalled_leader_is_replaced(kube, emulator, tmp_path):
    """Two replicas with leader election: one leads. The leader is stopped (SIGSTOP) mid-life: the other takes the
    Lease once it lapses and creates a new machine's VM; the stalled one, resumed, finds the Lease gone and exits
    without a second VM (the cluster's lease on the platform orders the two in any case)."""
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "capvco-system"}})
    args = ("--leader-elect", "--leader-election-namespace", "capvco-system")
    one = Controller(kube, emulator, tmp_path, *args).start()
    two = Controller(kube, emulator, tmp_path, *args).start()
    try:

        def leaders():
            return [c for c in (one, two) if c.metrics().get('leader_election_master_status{name="capvco-controller"}')]

        assert wait_for(lambda: len(leaders()) == 1, 30)
        leader = leaders()[0]
        standby = two if leader is one else one
        make_cluster(kube)
        leader.proc.send_signal(signal.SIGSTOP)
        assert wait_for(lambda: standby.metrics().get('leader_election_master_status{name="capvco-controller"}'), 60)
        vm, _ = make_machine(kube, "gpu1-md-0-new", gpu={"type": "NVIDIA A100", "count": 1})
        assert wait_for(lambda: status(kube, vm).get("ready") is True, 90), standby.text()[-3000:]
        leader.proc.send_signal(signal.SIGCONT)
        assert wait_for(lambda: leader.proc.poll() is not None, 60), leader.text()[-3000:]
        assert leader.proc.returncode == 1 and "lost the Lease" in leader.text()
        with emulator.client() as client:
            cs = status(kube, kube.get(("infrastructure.cluster.x-k8s.io/v1beta1", "VCOCluster"), "gpu1"))
            assert [v["name"] for v in client.vms(cs["cloudspaceID"])] == ["gpu1-md-0-new"]
        assert len(live(emulator, "gpu1")) == 1
    finally:
        for c in (one, two):
            if c.proc.poll() is None:
                c.proc.send_signal(signal.SIGCONT)
            c.stop()
