"""Scaling one pool never deletes the others (issue 46, point 11), through the real playbooks against the emulator.

The documented way to scale a GPU pool, ``-e '{"pools": [{"name": "gpu", "replicas": 0, ...}]}'``, replaced the
whole list: on a cluster with a CPU pool the plan deleted every machine of it, and so did any run of the AWX create
survey (it builds a ``gpu`` pool only).  Now a pool the spec leaves out is refused by name with its machines, unless
the spec asks (``replicas: 0``, ``remove_pools``); the ``pool_scale`` playbook (and its AWX template) change one
pool's count from what the cluster recorded of its pools.
"""

from __future__ import annotations

import os
import sqlite3
import threading

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import run as cluster
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease, poolsread
from capvco_lab.emulator import wait_for

from helpers import ROOT, run_playbook, task_results
from test_gpu import live

PLAYS = os.path.join(ROOT, "playbooks")
LOC = "be-gen-1"
CLUSTER = {"name": "ps", "location": LOC, "cloudspace": "ps-cs"}
CONVERGE = "Converge the cluster to its spec (cloudspace, every pool's machines and GPUs by type)"
SCALE = "Scale the pool, every other one kept as the cluster recorded it"


def spec(gpu=2, cpu=1):
    return {
        "cluster": dict(CLUSTER),
        "control_plane": {"replicas": 1, "vcpus": 2, "memory": 2048, "image": 12},
        "pools": [
            {
                "name": "gpu",
                "replicas": gpu,
                "vcpus": 4,
                "memory": 8192,
                "image": 12,
                "diskSize": 40,
                "gpu": {"type": "NVIDIA A100", "count": 1, "driverVersion": "550.127.05"},
            },
            {"name": "cpu", "replicas": cpu, "vcpus": 2, "memory": 2048, "image": 12},
        ],
        "first_boot": {"packages": ["containerd", "kubelet=1.30*"], "attempts": 4},
    }


def names(emulator):
    with emulator.client() as client:
        (cs,) = [c for c in client.cloudspaces() if c["name"] == CLUSTER["cloudspace"]]
        return sorted(v["name"] for v in client.vms(cs["cloudspace_id"]))


def flat(out):
    return " ".join(out.split())


def scale(emulator, pool, replicas, check=False, **extra):
    return run_playbook(
        os.path.join(PLAYS, "pool_scale.yml"),
        emulator,
        extra_vars=dict({"cluster": dict(CLUSTER), "pool_name": pool, "replicas": replicas}, **extra),
        check=check,
    )


