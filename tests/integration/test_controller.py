"""The controller's reconcile playbooks, run with the Ansible operator's variables.

The platform is the emulator; Kubernetes is tests/kubefake.py, a fake API
server over real HTTP (the client boundary), reached by the real kubernetes
client and kubernetes.core modules through K8S_AUTH_KUBECONFIG, as inside the
operator. The objects each run gets are read back from the fake first, as the
operator does.
"""

from __future__ import annotations

import base64
import email
import os
import sqlite3
import subprocess

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import script as firstboot_sh
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import machine as machines

from helpers import ROOT, operator_vars, read_text, run_playbook, task_results
from test_gpu import live, three_ways

PLAYS = os.path.join(ROOT, "playbooks")
IV = "infrastructure.cluster.x-k8s.io/v1beta1"
CV = "cluster.x-k8s.io/v1beta1"
MUTATING_K8S = ("POST", "PUT", "PATCH", "DELETE")


def b64(text):
    return base64.b64encode(text.encode()).decode()


def reconcile(kube, emulator, playbook, obj, expect_rc=0):
    rc, out, data = run_playbook(os.path.join(PLAYS, playbook), emulator, operator_vars(kube.get(obj)), env=kube.env())
    assert rc == expect_rc, out[-4000:]
    return data


def changed(data):
    return sum(h["changed"] for h in data["stats"].values())


def make_cluster(kube, name="gpu1", namespace="default", location="be-gen-1", labels=None, spec=None):
    if namespace != "default" and kube.get(("v1", "Namespace"), namespace) is None:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    cluster = kube.create(
        {
            "apiVersion": CV,
            "kind": "Cluster",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"infrastructureRef": {"apiVersion": IV, "kind": "VCOCluster", "name": name}},
        }
    )
    return kube.create(
        {
            "apiVersion": IV,
            "kind": "VCOCluster",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels or {},
                "finalizers": ["vcocluster.infrastructure.cluster.x-k8s.io"],
                "ownerReferences": [
                    {"apiVersion": CV, "kind": "Cluster", "name": name, "uid": cluster["metadata"]["uid"]}
                ],
            },
            "spec": dict({"location": location, "cloudspace": name + "-cs"}, **(spec or {})),
        }
    )


def make_machine(kube, name, cluster="gpu1", gpu=None, owned=True, bootstrap=True):
    machine = kube.create(
        {
            "apiVersion": CV,
            "kind": "Machine",
            "metadata": {"name": name, "namespace": "default", "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
            "spec": {
                "clusterName": cluster,
                "bootstrap": {"dataSecretName": name} if bootstrap else {},
                "infrastructureRef": {"apiVersion": IV, "kind": "VCOMachine", "name": name},
            },
        }
    )
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": "default"},
            "data": {
                "value": b64("#cloud-config\nruncmd: [[kubeadm, join, --config, /run/kubeadm.yaml]]\n"),
                "format": b64("cloud-config"),
            },
        }
    )
    meta = {
        "name": name,
        "namespace": "default",
        "labels": {"cluster.x-k8s.io/cluster-name": cluster},
        "finalizers": ["vcomachine.infrastructure.cluster.x-k8s.io"],
    }
    if owned:
        meta["ownerReferences"] = [
            {"apiVersion": CV, "kind": "Machine", "name": name, "uid": machine["metadata"]["uid"]}
        ]
    spec = {"vcpus": 4, "memory": 8192}
    if gpu:
        spec["gpu"] = gpu
    return kube.create({"apiVersion": IV, "kind": "VCOMachine", "metadata": meta, "spec": spec}), machine


def condition(obj, ctype):
    return next((c for c in obj["status"].get("conditions", []) if c["type"] == ctype), None)


def write_requests(kube):
    return [(r["method"], r["path"], r["content_type"]) for r in kube.requests() if r["method"] in MUTATING_K8S]


A100x2 = {"type": "NVIDIA A100", "count": 2, "driverVersion": "550"}


