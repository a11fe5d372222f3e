"""The cluster spec as one typed contract: checked whole, planned with its capacity and price, then applied.

Each observed point of the issue is a test here, against the real emulator: bad input leaves the emulator's snapshot
identical, check mode returns what the real run then does, and the cloudspace a cluster makes is its own by a note.
"""

from __future__ import annotations

import os
import threading

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import run as cluster
from ansible_collections.whitesky.capvco.plugins.module_utils.faces import diff
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.errors import InsufficientCapacity
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces, machine_pool, pools
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers, naming, notes
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, PartialFailure
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool

from helpers import ROOT, run_playbook, task_results
from test_gpu import live

PLAYS = os.path.join(ROOT, "playbooks")
LOC = "be-gen-1"


def spec(name="ty", gpu_replicas=2, **overrides):
    base = {
        "cluster": {"name": name, "location": LOC, "cloudspace": name + "-cs"},
        "control_plane": {"replicas": 1, "vcpus": 2, "memory": 2048, "image": 12},
        "pools": [
            {
                "name": "gpu",
                "replicas": gpu_replicas,
                "vcpus": 4,
                "memory": 8192,
                "image": 12,
                "gpu": {"type": "NVIDIA A100", "count": 1, "driverVersion": "550"},
            }
        ],
    }
    base.update(overrides)
    return base


def gpu_pool(**changes):
    pool = dict(spec()["pools"][0])
    gpu = dict(pool["gpu"], **changes.pop("gpu", {}))
    pool.update(changes, gpu=gpu)
    return pool


def converge(emu, s, check=False, **kw):
    with emu.client(backoff=0.01) as client:
        return cluster.converge(client, s, check, **kw)


def teardown(emu, s, check=False, **kw):
    with emu.client(backoff=0.01) as client:
        return cluster.teardown(client, s, check, **kw)


def names(emu, cs_name="ty-cs"):
    with emu.client() as client:
        spaces = [c for c in client.cloudspaces() if c["name"] == cs_name]
        return sorted(v["name"] for c in spaces for v in client.vms(c["cloudspace_id"]))


def spaces(emu, cs_name="ty-cs"):
    with emu.client() as client:
        return [c["cloudspace_id"] for c in client.cloudspaces() if c["name"] == cs_name]


def create(emu, s, **kw):
    return run_playbook(os.path.join(PLAYS, "cluster_create.yml"), emu, extra_vars=s, **kw)


# --- 1, 2, 3: a typo never changes anything -------------------------------------------------------------------


