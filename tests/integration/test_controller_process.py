"""The controller itself (``python -m capvco_controller``: its informers, its work queue, its finalizers, its drift
pass, its driver polls, its SR-IOV add-on, its leader election) against the fake API server and the emulator, over
real HTTP; and beside another controller and a playbook.

Every wait is on a condition with a deadline; the drift period is shortened to seconds so that a pass happens
within a test.
"""

from __future__ import annotations

import base64
import datetime
import email
import os
import re
import signal
import socket
import sqlite3
import sys
import threading
import time
import uuid

import httpx

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import machine as machines
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.api import MUTATING
from capvco_lab.capi import (
    MUTATING_K8S,
    A100x2,
    b64,
    condition,
    guest_reports,
    make_cluster,
    make_machine,
    v1beta1_condition,
    write_requests,
)
from capvco_lab.controller import Controller, object_path
from capvco_lab.emulator import CUSTOMER

from helpers import COLLECTIONS, ROOT, read_text, run_playbook, wait_for
from test_gpu import live


def status(kube, obj):
    got = kube.get(obj)
    return (got or {}).get("status") or {}


def cond(kube, obj, ctype):
    """A condition of the object now ({} while it has none, or no status yet)."""
    return condition({"status": status(kube, obj)}, ctype) or {}


def drift_passes(ctl):
    return sum(v for k, v in ctl.metrics().items() if k.startswith("capvco_drift_pass_seconds_count"))


def reasons(kube, namespace="default"):
    return [e["reason"] for e in kube.events(namespace)]


def user_data(emulator, vm_name):
    """The VM's user data as the emulator stored it: ``{content type: text}`` of its multipart parts."""
    db = sqlite3.connect(os.path.join(emulator.state_dir, "state.db"))
    try:
        raw = db.execute("SELECT user_data FROM vms WHERE name=? AND deleted_at IS NULL", (vm_name,)).fetchone()[0]
    finally:
        db.close()
    return {
        p.get_content_type(): p.get_payload(decode=True).decode()
        for p in email.message_from_string(raw).walk()
        if not p.is_multipart()
    }


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ops(emulator):
    """``{operationId: count}`` since the emulator's statistics were last reset."""
    return {k: v["count"] for k, v in emulator.stats()["operations"].items()}


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
        kube.call("DELETE", "/_fake/requests")
        kube.merge(machine, {"spec": {"bootstrap": {"dataSecretName": "gpu1-md-0-abc"}}})
        assert wait_for(lambda: status(kube, vm).get("ready") is True, 60), ctl.text()[-3000:]
        assert wait_for(lambda: cond(kube, vm, "GPUDriverReady").get("reason") == "WaitingForFirstBoot", 30)
        obj = kube.get(vm)
        assert obj["spec"]["providerID"] == "whitesky://be-gen-1/%s/gpu1-md-0-abc" % cs
        assert "vcomachine.infrastructure.cluster.x-k8s.io" in obj["metadata"]["finalizers"]
        reservations = obj["status"]["gpu"]["reservations"]
        assert len(reservations) == 2 and all(r["attached"] for r in reservations)
        assert sorted(r["name"] for r in reservations) == sorted(r["vgpu_name"] for r in live(emulator, "gpu1"))
        assert all(r["name"].startswith("capvco.gpu1.gpu1-md-0-abc.0") for r in reservations)
        assert cond(kube, vm, "GPUsReserved").get("status") == "True"
        assert sorted(e["reason"] for e in kube.events()) == ["CloudspaceCreated", "VMCreated"]
        # the bootstrap data is wrapped by the retried first boot, which hands the providerID to the kubelet
        parts = user_data(emulator, "gpu1-md-0-abc")
        assert set(parts) == {"text/cloud-config", "text/x-shellscript"}
        text = "\n".join(parts.values())
        assert "kubeadm, join" in text and "capvco first boot" in text
        assert "--provider-id=" + obj["spec"]["providerID"] in text
        # every write of the controller went through the one seam: status, providerID and Events of our own kinds,
        # merge patches (the test's own write, the Machine's bootstrap data, is left out)
        writes = [w for w in write_requests(kube) if w[1] != object_path(machine)]
        targets = {
            (m, "status" if p.endswith("/status") else p.split("/")[-1 if m == "POST" else -2]) for m, p, _ in writes
        }
        assert targets == {("PATCH", "status"), ("PATCH", "vcomachines"), ("POST", "events")}, writes
        assert all(ct == "application/merge-patch+json" for m, _, ct in writes if m == "PATCH"), writes

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