def test_machine_create_rerun_and_delete_through_the_finalizer(kube, emulator):
    vc = make_cluster(kube)
    reconcile(kube, emulator, "vcocluster_reconcile.yml", vc)
    status = kube.get(vc)["status"]
    assert status["ready"] is True and status["gpuOwner"] == "gpu1" and "cloudspaceCreated" not in status
    with emulator.client() as client:  # the cloudspace is the cluster's by a note on it
        assert cloudspaces.creator(client, status["cloudspaceID"]) == "gpu1"
    assert condition(kube.get(vc), "GPUReservationsClean")["status"] == "True"
    assert changed(reconcile(kube, emulator, "vcocluster_reconcile.yml", vc)) == 0

    # CAPI's order: no owner Machine yet, then no bootstrap data yet; the reconcile waits, and creates nothing
    vm, machine = make_machine(kube, "gpu1-md-0-abc", gpu=A100x2, owned=False, bootstrap=False)
    reconcile(kube, emulator, "vcomachine_reconcile.yml", vm)
    assert condition(kube.get(vm), "VMProvisioned")["reason"] == "WaitingForOwnerMachine"
    kube.merge(
        vm,
        {
            "metadata": {
                "ownerReferences": [
                    {
                        "apiVersion": CV,
                        "kind": "Machine",
                        "name": machine["metadata"]["name"],
                        "uid": machine["metadata"]["uid"],
                    }
                ]
            }
        },
    )
    reconcile(kube, emulator, "vcomachine_reconcile.yml", vm)
    assert condition(kube.get(vm), "VMProvisioned")["reason"] == "WaitingForBootstrapData"
    assert emulator.op_count("createVirtualMachine") == 0
    kube.merge(machine, {"spec": {"bootstrap": {"dataSecretName": "gpu1-md-0-abc"}}})

    call = kube.call("DELETE", "/_fake/requests")
    assert call[0] == 200
    data = reconcile(kube, emulator, "vcomachine_reconcile.yml", vm)
    obj = kube.get(vm)
    cs = kube.get(vc)["status"]["cloudspaceID"]
    assert obj["spec"]["providerID"] == "whitesky://be-gen-1/%s/gpu1-md-0-abc" % cs
    assert obj["status"]["ready"] is True and isinstance(obj["status"]["vmID"], int)
    reservations = obj["status"]["gpu"]["reservations"]
    assert len(reservations) == 2 and all(r["attached"] for r in reservations)
    assert all(r["name"].startswith("capvco.gpu1.gpu1-md-0-abc.0") for r in reservations)
    assert sorted(r["name"] for r in reservations) == sorted(r["vgpu_name"] for r in live(emulator, "gpu1"))
    assert condition(obj, "GPUsReserved")["status"] == "True"
    assert sorted(e["reason"] for e in kube.events()) == ["CloudspaceCreated", "VMCreated"]
    # the bootstrap data is wrapped by the retried first boot, which hands the providerID to the kubelet
    db = sqlite3.connect(os.path.join(emulator.state_dir, "state.db"))
    raw = db.execute("SELECT user_data FROM vms WHERE name='gpu1-md-0-abc'").fetchone()[0]
    parts = {
        p.get_content_type(): p.get_payload(decode=True).decode()
        for p in email.message_from_string(raw).walk()
        if not p.is_multipart()
    }
    assert set(parts) == {"text/cloud-config", "text/x-shellscript"}
    user_data = "\n".join(parts.values())
    assert "kubeadm, join" in user_data and "capvco first boot" in user_data
    assert "--provider-id=" + obj["spec"]["providerID"] in user_data
    # every write went through the one seam: status, providerID and Events of our own kinds
    writes = write_requests(kube)
    targets = {
        (m, "status" if p.endswith("/status") else p.split("/")[-1 if m == "POST" else -2]) for m, p, _ in writes
    }
    assert targets == {("PATCH", "status"), ("PATCH", "vcomachines"), ("POST", "events")}
    assert all(ct == "application/merge-patch+json" for m, _, ct in writes if m == "PATCH")
    assert task_results(data, "Record the machine as ready, with its reservations")[0]["changed"]

    # a re-run changes nothing, on the platform or in Kubernetes, and costs at most three reads (the VM it recorded,
    # and the first boot's report until the driver is verified)
    emulator.reset_stats()
    kube.call("DELETE", "/_fake/requests")
    assert changed(reconcile(kube, emulator, "vcomachine_reconcile.yml", vm)) == 0
    ops = emulator.stats()["operations"]
    assert set(ops) <= {"getVirtualMachineInfo", "readFile"}, ops
    assert sum(op["count"] for op in ops.values()) <= 3, ops
    assert write_requests(kube) == []
    # a vGPU detached behind the controller's back: the VM is not as recorded, so the reconcile converges it again
    with emulator.client() as client:
        client.detach_vgpu(cs, obj["status"]["vmID"], reservations[0]["vgpuID"])
    reconcile(kube, emulator, "vcomachine_reconcile.yml", vm)
    with emulator.client() as client:
        attached = {vgpu for vm in client.vms(cs) for vgpu in machines.vm_view(vm)["vgpus"]}
    assert attached == {r["vgpuID"] for r in reservations}
    assert all(r["attached"] for r in kube.get(vm)["status"]["gpu"]["reservations"])

    # deletion: the API server marks it, the operator runs the finalizer playbook
    assert kube.delete(vm)[0] == 200
    assert kube.get(vm)["metadata"]["deletionTimestamp"]
    reconcile(kube, emulator, "vcomachine_delete.yml", vm)
    assert live(emulator, "gpu1") == []
    with emulator.client() as client:
        assert [v["name"] for v in client.vms(cs)] == []
    assert emulator.ledger()["accruing"] == 0