def test_a_typo_in_a_live_clusters_spec_changes_nothing(emulator):
    """Point 1 (data loss from a typo) and 2 (typos ignored or cryptic), through the playbook."""
    rc, out, _ = create(emulator, spec())
    assert rc == 0, out[-3000:]
    assert names(emulator) == ["ty-cp-0", "ty-gpu-0", "ty-gpu-1"] and len(live(emulator, "ty")) == 2
    before = emulator.snapshot()
    cases = [
        ({"pools": [gpu_pool(replicas="two")]}, "pools[0].replicas: must be an integer, got a string 'two'"),
        ({"control_plane": {"replicas": "three"}}, "control_plane.replicas: must be an integer"),
        ({"control_plane": {"replicas": -1}}, "control_plane.replicas: must be 0 or more, got -1"),
        ({"pools": [gpu_pool(replicas=1.5)]}, "pools[0].replicas: must be an integer, got a number 1.5"),
        (
            {"pools": [dict(gpu_pool(), gpu={"type": "NVIDIA A100", "driverversion": "550"})]},
            "pools[0].gpu.driverversion: unknown key; did you mean driverVersion?",
        ),
        (
            {"pools": [dict({k: v for k, v in gpu_pool().items() if k != "replicas"}, replica=2)]},
            "did you mean replicas?",
        ),
        (
            {"pools": [dict(gpu_pool(), gpu={"typ": "NVIDIA A100"})]},
            "pools[0].gpu.typ: unknown key; did you mean type?",
        ),
    ]
    for change, message in cases:
        rc, out, _ = create(emulator, spec(**change))
        assert rc != 0 and message in out, (change, out[-2000:])
        assert "nothing was changed" in out
    assert emulator.snapshot() == before, "a bad spec changed the platform"
    # a string of digits is an integer: "2" converges like 2 (nothing to do)
    rc, out, data = create(emulator, spec(pools=[gpu_pool(replicas="2")]))
    assert rc == 0 and data["stats"]["localhost"]["changed"] == 0, out[-2000:]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"cluster": {"name": "a b", "location": LOC}}, "cluster.name: 'a b' does not match"),
        ({"cluster": {"name": "nl\n", "location": LOC}}, "cluster.name: 'nl\\n' does not match"),
        ({"pools": [gpu_pool(name="g p")]}, "pools[0].name: 'g p' does not match"),
        ({"pools": [gpu_pool(gpu={"driverVersion": "550; touch x"})]}, "pools[0].gpu.driverVersion: '550; touch x'"),
        ({"pools": [gpu_pool(gpu={"driverVersion": "550-server"})]}, "pools[0].gpu.driverVersion: '550-server'"),
        ({"first_boot": {"packages": ["curl; id"]}}, "first_boot.packages[0]: 'curl; id' does not match"),
        ({"pools": [gpu_pool(replicas="-5")]}, "pools[0].replicas: must be 0 or more, got -5"),
        ({"pools": [gpu_pool(replicas="x")]}, "pools[0].replicas: must be an integer, got a string 'x'"),
        ({"pools": [gpu_pool(name="cp")]}, "pools[0].name: 'cp' is taken"),
        ({"pools": [gpu_pool(gpu={"count": 0})]}, "pools[0].gpu.count: must be 1 or more, got 0"),
        ({"pools": [gpu_pool(gpu={"type": "NVIDIA B999"})]}, "GPU type 'NVIDIA B999' is not offered"),
    ],
)
def test_bad_input_on_a_new_cluster_creates_nothing(emulator, change, message):
    """Point 3: every one of these failed after the cloudspace existed (the newline one after VMs existed)."""
    before = emulator.snapshot()
    with pytest.raises(InputError) as exc:
        converge(emulator, spec(**change))
    assert message in str(exc.value)
    with pytest.raises(InputError):
        converge(emulator, spec(**change), check=True)
    assert emulator.snapshot() == before


def test_the_playbook_refuses_a_name_with_a_final_newline(emulator):
    before = emulator.snapshot()
    rc, out, data = create(emulator, spec(cluster={"name": "nl\n", "location": LOC}))
    (failed,) = task_results(
        data, "Converge the cluster to its spec (cloudspace, every pool's machines and GPUs by type)"
    )
    assert rc != 0 and "cluster.name: 'nl\\n' does not match" in failed["msg"], out[-2000:]
    assert emulator.snapshot() == before


def test_names_are_matched_whole_everywhere():
    for bad in ("web\n", "web\n-gpu", "a b"):
        with pytest.raises(InputError):
            markers.machine_marker(bad)
    assert markers.parse_marker("capvco/v1 cluster=web\n") is None
    assert notes.note_creator("capvco/v1", "creator cluster=web\n") is None
    assert notes.note_creator("capvco/v1", "creator cluster=web") == "web"


# --- 4: capacity is planned, with its price -------------------------------------------------------------------


def test_capacity_is_planned_before_anything_is_created(emulator):
    """Point 4: 8 machines x 2 A100 of any profile where the location has 14: refused in check mode and for real,
    nothing made."""
    big = spec(pools=[gpu_pool(replicas=8, gpu={"count": 2, "profile": "any"})])
    before = emulator.snapshot()
    for check in (True, False):
        with pytest.raises(InsufficientCapacity, match="not enough NVIDIA A100: need 16 more"):
            converge(emulator, big, check=check)
    assert emulator.snapshot() == before
    # within capacity: the plan says what it takes and what it costs
    plan = converge(emulator, spec(pools=[gpu_pool(replicas=3, gpu={"count": 2, "profile": "any"})]), check=True)
    assert plan["plan"]["capacity"] == {"NVIDIA A100": {"needed": 6, "available": 14}}
    # whole cards, what a pool without a profile takes: the 6 of nvidia-a100-40c
    whole = converge(emulator, spec(pools=[gpu_pool(replicas=3, gpu={"count": 2})]), check=True)
    assert whole["plan"]["capacity"] == {"NVIDIA A100": {"needed": 6, "available": 6}}
    price = plan["plan"]["price"]
    assert price["vgpus_before"] == 0 and price["vgpus_after"] == 6 and price["hourly_added"] > 0
    vgu = price["units"]["vgu"]
    assert vgu["after"] == 6 and vgu["hourly_after"] == pytest.approx(6 * price["per_vgpu_hour"], abs=1e-3)
    # the whole: the vGPUs and the 4 machines' vCPUs, memory and disks, and the cloudspace's address
    assert price["hourly_after"] == pytest.approx(sum(u["hourly_after"] for u in price["units"].values()), abs=1e-3)
    assert price["hourly_after"] > vgu["hourly_after"] and price["units"]["vcu"]["after"] == 2 + 3 * 4