def test_metrics_are_served_on_the_metrics_address_only(kube, emulator, tmp_path):
    """The probe address (the pod's IP, for the kubelet) serves /healthz and /readyz and nothing else; /metrics is
    served on the metrics address alone (127.0.0.1 in the Deployment), which serves no probe, in the text format,
    each total a counter; the same address for both serves all three on one port."""
    ctl = Controller(kube, emulator, tmp_path).start()
    try:
        assert ctl.port != ctl.metrics_port
        assert [ctl.probe(p) for p in ("/healthz", "/readyz", "/metrics")] == [200, 200, 404]
        assert [ctl.probe(p, ctl.metrics_port) for p in ("/metrics", "/healthz", "/readyz")] == [200, 404, 404]
        served = httpx.get("http://127.0.0.1:%d/metrics" % ctl.metrics_port)
        assert served.headers["content-type"].startswith("text/plain; version=0.0.4")
        types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", served.text, re.M))  # totals are counters (issue 48)
        totals = ("controller_runtime_reconcile_total", "process_cpu_seconds_total", "workqueue_adds_total")
        assert [types.get(name) for name in totals] == ["counter"] * 3, types
        assert types.get("process_resident_memory_bytes") == types.get("workqueue_depth") == "gauge"
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]
    port = free_port()
    both = Controller(kube, emulator, tmp_path, "--health-probe-bind-address", "127.0.0.1:%d" % port)
    both.args += ["--metrics-bind-address", "127.0.0.1:%d" % port]
    both.start()
    try:
        assert both.port == both.metrics_port == port
        assert [both.probe(p) for p in ("/healthz", "/readyz", "/metrics")] == [200, 200, 200]
    finally:
        assert both.stop() == 0, both.text()[-3000:]


#: The drift pass's log line: its end (the record's time) and its duration.
PASS_LINE = re.compile(r"^(\S+ \S+) INFO capvco_controller\.drift drift pass of be-gen-1: .*, ([0-9.]+) s$", re.M)


def pass_times(ctl):
    """``[(start, duration)]`` of the drift passes of be-gen-1 the controller logged, in wall-clock seconds."""
    out = []
    for stamp, took in PASS_LINE.findall(ctl.text()):
        end = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        out.append((end - float(took), float(took)))
    return out


def test_drift_passes_are_timed_from_their_starts(kube, emulator, tmp_path):
    """Every request waits 0.5 s (the platform's reads are slower than the emulator's), so a pass takes about 1.5 s:
    the next pass still starts one period after the last one started, not one period after it ended; and a VM
    deleted right after a pass ended is found within one period (the deletion's own call took 0.5 s of it), not a
    period plus a pass's duration."""
    period = 3.0
    ctl = Controller(kube, emulator, tmp_path, "--drift-period", str(period)).start()
    try:
        make_cluster(kube)
        vm, _ = make_machine(kube, "gpu1-md-0-dt")
        assert wait_for(lambda: status(kube, vm).get("ready") is True, 60), ctl.text()[-3000:]
        emulator.faults(latency_ms=500)
        seen = len(pass_times(ctl))
        assert wait_for(lambda: len(pass_times(ctl)) >= seen + 4, 60), ctl.text()[-3000:]
        slow = pass_times(ctl)[seen:]
        assert all(took >= 1.0 for _start, took in slow), slow
        for (start, took), (after, _) in zip(slow, slow[1:], strict=False):
            assert period - 0.05 <= after - start < period + took / 2, (after - start, took, slow)

        # a VM deleted right after a pass ended: the pass that finds it gone ends one period after the deletion
        found = ctl.metrics().get('capvco_drift_found_total{kind="VCOMachine"}', 0)
        done = drift_passes(ctl)
        assert wait_for(lambda: drift_passes(ctl) > done, 30, interval=0.02)
        obj = kube.get(vm)
        with emulator.client(timeout=30) as client:
            client.delete_vm(obj["spec"]["providerID"].split("/")[3], obj["status"]["vmID"], permanently=True)
        deleted = time.monotonic()
        woken = lambda: ctl.metrics().get('capvco_drift_found_total{kind="VCOMachine"}', 0) > found  # noqa: E731
        assert wait_for(woken, 30, interval=0.02), ctl.text()[-3000:]
        delay = time.monotonic() - deleted
        assert delay < period, (delay, pass_times(ctl)[-1][1])
    finally:
        emulator.faults()
        assert ctl.stop() == 0, ctl.text()[-3000:]


def mount_credential(folder, emulator, token):
    """The credentials Secret as the kubelet mounts it, and updates it: a new folder of its keys' files, swapped in
    whole through ``..data`` (each key a link into it)."""
    folder.mkdir(exist_ok=True)
    version = folder / ("..%s" % uuid.uuid4().hex)
    version.mkdir()
    env = emulator.env()
    for key, value in (("api_url", env["WHITESKY_API_URL"]), ("customer_id", env["WHITESKY_CUSTOMER_ID"])):
        (version / key).write_text(value)
    (version / "api_token").write_text(token + "\n")
    os.symlink(version.name, folder / "..data_tmp")
    os.replace(folder / "..data_tmp", folder / "..data")
    for key in ("api_url", "customer_id", "api_token"):
        if not (folder / key).is_symlink():
            os.symlink(os.path.join("..data", key), folder / key)