def test_force_deleted_machine_is_reported_then_swept_by_the_cluster_finalizer(kube, emulator):
    vc = make_cluster(kube, spec={"gpuOrphanGracePeriod": 0})
    reconcile(kube, emulator, "vcocluster_reconcile.yml", vc)
    vm, _ = make_machine(kube, "gpu1-md-0-f1", gpu=A100x2)
    keep, _ = make_machine(kube, "gpu1-md-0-k1", gpu={"type": "NVIDIA A100", "count": 1})
    reconcile(kube, emulator, "vcomachine_reconcile.yml", vm)
    reconcile(kube, emulator, "vcomachine_reconcile.yml", keep)
    assert len(live(emulator, "gpu1")) == 3

    kube.merge(vm, {"metadata": {"annotations": {"capvco.whitesky.cloud/force-delete": "true"}}})
    kube.delete(vm)
    reconcile(kube, emulator, "vcomachine_delete.yml", vm)
    left = live(emulator, "gpu1")
    assert len(left) == 3  # the force-deleted machine's two are still reserved and billed

    # the periodic orphan check reports them: a condition, status.gpu and a Warning Event
    reconcile(kube, emulator, "vcocluster_reconcile.yml", vc)
    obj = kube.get(vc)
    cond = condition(obj, "GPUReservationsClean")
    assert cond["status"] == "False" and cond["reason"] == "OrphansFound" and cond["severity"] == "Warning"
    assert obj["status"]["gpu"]["orphans"] == 2
    assert all(n.startswith("capvco.gpu1.gpu1-md-0-f1.") for n in obj["status"]["gpu"]["orphanNames"])
    warnings = [e for e in kube.events() if e["type"] == "Warning"]
    assert [e["reason"] for e in warnings] == ["GPUOrphansFound"] and "gpu1-md-0-f1" in warnings[0]["message"]

    # Cluster API deletes the remaining machine, then the cluster: the finalizer sweeps everything the cluster owns
    kube.delete(keep)
    reconcile(kube, emulator, "vcomachine_delete.yml", keep)
    kube.delete(vc)
    reconcile(kube, emulator, "vcocluster_delete.yml", vc)
    assert live(emulator, "gpu1") == []
    assert emulator.ledger()["accruing"] == 0
    with emulator.client() as client:
        assert [c["name"] for c in client.cloudspaces() if c["name"] == "gpu1-cs"] == []