def test_a_plan_over_budget_is_refused(emulator):
    plan = converge(emulator, spec(), check=True)
    per_hour = plan["plan"]["price"]["hourly_after"]
    before = emulator.snapshot()
    with pytest.raises(InputError, match="over max_hourly_cost"):
        converge(emulator, spec(), max_hourly_cost=per_hour / 2)
    assert emulator.snapshot() == before
    done = converge(emulator, spec(), max_hourly_cost=per_hour + 0.01)
    assert done["changed"] and len(live(emulator, "ty")) == 2


def test_check_mode_returns_what_the_run_then_does(emulator):
    plan = converge(emulator, spec(), check=True)
    done = converge(emulator, spec())
    keys = ("cloudspace_created", "created", "deleted", "reserved", "released")
    assert {k: plan[k] for k in keys} == {k: done[k] for k in keys}
    assert done["reserved"] == ["ty-gpu-0/00", "ty-gpu-1/00"] and done["cloudspace_created"]
    assert plan["cloudspace_id"] is None and done["cloudspace_id"] == spaces(emulator)[0]
    # the run made the cloudspace under its lease, then planned again: its plan and diff still say it made it
    assert plan["plan"]["cloudspace"]["create"] is done["plan"]["cloudspace"]["create"] is True
    assert plan["diff"] == done["diff"] and diff.text(done["diff"]["after"]).startswith("cloudspace ty-cs\n")
    assert "cloudspace" not in diff.text(done["diff"]["before"])
    # scale: one more GPU machine, a second vGPU each, the control plane to 0
    bigger = spec(pools=[gpu_pool(replicas=3, gpu={"count": 2})], control_plane={"replicas": 0})
    plan = converge(emulator, bigger, check=True)
    done = converge(emulator, bigger)
    assert {k: plan[k] for k in keys} == {k: done[k] for k in keys}
    assert done["created"] == ["ty-gpu-2"] and done["deleted"] == ["ty-cp-0"] and len(done["reserved"]) == 4
    again = converge(emulator, bigger, check=True)
    assert not again["changed"] and again["created"] == again["reserved"] == again["released"] == []


def test_a_failed_run_says_what_it_did(emulator):
    """Point 4's other half: a run that fails halfway lists what it created and says changed."""
    emulator.faults(fail_next={"createVirtualMachine": [400, 1]})
    with pytest.raises(PartialFailure) as exc:
        converge(emulator, spec(gpu_replicas=3))
    details = exc.value.details
    assert details["changed"] and details["cloudspace_created"] and len(details["created"]) == 3
    assert sorted(details["created"]) == sorted(names(emulator))
    assert "before it failed, this run did: cloudspace_created True; created " in str(exc.value)


# --- 5, 6: the cloudspace is the cluster's by a note ---------------------------------------------------------


def test_a_cluster_scaled_to_zero_still_deletes_its_cloudspace(emulator):
    """Point 5: scale every pool to 0, then delete: the cloudspace goes (a note on it says who made it)."""
    converge(emulator, spec())
    (cs_id,) = spaces(emulator)
    with emulator.client() as client:
        assert cloudspaces.creator(client, cs_id) == "ty"
    converge(emulator, spec(pools=[gpu_pool(replicas=0)], control_plane={"replicas": 0}))
    assert names(emulator) == [] and live(emulator, "ty") == []
    plan = teardown(emulator, spec(), check=True)
    assert [c["delete"] for c in plan["plan"]["cloudspaces"]] == [True]
    teardown(emulator, spec())
    assert spaces(emulator) == []