def test_a_rotated_credential_reaches_the_running_controller(kube, emulator, tmp_path):
    """The controller reads its credential from the mounted Secret's folder. The customer's token is rotated on the
    platform (the old one refused from then on) and a GPU machine is deleted: its finalizer fails with a 401 that
    names the credential and where it comes from (never a token); once the Secret holds the new token, the running
    controller reads it, the finalizer's next try releases the machine's vGPUs and deletes its VM."""
    folder = tmp_path / "credentials"
    old, new = emulator.token, "rotated-token-%s" % uuid.uuid4().hex
    mount_credential(folder, emulator, old)
    # the environment's token is not the controller's: it is never used when the folder is given
    env = {"WHITESKY_API_TOKEN": "not-the-controllers-token"}
    ctl = Controller(kube, emulator, tmp_path, "--credentials-dir", str(folder), "--drift-period", "2", env=env)
    ctl.start()
    try:
        make_cluster(kube)
        vm, _ = make_machine(kube, "gpu1-md-0-rot", gpu=A100x2)
        assert wait_for(lambda: status(kube, vm).get("ready") is True, 60), ctl.text()[-3000:]
        assert len(live(emulator, "gpu1")) == 2

        emulator.rotate(new)
        assert kube.delete(vm)[0] == 200
        assert wait_for(lambda: "DeleteFailed" in reasons(kube), 60), ctl.text()[-3000:]
        (failed, *_) = [e for e in kube.events() if e["reason"] == "DeleteFailed"]
        message = failed["message"]
        assert "HTTP 401" in message and "the platform refused the controller's platform credential" in message
        assert "api_token in %s" % folder in message and "for customer " + CUSTOMER in message, message
        assert "WHITESKY_API_TOKEN" not in message, "the controller does not read it: no hint to check it"
        assert kube.get(vm) is not None and len(live(emulator, "gpu1")) == 2, "held by the finalizer, still billed"

        mount_credential(folder, emulator, new)  # the Secret updated: the kubelet swaps the folder's contents
        assert wait_for(lambda: kube.get(vm) is None, 60), ctl.text()[-3000:]
        assert live(emulator, "gpu1") == [] and emulator.ledger()["accruing"] == 0
        assert "the platform credential in %s changed" % folder in ctl.text()
        for where, text in [("the log", ctl.text()), ("the Events", str(kube.events()))]:
            assert old not in text and new not in text and "not-the-controllers-token" not in text, where
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]


def test_a_vm_deleted_behind_the_controllers_back_is_reported_not_made_again(kube, emulator, tmp_path):
    """The VM of a ready GPU machine is deleted on the platform (its vGPUs detached, still reserved and billed): the
    drift pass finds it gone and the machine says so (Ready False, VMDeleted, and the v1beta1 failureReason for the
    Machine's owner to replace it), its reservations are released at once, and no VM is made again (one made again
    would boot without its bootstrap data and never join)."""
    ctl = Controller(kube, emulator, tmp_path, "--drift-period", "1").start()
    try:
        make_cluster(kube)
        vm, _ = make_machine(kube, "gpu1-md-0-lost", gpu=A100x2)
        assert wait_for(lambda: status(kube, vm).get("ready") is True, 60), ctl.text()[-3000:]
        obj = kube.get(vm)
        cs, vm_id = obj["spec"]["providerID"].split("/")[3], obj["status"]["vmID"]
        assert len(live(emulator, "gpu1")) == 2
        made = emulator.op_count("createVirtualMachine")
        with emulator.client() as client:
            client.delete_vm(cs, vm_id, permanently=True, detach_gpu=True)
        assert wait_for(lambda: status(kube, vm).get("failureReason"), 30), ctl.text()[-3000:]
        got = status(kube, vm)
        assert (got["ready"], got["failureReason"]) == (False, "UpdateError")
        assert got["failureMessage"].startswith("VM gpu1-md-0-lost (%d) is gone from the platform" % vm_id)
        for ctype in ("Ready", "VMProvisioned", "GPUsReserved"):
            c = cond(kube, vm, ctype)
            assert (c["status"], c["reason"]) == ("False", "VMDeleted") and "severity" not in c, (ctype, c)
            old = v1beta1_condition(kube.get(vm), ctype)  # the v1beta1 shape, where the contract keeps it
            assert (old["status"], old["reason"], old["severity"]) == ("False", "VMDeleted", "Error"), (ctype, old)
        # the terminal error is Ready's reason (v1beta2), and the core's own provisioned flag is never taken back
        assert got["initialization"] == {"provisioned": True}
        assert "its 2 vGPU reservation(s) were released" in got["failureMessage"]
        assert live(emulator, "gpu1") == [] and emulator.ledger()["accruing"] == 0, "released at once"
        assert got["gpu"]["reservations"] == []
        assert "VMDeleted" in reasons(kube)
        # never made again, by the drift passes that follow either
        before = drift_passes(ctl)
        assert wait_for(lambda: drift_passes(ctl) >= before + 2, 30)
        assert emulator.op_count("createVirtualMachine") == made
        with emulator.client() as client:
            assert client.vms(cs) == []
        # the Machine's owner deletes it: the finalizer lets it go
        assert kube.delete(vm)[0] == 200
        assert wait_for(lambda: kube.get(vm) is None, 60), ctl.text()[-3000:]
        assert emulator.op_count("createVirtualMachine") == made
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]