def test_invalid_input_is_terminal_and_platform_errors_are_retried(kube, emulator):
    vc = make_cluster(kube)
    reconcile(kube, emulator, "vcocluster_reconcile.yml", vc)
    bad, _ = make_machine(kube, "gpu1-md-0-bad", gpu={"type": "NVIDIA Z9000", "count": 1})
    reconcile(kube, emulator, "vcomachine_reconcile.yml", bad)
    obj = kube.get(bad)
    assert obj["status"]["failureReason"] == "InvalidConfiguration"
    assert "NVIDIA Z9000" in obj["status"]["failureMessage"] and "NVIDIA A100" in obj["status"]["failureMessage"]
    assert condition(obj, "GPUsReserved")["status"] == "False" and obj["status"]["ready"] is False
    assert "InvalidConfiguration" in [e["reason"] for e in kube.events()]
    emulator.reset_stats()
    reconcile(kube, emulator, "vcomachine_reconcile.yml", bad)  # terminal: nothing more is tried
    assert emulator.stats()["operations"] == {}

    flaky, _ = make_machine(kube, "gpu1-md-0-fl", gpu={"type": "NVIDIA A100", "count": 1})
    emulator.faults(fail_next={"reserveAndAttachVGPUToVM": [500, 1]})
    reconcile(kube, emulator, "vcomachine_reconcile.yml", flaky, expect_rc=2)
    obj = kube.get(flaky)
    assert "failureReason" not in obj["status"] and obj["status"].get("ready") is not True
    assert condition(obj, "GPUsReserved")["reason"] == "ReconcileFailed"
    reconcile(kube, emulator, "vcomachine_reconcile.yml", flaky)  # the operator's retry
    obj = kube.get(flaky)
    assert obj["status"]["ready"] is True and len(obj["status"]["gpu"]["reservations"]) == 1
    assert condition(obj, "GPUsReserved")["status"] == "True"


def test_a_cluster_name_is_claimed_once_per_location(kube, emulator):
    first = make_cluster(kube)
    reconcile(kube, emulator, "vcocluster_reconcile.yml", first)
    second = make_cluster(kube, namespace="team-b")
    reconcile(kube, emulator, "vcocluster_reconcile.yml", second)
    obj = kube.get(second)
    assert obj["status"]["failureReason"] == "ClusterNameInUse" and "default" in obj["status"]["failureMessage"]
    with emulator.client() as client:
        assert [c["name"] for c in client.cloudspaces()].count("gpu1-cs") == 1
    elsewhere = make_cluster(kube, namespace="team-c", location="nl-ams-1")
    reconcile(kube, emulator, "vcocluster_reconcile.yml", elsewhere)
    assert kube.get(elsewhere)["status"]["ready"] is True


def test_the_sriov_label_deploys_the_addon_with_the_agents_own_credential(kube, emulator):
    kubeconfig = read_text(kube.kubeconfig)  # the workload cluster: the same fake, here
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "gpu1-kubeconfig", "namespace": "default"},
            "data": {"value": b64(kubeconfig)},
        }
    )
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "agent-cred", "namespace": "default"},
            "data": {"token": b64("agent-token-123")},
        }
    )
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
    reconcile(kube, emulator, "vcocluster_reconcile.yml", vc)
    assert condition(kube.get(vc), "SRIOVAddonReady")["status"] == "True"
    ds = kube.get(("apps/v1", "DaemonSet"), "capvco-sriov-agent", "capvco-sriov")
    assert ds is not None
    secret = kube.call("GET", "/api/v1/namespaces/capvco-sriov/secrets/capvco-sriov-credential")[1]
    assert base64.b64decode(secret["data"]["token"]).decode() == "agent-token-123"
    nad = kube.call("GET", "/apis/k8s.cni.cncf.io/v1/namespaces/default/network-attachment-definitions/sriov-ext")
    assert nad[0] == 200

    # the cluster's own credential is refused as the agent's
    kube.merge(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "agent-cred", "namespace": "default"}},
        {"data": {"token": b64(emulator.token)}},
    )
    rc, out, _ = run_playbook(
        os.path.join(PLAYS, "vcocluster_reconcile.yml"), emulator, operator_vars(kube.get(vc)), env=kube.env()
    )
    assert rc != 0 and "cluster's own credential" in out
    assert emulator.token not in out