def test_a_first_converge_that_failed_leaves_nothing_after_the_teardown(emulator):
    emulator.faults(fail_next={"createVirtualMachine": [400, 100]})
    with pytest.raises(PartialFailure):
        converge(emulator, spec())
    emulator.faults()
    assert len(spaces(emulator)) == 1 and names(emulator) == []
    teardown(emulator, spec())
    assert spaces(emulator) == []


def test_two_concurrent_first_runs_leave_one_cloudspace_and_the_teardown_removes_it(emulator):
    emulator.faults(latency_ms=50)
    errors, results = [], []

    def run():
        try:
            results.append(converge(emulator, spec()))
        except Exception as exc:  # collected: each run either converges or says another run holds the cluster
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    emulator.faults(latency_ms=0)
    assert len(spaces(emulator)) == 1, "the run that lost the race deleted its own cloudspace"
    converge(emulator, spec())
    assert names(emulator) == ["ty-cp-0", "ty-gpu-0", "ty-gpu-1"]
    teardown(emulator, spec())
    assert spaces(emulator) == [] and live(emulator, "ty") == []
    assert emulator.ledger()["accruing"] == 0


def test_a_cloudspace_made_by_hand_or_by_another_cluster_is_kept(emulator):
    with emulator.client() as client:
        client.create_cloudspace("ty-cs", LOC)
    converge(emulator, spec())
    plan = teardown(emulator, spec(), check=True)
    assert plan["plan"]["cloudspaces"][0]["kept"] == "cluster 'ty' did not create it (no note of it on the cloudspace)"
    teardown(emulator, spec())
    assert len(spaces(emulator)) == 1 and names(emulator) == []


def test_cluster_delete_check_mode_says_what_the_run_does(emulator):
    """Point 6: --check planned 'kept: machines are still in it' while the run deleted it."""
    converge(emulator, spec())
    rc, out, data = run_playbook(os.path.join(PLAYS, "cluster_delete.yml"), emulator, extra_vars=spec(), check=True)
    assert rc == 0, out[-2000:]
    (planned,) = task_results(
        data, "Delete every machine the cluster owns, release every reservation it owns, then its own cloudspace"
    )
    assert planned["changed"] and [c["delete"] for c in planned["plan"]["cloudspaces"]] == [True]
    assert planned["deleted"] == ["ty-cp-0", "ty-gpu-0", "ty-gpu-1"] and len(planned["released"]) == 2
    assert len(spaces(emulator)) == 1 and len(names(emulator)) == 3
    # the controller's finalizer passes its resource's fields, snake-cased by the operator: a teardown needs the
    # cluster only, and takes no offence at them
    operator_vars = dict(spec(), sriov={"credential_secret_ref": {"name": "agent"}}, first_boot={"attempts": 3})
    rc, out, data = run_playbook(os.path.join(PLAYS, "cluster_delete.yml"), emulator, extra_vars=operator_vars)
    assert rc == 0, out[-2000:]
    (done,) = task_results(
        data, "Delete every machine the cluster owns, release every reservation it owns, then its own cloudspace"
    )
    assert done["deleted"] == planned["deleted"] and done["released"] == planned["released"]
    assert len(done["cloudspaces_deleted"]) == 1 and spaces(emulator) == []


# --- 7: vgpu and vgpu_reclaim refuse another cluster's VM -----------------------------------------------------


def test_vgpu_and_reclaim_refuse_a_vm_another_cluster_owns(emulator):
    converge(emulator, spec())
    with emulator.client() as client:
        cs_id = spaces(emulator)[0]
        params = dict(
            location=LOC,
            cloudspace_id=cs_id,
            cluster="other",
            machines=["ty-gpu-0"],
            gpu_type="NVIDIA A100",
            parallel=4,
        )
        from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus
        from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import sweep

        with pytest.raises(InputError, match="machine 'ty-gpu-0' is not owned by cluster 'other'"):
            vgpus.ensure(client, **params)
        # the machine module's words, the same
        with pytest.raises(InputError) as by_machine:
            pools.converge_machines(
                client,
                [Pool(None, ("ty-gpu-0",), 2, 1024, 12)],
                pools.Scope(cs_id, "other", LOC),
            )
        assert "is not owned by cluster 'other'" in str(by_machine.value)
        # a reservation named for 'other' on ty's machine, made by hand: the reclaim refuses to detach it
        vm_id = [v["vm_id"] for v in client.vms(cs_id) if v["name"] == "ty-gpu-1"][0]
        client.reserve_attach_vgpu(cs_id, vm_id, "nvidia-a100-40c", naming.encode("other", "ty-gpu-1", 0))
        reclaim = dict(location=LOC, scope="cluster", cluster="other", grace_period=0, parallel=4)
        with pytest.raises(InputError, match="machine 'ty-gpu-1' is not owned by cluster 'other'"):
            sweep.reclaim(client, **reclaim)
    assert len(live(emulator, "other")) == 1 and len(live(emulator, "ty")) == 2