def test_a_relabelled_machine_stays_in_its_cluster_and_its_finalizer_deletes_what_it_recorded(kube, emulator, tmp_path):
    """A live GPU machine of gpu1 relabelled to gpu2: the controller never acts on the changed label (no VM in gpu2's
    cloudspace, nothing terminal), a condition and a Warning say so, and the finalizer releases and deletes the VM
    and vGPUs it recorded in gpu1's cloudspace: nothing is left billed."""
    ctl = Controller(kube, emulator, tmp_path, "--drift-period", "1").start()
    try:
        one, two = make_cluster(kube), make_cluster(kube, name="gpu2")
        assert wait_for(lambda: status(kube, one).get("ready") and status(kube, two).get("ready"), 60)
        vm, _ = make_machine(kube, "gpu1-md-0-rl", gpu=A100x2)
        assert wait_for(lambda: status(kube, vm).get("ready") is True, 60), ctl.text()[-3000:]
        cs1, cs2 = status(kube, one)["cloudspaceID"], status(kube, two)["cloudspaceID"]
        placement = status(kube, vm)["placement"]
        assert placement == {
            "cluster": "gpu1",
            "location": "be-gen-1",
            "cloudspace": "gpu1-cs",
            "cloudspaceID": cs1,
            "vmName": "gpu1-md-0-rl",
        }
        assert cond(kube, vm, "ClusterLabelUnchanged")["status"] == "True"
        made = emulator.op_count("createVirtualMachine")

        kube.merge(vm, {"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "gpu2"}}})
        assert wait_for(lambda: cond(kube, vm, "ClusterLabelUnchanged").get("reason") == "ClusterLabelChanged", 30)
        got = cond(kube, vm, "ClusterLabelUnchanged")
        assert got["status"] == "False" and "says 'gpu2', but this machine is cluster gpu1's" in got["message"]
        assert "ClusterLabelChanged" in reasons(kube)
        before = drift_passes(ctl)
        assert wait_for(lambda: drift_passes(ctl) >= before + 3, 30)
        assert emulator.op_count("createVirtualMachine") == made, "no VM for the new label"
        with emulator.client() as client:
            assert client.vms(cs2) == [] and [v["name"] for v in client.vms(cs1)] == ["gpu1-md-0-rl"]
        got = status(kube, vm)
        assert got["ready"] is True and "failureReason" not in got and got["placement"] == placement
        assert reasons(kube).count("ClusterLabelChanged") == 1, "one Warning, not one per pass"

        assert kube.delete(vm)[0] == 200
        assert wait_for(lambda: kube.get(vm) is None, 60), ctl.text()[-3000:]
        with emulator.client() as client:
            assert client.vms(cs1) == [] and client.vms(cs2) == []
        assert live(emulator, "gpu1") == [] and live(emulator, "gpu2") == []
        assert emulator.ledger()["accruing"] == 0
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]


def test_a_clusters_cloudspace_and_location_cannot_change_and_a_machine_never_moves(kube, emulator, tmp_path):
    """Editing a live VCOCluster's spec.cloudspace or spec.location is refused by the API server (the CRD), and a
    machine stays in the cloudspace it recorded even when the VCOCluster's status names another one: a reconcile
    (woken by an edit of the machine) makes no VM there."""
    ctl = Controller(kube, emulator, tmp_path, "--drift-period", "1").start()
    try:
        vc = make_cluster(kube)
        vm, _ = make_machine(kube, "gpu1-md-0-mv", gpu={"type": "NVIDIA A100", "count": 1})
        assert wait_for(lambda: status(kube, vm).get("ready") is True, 60), ctl.text()[-3000:]
        cs = status(kube, vc)["cloudspaceID"]
        for edit in ({"cloudspace": "gpu1-cs-2"}, {"location": "nl-ams-1"}):
            code, out = kube.merge(vc, {"spec": edit})
            assert code == 422 and "cannot change once set" in out["message"], (edit, code, out)
        assert kube.get(vc)["spec"] == dict(kube.get(vc)["spec"], location="be-gen-1", cloudspace="gpu1-cs")
        # the VCOCluster's status says another cloudspace (as if its own were made anew): the machine stays put
        with emulator.client() as client:
            other = client.create_cloudspace(name="gpu1-other", location="be-gen-1")
        code, _ = kube.call(
            "PATCH",
            object_path(vc) + "/status",
            {"status": {"cloudspaceID": str(other)}},
            "application/merge-patch+json",
        )
        assert code == 200
        made, woken = emulator.op_count("createVirtualMachine"), reconciles(ctl, "vcomachine")
        kube.merge(vm, {"metadata": {"annotations": {"example.com/poke": "1"}}})  # a reconcile
        assert wait_for(lambda: reconciles(ctl, "vcomachine") > woken, 30)
        before = drift_passes(ctl)
        assert wait_for(lambda: drift_passes(ctl) >= before + 3, 30)
        assert emulator.op_count("createVirtualMachine") == made
        with emulator.client() as client:
            assert client.vms(str(other)) == [] and [v["name"] for v in client.vms(cs)] == ["gpu1-md-0-mv"]
        got = status(kube, vm)
        assert got["ready"] is True and "failureReason" not in got and got["placement"]["cloudspaceID"] == cs
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]