def test_too_few_gpus_now_is_retried_not_terminal(kube, emulator):
    vc = make_cluster(kube)
    reconcile(kube, emulator, "vcocluster_reconcile.yml", vc)
    big, _ = make_machine(kube, "gpu1-md-0-big", gpu={"type": "NVIDIA A100", "count": 15})
    reconcile(kube, emulator, "vcomachine_reconcile.yml", big, expect_rc=2)
    obj = kube.get(big)
    assert "failureReason" not in obj["status"]
    cond = condition(obj, "GPUsReserved")
    assert cond["reason"] == "ReconcileFailed" and "not enough NVIDIA A100" in cond["message"]
    assert live(emulator, "gpu1") == [] and obj["status"]["gpu"]["reservations"] == []


STUB_SMI = """#!/bin/sh
i=0
while [ "$i" -lt %d ]; do echo "%s, NVIDIA A100-SXM4-40GB"; i=$((i + 1)); done
"""


def guest_reports(emulator, tmp_path, vm_id, smi_version, smi_count):
    """The VM's guest writes its first-boot status: the status the collection's real gpu-driver step writes (run
    here, with no install, against a stub nvidia-smi), served by the emulator's readFile as the guest agent would."""
    stub = tmp_path / "nvidia-smi"
    stub.write_text(STUB_SMI % (smi_count, smi_version))
    stub.chmod(0o755)
    state = tmp_path / ("state-%s-%d" % (smi_version, smi_count))
    script = render.render_gpu_driver("550", 2, install=False, wait=0, nvidia_smi=str(stub), state_dir=str(state))
    subprocess.run(["/bin/sh", "-s"], input=script, text=True, capture_output=True, check=False)
    content = (state / "gpu-driver.status").read_text()
    emulator.admin("POST", "/vm-file", {"vm_id": vm_id, "path": firstboot_sh.STATUS_FILE, "content": content})


def test_gpu_driver_ready_follows_the_first_boots_report(kube, emulator, tmp_path):
    vc = make_cluster(kube)
    reconcile(kube, emulator, "vcocluster_reconcile.yml", vc)
    vm, _ = make_machine(kube, "gpu1-md-0-drv", gpu=A100x2)
    reconcile(kube, emulator, "vcomachine_reconcile.yml", vm)
    obj = kube.get(vm)
    cond = condition(obj, "GPUDriverReady")
    assert (cond["status"], cond["reason"]) == ("Unknown", "WaitingForFirstBoot") and obj["status"]["ready"] is True
    db = sqlite3.connect(os.path.join(emulator.state_dir, "state.db"))
    user_data = db.execute("SELECT user_data FROM vms WHERE name='gpu1-md-0-drv'").fetchone()[0]
    script = [p for p in email.message_from_string(user_data).walk() if p.get_content_type() == "text/x-shellscript"]
    text = script[0].get_payload(decode=True).decode()
    assert "GPU_DRIVER_VERSION=550\nGPU_COUNT=2\n" in text and "gpu_driver_install" in text
    assert text.index("gpu_driver_verify\n") < text.index('STEP="done"'), "the driver step runs in the first boot"

    guest_reports(emulator, tmp_path, obj["status"]["vmID"], "535.183.01", 2)
    reconcile(kube, emulator, "vcomachine_reconcile.yml", vm)
    obj = kube.get(vm)
    cond = condition(obj, "GPUDriverReady")
    assert (cond["status"], cond["reason"], cond["severity"]) == ("False", "FirstBootFailed", "Error")
    assert "failed at gpu-driver: driver version 535.183.01 does not match the pin 550" in cond["message"]
    assert "failureReason" not in obj["status"], "a first boot can be run again: not terminal"
    reconcile(kube, emulator, "vcomachine_reconcile.yml", vm)
    assert [e["reason"] for e in kube.events()].count("GPUDriverFailed") == 1, "one event, not one per reconcile"

    guest_reports(emulator, tmp_path, obj["status"]["vmID"], "550.127.05", 2)
    reconcile(kube, emulator, "vcomachine_reconcile.yml", vm)
    cond = condition(kube.get(vm), "GPUDriverReady")
    assert (cond["status"], cond["reason"]) == ("True", "DriverVerified")
    assert cond["message"] == "NVIDIA driver 550.127.05, 2 GPU(s)"
    # converged, the driver verified: an idle reconcile reads the VM it recorded, once, and writes nothing
    emulator.reset_stats()
    kube.call("DELETE", "/_fake/requests")
    assert changed(reconcile(kube, emulator, "vcomachine_reconcile.yml", vm)) == 0
    assert {k: v["count"] for k, v in emulator.stats()["operations"].items()} == {"getVirtualMachineInfo": 1}
    assert write_requests(kube) == []