# --- 8: user data too large for the query string --------------------------------------------------------------


def test_oversized_bootstrap_data_is_refused_with_its_size_and_the_limit(emulator):
    before = emulator.snapshot()
    params = dict(
        cloudspace_id=None,
        cloudspace="big-cs",
        cluster="big",
        names=["big-0"],
        pools=None,
        exclusive=False,
        state="present",
        pool="cp",
        force=False,
        location=LOC,
        vcpus=2,
        memory=2048,
        image_id=12,
        disk_size=None,
        first_boot=None,
        bootstrap_data="#!/bin/sh\n" + "x" * (61 * 1024),
        parallel=4,
        sweep=False,
    )
    with emulator.client() as client:
        for check in (True, False):
            with pytest.raises(
                InputError, match=r"user data of pool 'cp' is \d+ bytes once URL-encoded.* at most 64512"
            ):
                machine_pool.ensure_pool(client, check_mode=check, **params)
        made = machine_pool.ensure_pool(client, **dict(params, bootstrap_data="x" * 40 * 1024))
    assert made["created"] == ["big-0"]
    assert before != emulator.snapshot()


def test_the_creator_note_is_retried_or_the_new_cloudspace_taken_back(emulator):
    """A 503 on the note is looked up and sent again; a note refused for good takes the new cloudspace back, so no
    cloudspace is left that no teardown would claim."""
    emulator.faults(fail_next={"createCloudspaceNote": [503, 1]})
    converge(emulator, spec(gpu_replicas=0))
    with emulator.client() as client:
        assert [cloudspaces.creator(client, cs) for cs in spaces(emulator)] == ["ty"]
    teardown(emulator, spec())
    emulator.faults(fail_next={"createCloudspaceNote": [400, 1]})
    with pytest.raises(PartialFailure) as exc:
        converge(emulator, spec(gpu_replicas=0))
    assert not exc.value.details["changed"] and "this run did: nothing" in str(exc.value)
    assert spaces(emulator) == [] and names(emulator) == []


# --- what a stranger found, reading the docs ------------------------------------------------------------------


def test_a_teardown_of_the_wrong_cloudspace_leaves_the_live_cluster_alone(emulator):
    """cluster_delete with cluster.cloudspace left out (or misspelt) released the running machines' vGPUs."""
    converge(emulator, spec())
    before = emulator.snapshot()
    wrong = spec(cluster={"name": "ty", "location": LOC})  # the cloudspace defaults to "ty": not the cluster's
    for check in (True, False):
        with pytest.raises(InputError, match=r"vGPUs attached to machines in other cloudspaces than 'ty' \(cs-"):
            teardown(emulator, wrong, check=check)
    assert emulator.snapshot() == before


def test_a_misspelt_spec_variable_is_refused_by_the_playbook(emulator):
    before = emulator.snapshot()
    typo = {"cluster": {"name": "typo", "location": LOC}, "pool": [gpu_pool()], "control-plane": {"replicas": 3}}
    rc, out, _ = create(emulator, typo)
    # the playbook's own check of its variables, the spec's (issue 46: every variable it reads)
    said = " ".join(out.split())
    assert (
        rc != 0
        and "unknown variable(s) control-plane (did you mean control_plane?), pool (did you mean pools?)" in (said)
    ), out[-2000:]
    assert emulator.snapshot() == before