def test_the_orphan_check_finds_a_vm_with_the_clusters_marker_that_no_machine_accounts_for(kube, emulator, tmp_path):
    """A live VM with gpu1's marker and 2 vGPUs attached, in gpu1's cloudspace, that no VCOMachine accounts for
    (what a machine moved to another cluster left behind): the orphan check reports it with its vGPUs and their
    price, and says clean again once it is gone; a VM of a VCOMachine is never reported."""
    ctl = Controller(kube, emulator, tmp_path, "--drift-period", "1").start()
    try:
        vc = make_cluster(kube, spec={"gpuOrphanGracePeriod": 0})
        vm, _ = make_machine(kube, "gpu1-md-0-ok", gpu={"type": "NVIDIA A100", "count": 1})
        assert wait_for(lambda: status(kube, vm).get("ready") is True, 60), ctl.text()[-3000:]
        assert wait_for(lambda: cond(kube, vc, "GPUReservationsClean").get("reason") == "NoOrphans", 30)
        cs = status(kube, vc)["cloudspaceID"]
        with emulator.client() as client:
            stray = machines.ensure(
                client, cloudspace_id=cs, name="gpu1-md-0-stray", cluster="gpu1", vcpus=2, memory=2048, image_id=12
            )["machine"]
            vgpus.ensure(
                client,
                location="be-gen-1",
                cloudspace_id=cs,
                cluster="gpu1",
                machines=["gpu1-md-0-stray"],
                gpu_type="NVIDIA A100",
                count=2,
            )

        def reported():
            return [v["name"] for v in status(kube, vc).get("gpu", {}).get("unaccountedVMs") or []]

        assert wait_for(lambda: reported() == ["gpu1-md-0-stray"], 30), ctl.text()[-3000:]
        (row,) = status(kube, vc)["gpu"]["unaccountedVMs"]
        assert row == {
            "name": "gpu1-md-0-stray",
            "vmID": stray["vm_id"],
            "cloudspaceID": cs,
            "vgpus": 2,
            "costPerHour": "2.0 EUR",
        }
        got = cond(kube, vc, "GPUReservationsClean")
        assert (got["status"], got["reason"]) == ("False", "UnaccountedVMs")
        assert "gpu1-md-0-stray (%d, 2 vGPU(s), 2.0 EUR)" % stray["vm_id"] in got["message"]
        assert "gpu1-md-0-ok" not in got["message"]
        assert "GPUOrphansFound" in reasons(kube)

        with emulator.client() as client:
            machines.ensure(
                client, cloudspace_id=cs, name="gpu1-md-0-stray", cluster="gpu1", state="absent", force=True
            )
        # deleted by force: gone from the report; its two vGPUs, left reserved, are orphans now
        assert wait_for(lambda: cond(kube, vc, "GPUReservationsClean").get("reason") == "OrphansFound", 30)
        assert reported() == [] and status(kube, vc)["gpu"]["orphans"] == 2
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

        # too few GPUs now: retried with backoff, never terminal, nothing is left reserved for the machine, and its
        # VM is not made (checked before: a VM waiting for its vGPUs would bill its compute)
        retries = ctl.metrics().get('workqueue_retries_total{name="capvco"}', 0)
        made = emulator.op_count("createVirtualMachine")
        big, _ = make_machine(kube, "gpu1-md-0-big", gpu={"type": "NVIDIA A100", "count": 15})
        assert wait_for(lambda: "not enough NVIDIA A100" in cond(kube, big, "GPUsReserved").get("message", ""), 60)
        assert cond(kube, big, "GPUsReserved")["reason"] == "ReconcileFailed"
        assert wait_for(lambda: ctl.metrics()['workqueue_retries_total{name="capvco"}'] >= retries + 2, 60)
        obj = kube.get(big)
        assert "failureReason" not in obj["status"] and obj["status"].get("ready") is not True
        assert obj["status"]["gpu"]["reservations"] == [] and "vmID" not in obj["status"]
        assert emulator.op_count("createVirtualMachine") == made, "no VM for a machine whose vGPUs cannot be had"
        held = sorted(r["vgpu_name"] for r in live(emulator, "gpu1"))
        assert held == sorted(r["name"] for r in status(kube, flaky)["gpu"]["reservations"]), "none of big's"

        # an image the location lacks: terminal at once (not a 404 retried forever), naming the images there
        noimg, _ = make_machine(kube, "gpu1-md-0-img", image=999)
        assert wait_for(lambda: status(kube, noimg).get("failureReason") == "InvalidConfiguration", 60)
        message = status(kube, noimg)["failureMessage"]
        assert "image 999" in message and "location 'be-gen-1' has no such image" in message, message
        assert emulator.op_count("createVirtualMachine") == made
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


