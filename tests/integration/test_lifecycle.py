"""Machines and the cluster playbooks against the emulator: three-way modules, scale up and down, force delete."""

from __future__ import annotations

import os
import sqlite3

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.api import OPERATIONS

from helpers import ROOT, run_playbook, task_results
from test_gpu import ensure, live, three_ways

PLAYS = os.path.join(ROOT, "playbooks")


def spec(**overrides):
    base = {
        "cluster": {"name": "life", "location": "be-gen-1", "cloudspace": "life-cs"},
        "control_plane": {"replicas": 1, "vcpus": 2, "memory": 2048, "image": 12},
        "pools": [
            {
                "name": "gpu",
                "replicas": 2,
                "vcpus": 4,
                "memory": 8192,
                "image": 12,
                "gpu": {"type": "NVIDIA A100", "count": 2, "driverVersion": "550"},
            },
            {"name": "cpu", "replicas": 1, "vcpus": 2, "memory": 2048, "image": 12},
        ],
    }
    base.update(overrides)
    return base


def names(emulator, cs_name="life-cs"):
    with emulator.client() as client:
        cs = [c for c in client.cloudspaces() if c["name"] == cs_name]
        return sorted(v["name"] for v in client.vms(cs[0]["cloudspace_id"])) if cs else []


def test_machine_module_three_ways_and_graceful_vs_force_delete(emulator, tmp_path):
    args = (
        "{cloudspace_id: cs-demo, name: c1-m0, cluster: c1, pool: p, vcpus: 2, memory: 2048, image_id: 12,"
        " first_boot: {packages: [containerd], attempts: 3}}"
    )
    check, apply, again = three_ways(emulator, tmp_path, "machine", args)
    assert check["changed"] and apply["changed"] and not again["changed"]
    assert apply["machine"]["name"] == "c1-m0" and again["machine"]["vm_id"] == apply["machine"]["vm_id"]
    with emulator.client() as client:
        vm = client.vms("cs-demo")[0]
        assert vm["name"] == "c1-m0"
    # the user data is the first-boot script (read from the emulator's own store)
    db = sqlite3.connect(os.path.join(emulator.state_dir, "state.db"))
    user_data = db.execute("SELECT user_data FROM vms WHERE name='c1-m0'").fetchone()[0]
    assert "capvco first boot" in user_data and "containerd" in user_data and "ATTEMPTS=3" in user_data
    description = db.execute("SELECT description FROM vms WHERE name='c1-m0'").fetchone()[0]
    assert description == "capvco/v1 cluster=c1 pool=p", "the owner's marker is written at creation"
    # graceful delete releases the machine's vGPUs first
    ensure(emulator, machine="c1-m0", cluster="c1", count=2)
    args = "{cloudspace_id: cs-demo, name: c1-m0, cluster: c1, location: be-gen-1, state: absent}"
    check, apply, again = three_ways(emulator, tmp_path, "machine", args)
    assert len(check["released_vgpus"]) == 2 and apply["changed"] and not again["changed"]
    assert live(emulator, "c1") == []


def test_cluster_create_scales_up_and_down_then_delete_sweeps_everything(emulator, tmp_path):
    rc, out, data = run_playbook(os.path.join(PLAYS, "cluster_create.yml"), emulator, extra_vars=spec())
    assert rc == 0, out[-3000:]
    assert names(emulator) == ["life-cp-0", "life-cpu-0", "life-gpu-0", "life-gpu-1"]
    assert len(live(emulator, "life")) == 4
    # converge again: nothing changes
    rc, out, data = run_playbook(os.path.join(PLAYS, "cluster_create.yml"), emulator, extra_vars=spec())
    assert rc == 0 and data["stats"]["localhost"]["changed"] == 0, data["stats"]
    # scale the GPU pool down to 1 and drop the cpu pool: a spec that leaves it out is refused, naming its machine
    smaller = spec(pools=[dict(spec()["pools"][0], replicas=1)])
    before = emulator.snapshot()
    rc, out, data = run_playbook(os.path.join(PLAYS, "cluster_create.yml"), emulator, extra_vars=smaller)
    assert (
        rc != 0
        and "the spec no longer names pool(s) cpu, whose machines this run would delete: cpu (life-cpu-0)"
        in (" ".join(out.split()))
    ), out[-3000:]
    assert emulator.snapshot() == before, "refused before any change"
    # ... and deletes it when it says so
    smaller = dict(smaller, remove_pools=["cpu"])
    rc, out, data = run_playbook(os.path.join(PLAYS, "cluster_create.yml"), emulator, extra_vars=smaller)
    assert rc == 0, out[-3000:]
    assert names(emulator) == ["life-cp-0", "life-gpu-0"]
    assert len(live(emulator, "life")) == 2, "the scaled-down machine's vGPUs were released with it"
    # scale up again, then force-delete a machine: its vGPUs stay reserved until the sweep
    rc, out, data = run_playbook(os.path.join(PLAYS, "cluster_create.yml"), emulator, extra_vars=spec())
    rc, out, data = run_playbook(
        os.path.join(PLAYS, "machine_delete.yml"), emulator, extra_vars=dict(spec(), machine="life-gpu-1", force=True)
    )
    assert rc == 0, out[-3000:]
    assert "life-gpu-1" not in names(emulator) and len(live(emulator, "life")) == 4
    rc, out, data = run_playbook(os.path.join(PLAYS, "cluster_delete.yml"), emulator, extra_vars=spec())
    assert rc == 0, out[-3000:]
    assert names(emulator) == [] and live(emulator, "life") == []
    (teardown,) = task_results(
        data, "Delete every machine the cluster owns, release every reservation it owns, then its own cloudspace"
    )
    assert teardown["changed"] and len(teardown["released"]) == 4, "the force-deleted machine's reservations included"
    assert emulator.ledger()["accruing"] == 0