def test_the_credential_is_never_shown_and_check_mode_plans_the_sriov_add_on(emulator, tmp_path):
    secret = "SUPERSECRET-abc123"
    sriov = {"enabled": True, "credential": secret, "networks": [{"name": "sriov-ext", "network": "sriov-ext"}]}
    extra = dict(spec(sriov=sriov), capvco_render_dir=str(tmp_path / "render"))
    rc, out, _ = create(emulator, extra, check=True, verbosity=3)
    assert rc == 0, out[-3000:]
    assert secret not in out
    bad = dict(extra, pools=[gpu_pool(replicas="two")])
    rc, out, _ = create(emulator, bad, verbosity=3)
    assert rc != 0 and "pools[0].replicas" in out and secret not in out


def test_max_hourly_cost_must_be_a_number(emulator):
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(InputError, match="max_hourly_cost must be a number of 0 or more"):
            converge(emulator, spec(), check=True, max_hourly_cost=bad)


def test_machine_delete_of_a_machine_that_is_not_there_says_so(emulator):
    converge(emulator, spec())
    rc, out, data = run_playbook(
        os.path.join(PLAYS, "machine_delete.yml"), emulator, extra_vars=dict(spec(), machine="ty-gpu-9")
    )
    assert rc == 0 and "machine 'ty-gpu-9' is in no cloudspace 'ty-cs' of cluster 'ty': nothing to delete" in out


def set_price(emu, vgu, location="be-gen-1", drop=False):
    """The location's price list as a hostile platform might answer it: the emulator's store, written directly."""
    import json
    import sqlite3

    db = sqlite3.connect(os.path.join(emu.state_dir, "state.db"), timeout=30)
    try:
        (text,) = db.execute("SELECT prices FROM locations WHERE name=?", (location,)).fetchone()
        prices = json.loads(text)
        prices.pop("vgu", None) if drop else prices.update(vgu=vgu)
        db.execute("UPDATE locations SET prices=? WHERE name=?", (json.dumps(prices), location))
        db.commit()
    finally:
        db.close()


@pytest.mark.parametrize("vgu", [None, -730, "abc", [730], True, "730"], ids=repr)
def test_a_price_that_is_not_a_finite_number_of_zero_or_more_refuses_a_capped_run(emulator, vgu):
    """null, negative and garbage prices: the plan's price is unknown (None), never free or negative; a run with
    max_hourly_cost is refused naming the platform's answer, and nothing changes; without a cap the plan still
    says "unknown" instead of crashing."""
    set_price(emulator, vgu)
    plan = converge(emulator, spec(), check=True)
    price = plan["plan"]["price"]
    assert price["per_vgpu_hour"] is None and price["hourly_after"] is None and price["vgpus_after"] == 2
    before = emulator.snapshot()
    with pytest.raises(InputError, match=r"max_hourly_cost 0.5 cannot be checked: the platform's price list has"):
        converge(emulator, spec(), max_hourly_cost=0.5)
    assert emulator.snapshot() == before
    rc, out, _data = run_playbook(
        os.path.join(ROOT, "playbooks", "cluster_create.yml"), emulator, extra_vars=dict(spec(), max_hourly_cost=0.5)
    )
    assert rc != 0 and "cannot be checked" in out and "could not convert" not in out, out[-3000:]
    assert emulator.snapshot() == before


def test_an_unknown_price_shows_as_unknown_in_the_orphan_report(emulator):
    set_price(emulator, None)
    converge(emulator, spec(gpu_replicas=1))
    with emulator.client() as client:
        vm = [v for v in client.vms(client.cloudspaces()[-1]["cloudspace_id"]) if v["name"] == "ty-gpu-0"][0]
    rc, out, _data = run_playbook(
        os.path.join(ROOT, "playbooks", "machine_delete.yml"),
        emulator,
        extra_vars=dict(spec(gpu_replicas=1), machine="ty-gpu-0", force=True),
    )
    assert rc == 0, out[-3000:]
    rc, out, _data = run_playbook(
        os.path.join(ROOT, "playbooks", "gpu_orphans.yml"),
        emulator,
        extra_vars={"location": "be-gen-1", "grace_period": 0},
        env={"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default"},
    )
    assert rc == 2 and vm and "costing unknown per hour, unknown so far" in out, out[-3000:]
    assert "(unknown" in out and "None" not in out.split("TASK [Fail while any reservation escapes]")[-1], out[-3000:]