def test_the_sriov_label_deploys_the_addon_with_the_agents_own_credential(kube, emulator, tmp_path):
    """The add-on (the sriov_agent role, one ansible-playbook run) is refused while the agent's credential Secret
    holds the cluster's own credential (nothing is applied, the orphan check is still recorded), and is applied to
    the workload cluster once the Secret holds the agent's own; neither credential is ever in the controller's log,
    a condition or an Event."""
    kubeconfig = read_text(kube.kubeconfig)  # the workload cluster: the same fake, here
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "gpu1-kubeconfig", "namespace": "default"},
            "data": {"value": b64(kubeconfig)},
        }
    )
    agent_cred = kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "agent-cred", "namespace": "default"},
            "data": {"token": b64(emulator.token + "\n")},  # the cluster's own, as the agent reads it (stripped)
        }
    )
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    ctl = Controller(
        kube,
        emulator,
        tmp_path,
        "--drift-period",
        "2",
        "--ansible-playbook",
        playbook,
        env={"ANSIBLE_COLLECTIONS_PATH": COLLECTIONS, "ANSIBLE_NOCOLOR": "1"},
    ).start()
    secret_path = "/api/v1/namespaces/capvco-sriov/secrets/capvco-sriov-credential"
    try:
        vc = make_cluster(
            kube,
            labels={"addons.capvco.whitesky.cloud/sriov": "enabled"},
            spec={
                "sriov": {
                    "credentialSecretRef": {"name": "agent-cred"},
                    "networks": [{"name": "sriov-ext", "network": "sriov-ext"}],
                }
            },
        )
        # the cluster's own credential is refused as the agent's
        assert wait_for(lambda: cond(kube, vc, "SRIOVAddonReady").get("reason") == "DeployFailed", 240), ctl.text()[
            -4000:
        ]
        refused = cond(kube, vc, "SRIOVAddonReady")
        assert refused["status"] == "False" and "cluster's own credential" in refused["message"], refused
        assert status(kube, vc)["ready"] is True and "failureReason" not in status(kube, vc), "not terminal"
        assert cond(kube, vc, "GPUReservationsClean").get("status") == "True", "the orphan check is still recorded"
        assert wait_for(lambda: "SRIOVAddonFailed" in reasons(kube), 30)
        failed = [e for e in kube.events() if e["reason"] == "SRIOVAddonFailed"]
        assert failed[0]["type"] == "Warning" and "cluster's own credential" in failed[0]["message"]
        assert wait_for(lambda: "the SR-IOV add-on: " in ctl.text(), 30)  # the retry, logged
        assert kube.get(("apps/v1", "DaemonSet"), "capvco-sriov-agent", "capvco-sriov") is None, "nothing applied"
        assert kube.call("GET", secret_path)[0] == 404

        # the agent's own credential: the next try (the drift pass's, the add-on not applied yet) applies it
        kube.merge(agent_cred, {"data": {"token": b64("agent-token-123")}})
        assert wait_for(lambda: cond(kube, vc, "SRIOVAddonReady").get("status") == "True", 240), ctl.text()[-4000:]
        assert cond(kube, vc, "SRIOVAddonReady")["reason"] == "Deployed"
        assert kube.get(("apps/v1", "DaemonSet"), "capvco-sriov-agent", "capvco-sriov") is not None
        secret = kube.call("GET", secret_path)[1]
        assert base64.b64decode(secret["data"]["token"]).decode() == "agent-token-123"
        nad = kube.call("GET", "/apis/k8s.cni.cncf.io/v1/namespaces/default/network-attachment-definitions/sriov-ext")
        assert nad[0] == 200
        for where, text in [
            ("the controller's log", ctl.text()),
            ("the conditions", str(status(kube, vc).get("conditions"))),
            ("the Events", str(kube.events())),
        ]:
            assert emulator.token not in text, where
            assert "agent-token-123" not in text, where
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]


def test_gpu_driver_ready_follows_the_first_boots_report(kube, emulator, tmp_path):
    """WaitingForFirstBoot, then a report that fails (one Warning Event however many polls), then one that verifies
    the pinned driver; from then on the first boot is not read again, by the polls or the drift passes."""
    ctl = Controller(kube, emulator, tmp_path, "--drift-period", "1", "--driver-poll", "1").start()
    try:
        make_cluster(kube)
        vm, _ = make_machine(kube, "gpu1-md-0-drv", gpu=A100x2)
        assert wait_for(lambda: cond(kube, vm, "GPUDriverReady").get("reason") == "WaitingForFirstBoot", 90), (
            ctl.text()[-3000:]
        )
        obj = kube.get(vm)
        got = condition(obj, "GPUDriverReady")
        assert (got["status"], got["reason"]) == ("Unknown", "WaitingForFirstBoot") and obj["status"]["ready"] is True
        script = user_data(emulator, "gpu1-md-0-drv")["text/x-shellscript"]
        assert "GPU_DRIVER_VERSION=550\nGPU_COUNT=2\n" in script and "gpu_driver_install" in script
        assert script.index("gpu_driver_verify\n") < script.index('STEP="done"'), "the driver step runs in first boot"

        guest_reports(emulator, tmp_path, obj["status"]["vmID"], "535.183.01", 2)
        assert wait_for(lambda: cond(kube, vm, "GPUDriverReady").get("reason") == "FirstBootFailed", 60), ctl.text()[
            -3000:
        ]
        got = cond(kube, vm, "GPUDriverReady")
        assert (got["status"], got["reason"]) == ("False", "FirstBootFailed")
        assert v1beta1_condition(kube.get(vm), "GPUDriverReady")["severity"] == "Error"
        assert "failed at gpu-driver: driver version 535.183.01 does not match the pin 550" in got["message"]
        assert "failureReason" not in status(kube, vm), "a first boot can be run again: not terminal"
        # the polls go on (every second), and say it again: one Event, not one per poll
        polled = emulator.op_count("readFile")
        assert wait_for(lambda: emulator.op_count("readFile") >= polled + 3, 60)
        assert reasons(kube).count("GPUDriverFailed") == 1, "one event, not one per poll"

        guest_reports(emulator, tmp_path, obj["status"]["vmID"], "550.127.05", 2)
        assert wait_for(lambda: cond(kube, vm, "GPUDriverReady").get("reason") == "DriverVerified", 60)
        got = cond(kube, vm, "GPUDriverReady")
        assert (got["status"], got["message"]) == ("True", "NVIDIA driver 550.127.05, 2 GPU(s)")
        assert reasons(kube).count("GPUDriverFailed") == 1

        # converged, the driver verified: the polls stop, the drift passes find nothing; nothing reads the first boot
        # or the VM by itself, nothing is written
        settled = drift_passes(ctl)
        assert wait_for(lambda: drift_passes(ctl) >= settled + 2, 30)  # the cache has the verdict by now
        emulator.reset_stats()
        kube.call("DELETE", "/_fake/requests")
        before = drift_passes(ctl)
        assert wait_for(lambda: drift_passes(ctl) >= before + 3, 30)
        seen = ops(emulator)
        assert "readFile" not in seen and "getVirtualMachineInfo" not in seen, seen
        assert not set(seen) & set(MUTATING), seen
        assert [r for r in kube.requests() if r["method"] in MUTATING_K8S] == []
        assert cond(kube, vm, "GPUDriverReady")["status"] == "True"
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]