def test_gpu_driver_ready_says_when_the_machine_is_gone(kube, emulator):
    """first_boot_info fails naming a VM that does not exist (every other error of readFile is "not yet"), and the
    reconcile records GPUDriverReady False with MachineNotFound: here the reconcile is handed a VM id the platform
    does not have, as when the VM is deleted between the reconcile's machine step and its first-boot read."""
    vc = make_cluster(kube)
    reconcile(kube, emulator, "vcocluster_reconcile.yml", vc)
    vm, _ = make_machine(kube, "gpu1-md-0-gone", gpu=A100x2)
    reconcile(kube, emulator, "vcomachine_reconcile.yml", vm)
    assert condition(kube.get(vm), "GPUDriverReady")["reason"] == "WaitingForFirstBoot"
    gone = dict(
        operator_vars(kube.get(vm)), capvco_vm={"machine": {"vm_id": 424242}, "changed": False}, capvco_converged=False
    )
    rc, out, _ = run_playbook(os.path.join(PLAYS, "vcomachine_reconcile.yml"), emulator, gone, env=kube.env())
    assert rc == 0, out[-4000:]
    cond = condition(kube.get(vm), "GPUDriverReady")
    assert (cond["status"], cond["severity"], cond["reason"]) == ("False", "Error", "MachineNotFound")
    assert cond["message"].startswith("VM 424242 does not exist in cloudspace "), cond
    assert [e["reason"] for e in kube.events()].count("GPUDriverFailed") == 1