def test_bad_cluster_spec_is_refused(emulator):
    rc, out, data = run_playbook(
        os.path.join(PLAYS, "cluster_create.yml"),
        emulator,
        extra_vars=spec(cluster={"name": "Bad_Name", "location": "be-gen-1", "cloudspace": "x"}),
    )
    assert rc != 0 and "cluster.name: 'Bad_Name' does not match lower-case letters, digits and '-'" in out
    assert names(emulator, "x") == []


def test_the_sriov_add_on_needs_the_workload_clusters_kubeconfig_before_anything_is_made(emulator, tmp_path):
    """The add-on (a DaemonSet, a ClusterRole) goes only into the cluster that sriov.kubeconfig names: without that
    file the run stops before its first platform write, even when a default kubeconfig exists."""
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("apiVersion: v1\nkind: Config\nclusters: []\n")  # the ambient one
    sriov = {"enabled": True, "credential": "agent-token", "networks": [{"name": "sriov-ext", "network": "sriov-ext"}]}
    for extra, says in [
        ({}, "sriov.kubeconfig is required when sriov.enabled is true"),
        ({"kubeconfig": str(tmp_path / "missing.kubeconfig")}, "is not a readable file when sriov.enabled is true"),
        ({"kubeconfig": "relative.kubeconfig"}, "sriov.kubeconfig 'relative.kubeconfig' is not an absolute path"),
        ({"kubeconfig": str(home / ".kube")}, "is not a readable file when sriov.enabled is true"),  # a folder
    ]:
        emulator.reset_stats()
        rc, out, _ = run_playbook(
            os.path.join(PLAYS, "cluster_create.yml"),
            emulator,
            extra_vars=spec(sriov=dict(sriov, **extra)),
            env={"HOME": str(home), "KUBECONFIG": str(home / ".kube" / "config")},
        )
        assert rc != 0 and says in out, out[-3000:]
        writes = {op: v["count"] for op, v in emulator.stats()["operations"].items() if OPERATIONS[op].method != "GET"}
        assert writes == {}, writes
        assert names(emulator) == []


def test_survey_answers_drive_the_playbooks(emulator):
    answers = {
        "cluster_name": "awx",
        "cluster_location": "be-gen-1",
        "image_id": "12",
        "cp_replicas": "1",
        "gpu_replicas": "2",
        "gpu_type": "NVIDIA A100",
        "gpu_count": "1",
        "gpu_driver_version": "550",
    }
    rc, out, data = run_playbook(os.path.join(PLAYS, "cluster_create.yml"), emulator, extra_vars=answers)
    assert rc == 0, out[-3000:]
    assert names(emulator, "awx") == ["awx-cp-0", "awx-gpu-0", "awx-gpu-1"] and len(live(emulator, "awx")) == 2
    # the GPU pool's first boot installs the pinned driver and verifies it (gpu.driverVersion); the others' do not
    db = sqlite3.connect(os.path.join(emulator.state_dir, "state.db"))
    user_data = dict(db.execute("SELECT name, user_data FROM vms WHERE name LIKE 'awx-%'").fetchall())
    assert "GPU_DRIVER_VERSION=550\nGPU_COUNT=1\n" in user_data["awx-gpu-0"]
    assert "gpu_driver_verify\n" in user_data["awx-gpu-0"] and "gpu_driver_verify\n" not in user_data["awx-cp-0"]
    rc, out, data = run_playbook(
        os.path.join(PLAYS, "machine_delete.yml"),
        emulator,
        extra_vars=dict(answers, machine="awx-gpu-1", force="false"),
    )
    assert rc == 0 and len(live(emulator, "awx")) == 1, out[-2000:]
    rc, out, data = run_playbook(
        os.path.join(PLAYS, "cluster_delete.yml"),
        emulator,
        extra_vars={"cluster_name": "awx", "cluster_location": "be-gen-1"},
    )
    assert rc == 0 and names(emulator, "awx") == [] and live(emulator, "awx") == [], out[-2000:]


def test_survey_answers_with_an_image_and_no_control_plane_question_give_the_control_plane_the_image(emulator):
    """A survey that asks for the image but not the control plane's size (an older survey, or the extra vars of a
    launch) still builds the control plane, with that image and the spec's default replicas: its machine is
    planned, not refused for want of an image."""
    answers = {
        "cluster_name": "awi",
        "cluster_location": "be-gen-1",
        "image_id": "14",
        "gpu_replicas": "1",
        "gpu_type": "NVIDIA A100",
        "gpu_count": "1",
    }
    before = emulator.snapshot()
    rc, out, data = run_playbook(os.path.join(PLAYS, "cluster_create.yml"), emulator, extra_vars=answers, check=True)
    assert rc == 0, out[-3000:]
    (result,) = task_results(
        data, "Converge the cluster to its spec (cloudspace, every pool's machines and GPUs by type)"
    )
    assert result["spec"]["control_plane"]["image"] == 14 and result["spec"]["control_plane"]["replicas"] == 1
    assert [c["name"] for c in result["plan"]["create"]] == ["awi-cp-0", "awi-gpu-0"]
    assert emulator.snapshot() == before