def test_gpu_driver_ready_says_when_the_machine_is_gone(kube, emulator, tmp_path):
    """The VM is deleted on the platform behind the controller's back while a driver poll is under way: its read of
    the first boot finds no file, and then no VM, and GPUDriverReady says MachineNotFound (once: one Event, and no
    more polls); the reconcile that follows at once reads the VM by its id, reports it lost (VMDeleted) and releases
    its reservations, and never makes it again: not this process, nor a restarted one.

    The moment is made with the emulator's latency: every API request waits LATENCY seconds before it is answered,
    so a delete sent once the poll's readFile has arrived is answered after the poll's read of the VM (which came
    before the readFile) and before the poll's check of the VM (which comes after it)."""
    latency = 4.0
    ctl = Controller(kube, emulator, tmp_path, "--driver-poll", "1").start()
    try:
        make_cluster(kube)
        vm, _ = make_machine(kube, "gpu1-md-0-gone", gpu=A100x2)
        assert wait_for(lambda: cond(kube, vm, "GPUDriverReady").get("reason") == "WaitingForFirstBoot", 90), (
            ctl.text()[-3000:]
        )
        obj = kube.get(vm)
        vm_id, cs = obj["status"]["vmID"], obj["spec"]["providerID"].split("/")[3]
        emulator.faults(latency_ms=latency * 1000)
        polled = emulator.op_count("readFile")
        assert wait_for(lambda: emulator.op_count("readFile") > polled, 60)
        with emulator.client(timeout=30) as client:
            client.delete_vm(cs, vm_id, permanently=True, detach_gpu=True)
        assert wait_for(lambda: cond(kube, vm, "GPUDriverReady").get("reason") == "MachineNotFound", 60), ctl.text()[
            -3000:
        ]
        emulator.faults()
        got = cond(kube, vm, "GPUDriverReady")
        assert (got["status"], got["reason"]) == ("False", "MachineNotFound")
        assert v1beta1_condition(kube.get(vm), "GPUDriverReady")["severity"] == "Error"
        assert got["message"].startswith("VM %d does not exist in cloudspace " % vm_id), got
        assert reasons(kube).count("GPUDriverFailed") == 1
        # at once (no drift pass runs here: the period is the shipped one): reported lost, its vGPUs released
        assert wait_for(lambda: status(kube, vm).get("failureReason") == "UpdateError", 30), ctl.text()[-3000:]
        assert cond(kube, vm, "Ready")["reason"] == "VMDeleted" and live(emulator, "gpu1") == []
        # no more polls of a machine that is gone: nothing waits in the queue but the location's next drift pass
        emulator.reset_stats()
        assert wait_for(lambda: ctl.metrics()['workqueue_depth{name="capvco"}'] == 0, 30)
        assert ctl.metrics()["capvco_workqueue_delayed"] == 1
        assert "readFile" not in ops(emulator)
    finally:
        emulator.faults()
        assert ctl.stop() == 0, ctl.text()[-3000:]

    # a restarted controller makes nothing again either: the machine's failure is terminal, its owner replaces it
    made = emulator.op_count("createVirtualMachine")
    again = Controller(kube, emulator, tmp_path, "--driver-poll", "1", "--drift-period", "1").start()
    try:
        before = drift_passes(again)
        assert wait_for(lambda: drift_passes(again) >= before + 2, 30), again.text()[-3000:]
        assert emulator.op_count("createVirtualMachine") == made and reasons(kube).count("VMCreated") == 1
        with emulator.client() as client:
            assert client.vms(cs) == []
        assert status(kube, vm)["failureReason"] == "UpdateError" and live(emulator, "gpu1") == []
        assert emulator.ledger()["double_reservations"] == 0
    finally:
        assert again.stop() == 0, again.text()[-3000:]


def test_a_cluster_name_is_claimed_once_per_location(kube, emulator, tmp_path):
    ctl = Controller(kube, emulator, tmp_path).start()
    try:
        first = make_cluster(kube)
        assert wait_for(lambda: status(kube, first).get("ready") is True, 60), ctl.text()[-3000:]
        second = make_cluster(kube, namespace="team-b")
        assert wait_for(lambda: status(kube, second).get("failureReason"), 60), ctl.text()[-3000:]
        got = status(kube, second)
        assert got["failureReason"] == "ClusterNameInUse" and "default" in got["failureMessage"]
        assert got["ready"] is False and "gpuOwner" not in got
        assert "ClusterNameInUse" in reasons(kube, "team-b")
        elsewhere = make_cluster(kube, namespace="team-c", location="nl-ams-1")
        assert wait_for(lambda: status(kube, elsewhere).get("ready") is True, 60), ctl.text()[-3000:]
        with emulator.client() as client:
            spaces = [(c["name"], c["location"]) for c in client.cloudspaces() if c["name"] == "gpu1-cs"]
        assert sorted(spaces) == [("gpu1-cs", "be-gen-1"), ("gpu1-cs", "nl-ams-1")]
        assert status(kube, second)["failureReason"] == "ClusterNameInUse", "terminal: never claimed later"
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]