def test_a_spec_for_one_pool_is_refused_and_pool_scale_changes_that_pool_only(emulator):
    """One scale of one pool through every face that can ask for it: a spec naming one pool and the AWX survey's are
    refused before any change (the other pools' machines named), ``pool_scale`` in check mode plans that pool only,
    and for real takes the GPU pool to zero and back with the control plane and the CPU pool untouched."""
    rc, out, _ = run_playbook(os.path.join(PLAYS, "cluster_create.yml"), emulator, extra_vars=spec())
    assert rc == 0, out[-3000:]
    assert names(emulator) == ["ps-cp-0", "ps-cpu-0", "ps-gpu-0", "ps-gpu-1"]

    # the documented way to scale the GPU pool, a pools list of one: refused, naming the CPU pool and its machine
    one_pool = dict(spec(gpu=0), pools=[spec(gpu=0)["pools"][0]])
    before = emulator.snapshot()
    for check in (True, False):
        rc, out, _ = run_playbook(os.path.join(PLAYS, "cluster_create.yml"), emulator, extra_vars=one_pool, check=check)
        assert rc != 0, out[-3000:]
        assert "the spec no longer names pool(s) cpu, whose machines this run would delete: cpu (ps-cpu-0)" in flat(out)
    # ... and so is the AWX create survey's, which builds a gpu pool only
    survey = {"cluster_name": "ps", "cluster_location": LOC, "cluster_cloudspace": "ps-cs", "image_id": 12}
    survey.update(cp_replicas=1, cp_vcpus=2, cp_memory=2048, gpu_replicas=2, gpu_vcpus=4, gpu_memory=8192)
    survey.update(gpu_disk=40, gpu_type="NVIDIA A100", gpu_count=1, gpu_driver_version="550.127.05")
    rc, out, _ = run_playbook(os.path.join(PLAYS, "cluster_create.yml"), emulator, extra_vars=survey)
    assert rc != 0 and "pool(s) cpu" in flat(out) and "ps-cpu-0" in flat(out), out[-3000:]
    assert emulator.snapshot() == before, "refused before any change"

    # pool_scale in check mode: the plan of the one pool, nothing changed
    rc, out, data = scale(emulator, "gpu", 0, check=True)
    assert rc == 0, out[-3000:]
    (planned,) = task_results(data, SCALE)
    assert planned["plan"]["delete"] == ["ps-gpu-0", "ps-gpu-1"] and planned["plan"]["create"] == []
    assert emulator.snapshot() == before, "check mode changed the platform"

    # for real: the GPU pool at zero, its vGPUs released; the control plane and the CPU pool kept
    rc, out, data = scale(emulator, "gpu", 0)
    assert rc == 0, out[-3000:]
    assert names(emulator) == ["ps-cp-0", "ps-cpu-0"] and live(emulator, "ps") == []
    (done,) = task_results(data, SCALE)
    assert done["deleted"] == ["ps-gpu-0", "ps-gpu-1"] and done["spec"]["pools"][1]["replicas"] == 1

    # back to 3: the new machines are made as the cluster recorded them (image, disk, driver, first boot)
    rc, out, data = scale(emulator, "gpu", 3)
    assert rc == 0, out[-3000:]
    assert names(emulator) == ["ps-cp-0", "ps-cpu-0", "ps-gpu-0", "ps-gpu-1", "ps-gpu-2"]
    assert len(live(emulator, "ps")) == 3
    db = sqlite3.connect(os.path.join(emulator.state_dir, "state.db"))
    try:
        (user_data,) = db.execute("SELECT user_data FROM vms WHERE name='ps-gpu-2'").fetchone()
    finally:
        db.close()
    assert "550.127.05" in user_data and "kubelet=1.30*" in user_data and "ATTEMPTS=4" in user_data
    # a converge of the whole spec at that count changes nothing: the record is the spec
    rc, out, data = run_playbook(os.path.join(PLAYS, "cluster_create.yml"), emulator, extra_vars=spec(gpu=3))
    assert rc == 0 and data["stats"]["localhost"]["changed"] == 0, out[-3000:]

    # a pool the cluster did not record, and a count out of bounds: refused, naming what there is
    before = emulator.snapshot()
    rc, out, _ = scale(emulator, "big", 1)
    assert rc != 0 and "pool 'big' is not one of the pools it recorded (cp, gpu, cpu)" in flat(out), out[-3000:]
    rc, out, _ = scale(emulator, "gpu", 101)
    assert rc != 0 and "scale.replicas must be an integer from 0 to 100, got 101" in flat(out), out[-3000:]
    assert emulator.snapshot() == before

    # another pool's machine gone (deleted by hand): a scale of gpu does not quietly make it again
    rc, out, _ = run_playbook(
        os.path.join(PLAYS, "machine_delete.yml"), emulator, extra_vars=dict(spec(gpu=3), machine="ps-cpu-0")
    )
    assert rc == 0, out[-3000:]
    before = emulator.snapshot()
    rc, out, _ = scale(emulator, "gpu", 1)
    assert rc != 0 and "this run would also create or delete ps-cpu-0" in flat(out), out[-3000:]
    assert emulator.snapshot() == before

    # the spec asks for the CPU pool to go: remove_pools
    rc, out, _ = run_playbook(
        os.path.join(PLAYS, "cluster_create.yml"),
        emulator,
        extra_vars=dict(spec(gpu=3), pools=spec(gpu=3)["pools"][:1], remove_pools=["cpu"]),
    )
    assert rc == 0, out[-3000:]
    assert names(emulator) == ["ps-cp-0", "ps-gpu-0", "ps-gpu-1", "ps-gpu-2"]
    rc, out, _ = run_playbook(os.path.join(PLAYS, "cluster_delete.yml"), emulator, extra_vars=spec())
    assert rc == 0 and emulator.ledger()["accruing"] == 0, out[-3000:]


def test_two_scales_of_two_pools_at_once_both_hold(emulator):
    """Each scale takes the other pools from the record as the run it waited for left it: the second of two scales
    that planned together never puts the first one's pool back."""
    with emulator.client(backoff=0.01) as client:
        cluster.converge(client, spec(gpu=2, cpu=1))
        (cs,) = [c["cloudspace_id"] for c in client.cloudspaces() if c["name"] == CLUSTER["cloudspace"]]
        results, errors = {}, {}

        def run(pool, replicas):
            try:
                with emulator.client(backoff=0.01) as own:
                    results[pool] = cluster.converge(
                        own, {"cluster": CLUSTER}, scale={"pool": pool, "replicas": replicas}
                    )
            except Exception as exc:  # kept: the test says which run failed, and why
                errors[pool] = exc

        def waiting():
            found = [n for n in client.cloudspace_notes(cs) if lease.parse_lease(n.get("title"), n.get("content"))]
            return len(found) >= 3

        # this test holds the cluster while both scales read the record and plan, then lets them go
        with lease.held(client, cs, CLUSTER["name"]):
            threads = [threading.Thread(target=run, args=a) for a in (("gpu", 1), ("cpu", 2))]
            for t in threads:
                t.start()
            assert wait_for(waiting, timeout=60), "both scales wait for the cluster"
        for t in threads:
            t.join(120)
        assert errors == {}, errors
        assert names(emulator) == ["ps-cp-0", "ps-cpu-0", "ps-cpu-1", "ps-gpu-0"]
        (noted,) = [
            poolsread.note_record(n["title"], n["content"])
            for n in client.cloudspace_notes(cs)
            if poolsread.pools_note_cluster(n.get("title"), n.get("content")) == "ps"
        ]
        assert [(p.name, p.replicas) for p in noted.pools] == [("cp", 1), ("gpu", 1), ("cpu", 2)]
        assert len(live(emulator, "ps")) == 1
        cluster.teardown(client, {"cluster": CLUSTER})