def test_vco_status_three_ways_and_bad_input(kube, tmp_path):
    vc = make_cluster(kube)
    args = (
        "{kind: VCOCluster, name: gpu1, namespace: default, status: {ready: true, cloudspaceID: cs-1}, "
        "conditions: [{type: CloudspaceReady, status: 'True', reason: Ready}]}"
    )
    check, apply, again = three_ways(None, tmp_path, "vco_status", args, env=kube.env())
    assert check["changed"] and apply["changed"] and not again["changed"]
    assert check["diff"]["before"]["status"] == {} and check["diff"]["after"]["status"]["ready"] is True
    assert apply["status"] == again["status"] and kube.get(vc)["status"]["cloudspaceID"] == "cs-1"
    patches = [r for r in kube.requests() if r["method"] == "PATCH"]
    assert len(patches) == 1 and patches[0]["path"].endswith("/vcoclusters/gpu1/status")
    for bad, message in [
        ("conditions: [{type: A, status: maybe}]", "needs status True, False or Unknown"),
        ("conditions: [{type: A, status: 'True', colour: red}]", "a condition has the keys"),
        ("event: {reason: X}", "event needs reason and message"),
        ("provider_id: whitesky://x/y/z", "provider_id is a VCOMachine's"),
    ]:
        play = tmp_path / "bad.yml"
        play.write_text(
            "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - whitesky.capvco.vco_status: "
            "{kind: VCOCluster, name: gpu1, namespace: default, %s}\n" % bad
        )
        rc, out, _ = run_playbook(str(play), env=kube.env())
        assert rc != 0 and message in out, out[-2000:]
    # providerID is set once: a different one later is refused
    kube.create(
        {
            "apiVersion": IV,
            "kind": "VCOMachine",
            "metadata": {"name": "m", "namespace": "default"},
            "spec": {"vcpus": 1, "memory": 1024, "providerID": "whitesky://a/b/c"},
        }
    )
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - whitesky.capvco.vco_status: "
        "{kind: VCOMachine, name: m, namespace: default, provider_id: 'whitesky://a/b/d'}\n"
    )
    rc, out, _ = run_playbook(str(play), env=kube.env())
    assert rc != 0 and "already has providerID 'whitesky://a/b/c'" in out


def together(*runs):
    """Start the runs (``(playbook path, emulator, extra vars, env)``) together; their ``(rc, out, data)``."""
    import threading

    results = [None] * len(runs)

    def go(i, args):
        results[i] = run_playbook(*args[:3], env=args[3])

    threads = [threading.Thread(target=go, args=(i, r)) for i, r in enumerate(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    return results


def test_two_reconciles_started_together_and_a_reconcile_beside_a_playbook(kube, emulator):
    """The operator never runs two reconciles of one object at once (its work queue); here they are started
    together anyway, as two controllers without leader election would: one cloudspace, one VM, no slot bought
    twice.  A VCOMachine's reconcile beside the orphan reclaim playbook: its new reservations are never taken for
    orphans."""
    emulator.faults(latency_ms=10)
    vc = make_cluster(kube)
    reconcile_vc = (os.path.join(PLAYS, "vcocluster_reconcile.yml"), emulator, operator_vars(kube.get(vc)), kube.env())
    for rc, out, _data in together(reconcile_vc, reconcile_vc):
        assert rc == 0, out[-3000:]
    with emulator.client() as client:
        spaces = [c for c in client.cloudspaces() if c["name"] == "gpu1-cs"]
        assert len(spaces) == 1 and cloudspaces.creator(client, spaces[0]["cloudspace_id"]) == "gpu1"
    vm, _machine = make_machine(kube, "gpu1-md-0-two", gpu=A100x2)
    reconcile_vm = (os.path.join(PLAYS, "vcomachine_reconcile.yml"), emulator, operator_vars(kube.get(vm)), kube.env())
    for rc, out, _data in together(reconcile_vm, reconcile_vm):
        assert rc == 0, out[-3000:]
    held = live(emulator, "gpu1")
    assert sorted(r["vgpu_name"].split(".")[3] for r in held) == ["00", "01"], "two slots, each bought once"
    assert emulator.ledger()["double_reservations"] == 0
    other, _m = make_machine(kube, "gpu1-md-0-three", gpu=A100x2)
    reclaim = (
        os.path.join(PLAYS, "gpu_orphans.yml"),
        emulator,
        {"location": "be-gen-1", "reclaim": True, "grace_period": 0},
        None,
    )
    reconcile_other = (
        os.path.join(PLAYS, "vcomachine_reconcile.yml"),
        emulator,
        operator_vars(kube.get(other)),
        kube.env(),
    )
    (rc, out, _d), (rc2, out2, _d2) = together(reconcile_other, reclaim)
    assert rc == 0, out[-3000:]
    assert rc2 == 0, out2[-3000:]
    assert len(live(emulator, "gpu1")) == 4, "the reclaim took none of the new machine's reservations"
    assert kube.get(other)["status"]["ready"] is True