def reconciles(ctl, controller):
    """The reconciles of ``controller`` (vcomachine, vcocluster) the process has made, whatever their result."""
    prefix = 'controller_runtime_reconcile_total{controller="%s"' % controller
    return sum(v for k, v in ctl.metrics().items() if k.startswith(prefix))


def test_two_controllers_without_leader_election_and_a_reconcile_beside_a_playbook(kube, emulator, tmp_path):
    """Two controller processes without leader election (two work queues) on the same objects: one cloudspace, one
    VM, each vGPU slot bought once. A new machine reconciled by the process while the orphan reclaim playbook runs
    (reclaim=true, grace_period=0): the reclaim takes none of its reservations."""
    emulator.faults(latency_ms=10)
    one = Controller(kube, emulator, tmp_path).start()
    two = Controller(kube, emulator, tmp_path).start()
    try:
        vc = make_cluster(kube)
        assert wait_for(lambda: status(kube, vc).get("ready") is True, 60), one.text()[-3000:] + two.text()[-3000:]
        with emulator.client() as client:
            spaces = [c for c in client.cloudspaces() if c["name"] == "gpu1-cs"]
            assert len(spaces) == 1 and cloudspaces.creator(client, spaces[0]["cloudspace_id"]) == "gpu1"
        cs = spaces[0]["cloudspace_id"]
        assert status(kube, vc)["cloudspaceID"] == cs
        assert wait_for(lambda: all(reconciles(c, "vcocluster") >= 1 for c in (one, two)), 60), "both reconcile it"

        vm, _ = make_machine(kube, "gpu1-md-0-two", gpu=A100x2)
        assert wait_for(lambda: status(kube, vm).get("ready") is True, 90), one.text()[-3000:] + two.text()[-3000:]
        assert wait_for(lambda: all(reconciles(c, "vcomachine") >= 1 for c in (one, two)), 60), "both reconcile it"
        assert wait_for(lambda: len(live(emulator, "gpu1")) == 2, 30)
        held = live(emulator, "gpu1")
        assert sorted(naming.decode(r["vgpu_name"]).slot for r in held) == [0, 1], "two slots, each bought once"
        assert emulator.ledger()["double_reservations"] == 0
        with emulator.client() as client:
            assert [v["name"] for v in client.vms(cs)] == ["gpu1-md-0-two"]
        recorded = status(kube, vm)["gpu"]["reservations"]
        assert sorted(r["vgpu_id"] for r in held) == sorted(r["vgpuID"] for r in recorded)

        # a new machine, reconciled beside the orphan reclaim
        result = {}

        def reclaim():
            result["run"] = run_playbook(
                os.path.join(ROOT, "playbooks", "gpu_orphans.yml"),
                emulator,
                {"location": "be-gen-1", "reclaim": True, "grace_period": 0},
            )

        # the reclaim's first read of the cloudspaces fails (503) and is retried with backoff for several seconds; the
        # machine is made once that read has arrived, so its VM and its reservations are made while the reclaim runs
        # (the controllers do not list cloudspaces between drift passes)
        emulator.faults(latency_ms=10, fail_next={"listCloudspaces": [503, 4]})
        listed = emulator.op_count("listCloudspaces")
        thread = threading.Thread(target=reclaim, daemon=True)
        thread.start()
        assert wait_for(lambda: emulator.op_count("listCloudspaces") > listed, 300)
        made = emulator.op_count("createVirtualMachine"), emulator.op_count("reserveAndAttachVGPUToVM")
        other, _ = make_machine(kube, "gpu1-md-0-three", gpu=A100x2)
        thread.join(600)
        assert not thread.is_alive()
        during = emulator.op_count("createVirtualMachine"), emulator.op_count("reserveAndAttachVGPUToVM")
        rc, out, _data = result["run"]
        assert rc == 0, out[-3000:]
        assert during[0] >= made[0] + 1 and during[1] >= made[1] + 2, "the machine was made while the reclaim ran"
        assert wait_for(lambda: status(kube, other).get("ready") is True, 90), one.text()[-3000:]
        ledger = emulator.ledger()
        mine = [r for r in ledger["reservations"] if naming.owned_by(naming.decode(r["vgpu_name"]), "gpu1")]
        assert [r["vgpu_name"] for r in mine if r["deleted_at"] is not None] == [], "the reclaim released none"
        assert len(live(emulator, "gpu1")) == 4, "the reclaim took none of the new machine's reservations"
        assert ledger["double_reservations"] == 0
        recorded = {r["vgpuID"] for o in (vm, other) for r in status(kube, o)["gpu"]["reservations"]}
        assert recorded == {r["vgpu_id"] for r in live(emulator, "gpu1")}
    finally:
        emulator.faults()
        codes = [c.stop() for c in (one, two)]
        assert codes == [0, 0], one.text()[-3000:] + two.text()[-3000:]
