"""machine_pool: a whole pool per module call, against the emulator (concurrency, ownership, partial failure)."""

from __future__ import annotations

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import diff
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces, machine_pool
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, PartialFailure
from ansible_collections.whitesky.capvco.plugins.module_utils.world import vms

from test_gpu import ensure, live, three_ways

CS = "cs-demo"


def pool(emu, check=False, **params):
    base = dict(
        cloudspace_id=CS,
        cluster="c1",
        names=[],
        pools=None,
        exclusive=False,
        state="present",
        pool="gpu",
        force=False,
        location="be-gen-1",
        vcpus=2,
        memory=2048,
        image_id=12,
        disk_size=None,
        first_boot=None,
        bootstrap_data=None,
        parallel=32,
    )
    base.update(params)
    with emu.client(backoff=0.01) as client:
        return machine_pool.ensure_pool(client, check_mode=check, **base)


def vm_names(emu):
    with emu.client() as client:
        return sorted(v["name"] for v in client.vms(CS))


def test_machine_pool_three_ways_then_scale_down_gracefully(emulator, tmp_path):
    args = (
        "{cloudspace_id: cs-demo, cluster: c1, pool: gpu, names: [c1-p-0, c1-p-1, c1-p-2], vcpus: 2, memory: 2048, "
        "image_id: 12}"
    )
    emulator.reset_stats()
    check, apply, again = three_ways(emulator, tmp_path, "machine_pool", args)
    assert check["changed"] and check["created"] == ["c1-p-0", "c1-p-1", "c1-p-2"]
    assert apply["changed"] and sorted(m["name"] for m in apply["machines"]) == ["c1-p-0", "c1-p-1", "c1-p-2"]
    assert apply["diff"] == {"before": "", "after": "machine c1-p-0\nmachine c1-p-1\nmachine c1-p-2\n"}
    assert not again["changed"] and again["created"] == []
    assert emulator.op_count("createVirtualMachine") == 3, "the check run created nothing"
    # one listing per module call, and one more for the call that changes: it reads again once it holds the lease
    assert emulator.op_count("listCloudspaceVirtualMachines") == 4
    # the lease's note, and the cluster's member note on a cloudspace it did not create (once)
    assert emulator.op_count("createCloudspaceNote") == 2 and emulator.op_count("deleteCloudspaceNote") == 1
    with emulator.client() as client:
        described = {v["name"]: v["pool"] for v in vms.described(client, CS, "c1")}
    assert described == {"c1-p-0": "gpu", "c1-p-1": "gpu", "c1-p-2": "gpu"}
    ensure(emulator, machines=["c1-p-1", "c1-p-2"], count=2)
    args = "{cloudspace_id: cs-demo, cluster: c1, location: be-gen-1, names: [c1-p-1, c1-p-2], state: absent}"
    check, apply, again = three_ways(emulator, tmp_path, "machine_pool", args)
    assert check["deleted"] == ["c1-p-1", "c1-p-2"] and len(check["released_vgpus"]) == 4
    assert apply["changed"] and not again["changed"] and vm_names(emulator) == ["c1-p-0"]
    assert live(emulator) == [], "a graceful delete releases the vGPUs first"


def test_a_name_held_by_a_vm_the_cluster_does_not_own_changes_nothing(emulator):
    with emulator.client() as client:
        client.create_vm(CS, name="c1-p-1", description="made by hand", vcpus=2, memory=2048)
        client.create_vm(CS, name="c1-p-2", description="capvco/v1 cluster=c1-other pool=gpu", vcpus=2, memory=2048)
    for state in ("present", "absent"):
        with pytest.raises(InputError) as err:
            pool(emulator, names=["c1-p-0", "c1-p-1", "c1-p-2"], state=state, force=True)
        assert "machine 'c1-p-1' is not owned by cluster 'c1': its description ('made by hand')" in str(err.value)
        assert "machine 'c1-p-2' is not owned by cluster 'c1'" in str(err.value)
        assert str(err.value).endswith("nothing was changed")
    assert vm_names(emulator) == ["c1-p-1", "c1-p-2"], "c1-p-0 was not created, and nothing was deleted"


def test_a_machine_that_fails_does_not_stop_the_others(emulator):
    emulator.faults(fail_next={"createVirtualMachine": [500, 1]})
    with pytest.raises(PartialFailure) as err:
        pool(emulator, names=["c1-p-%d" % i for i in range(5)])
    assert len(err.value.details["created"]) == 4 and len(err.value.details["failed_machines"]) == 1
    assert len(vm_names(emulator)) == 4
    again = pool(emulator, names=["c1-p-%d" % i for i in range(5)])  # the rerun completes it
    assert again["created"] == err.value.details["failed_machines"] and len(vm_names(emulator)) == 5


def test_a_pool_is_created_concurrently(emulator):
    """20 machines with 200 ms per call: well under the 4 s a one-at-a-time loop takes."""
    emulator.faults(latency_ms=200)
    result = pool(emulator, names=["c1-p-%02d" % i for i in range(20)])
    assert len(result["created"]) == 20
    stats = emulator.stats()
    assert stats["max_in_flight"] >= 10, stats["max_in_flight"]


def test_pools_in_one_call_and_an_exclusive_scale_down(emulator):
    """Two pools at once; then, exclusive, the cluster's machines no pool names go (their vGPUs first), and the
    neighbour cluster's and the hand-made VM stay."""
    with emulator.client() as client:
        client.create_vm(CS, name="hand-made", description="made by hand", vcpus=2, memory=2048)
    pool(emulator, names=["c1-other-0"], cluster="c1-other")
    first = pool(
        emulator,
        names=None,
        pools=[
            {"name": "cp", "names": ["c1-cp-0"], "vcpus": 2, "memory": 4096, "image_id": 12},
            {"name": "gpu", "names": ["c1-gpu-0", "c1-gpu-1"], "vcpus": 4, "memory": 8192, "image_id": 12},
        ],
    )
    assert first["created"] == ["c1-cp-0", "c1-gpu-0", "c1-gpu-1"]
    with emulator.client() as client:
        marks = {v["name"]: (v["pool"], v["vcpus"]) for v in vms.described(client, CS, "c1")}
    assert marks["c1-cp-0"] == ("cp", 2) and marks["c1-gpu-1"] == ("gpu", 4)
    ensure(emulator, machines=["c1-gpu-1"], count=2)
    plan = pool(emulator, check=True, names=None, pools=[{"name": "gpu", "names": ["c1-gpu-0"]}], exclusive=True)
    assert plan["deleted"] == ["c1-cp-0", "c1-gpu-1"] and len(plan["released_vgpus"]) == 2 and plan["created"] == []
    assert diff.render(plan["diff"]) == {
        "before": "machine c1-cp-0\nmachine c1-gpu-0\nmachine c1-gpu-1\n",
        "after": "machine c1-gpu-0\n",
    }
    pool(emulator, names=None, pools=[{"name": "gpu", "names": ["c1-gpu-0"]}], exclusive=True)
    assert vm_names(emulator) == ["c1-gpu-0", "c1-other-0", "hand-made"] and live(emulator) == []
    teardown = pool(emulator, names=None, exclusive=True, state="absent", force=True)
    assert teardown["deleted"] == ["c1-gpu-0"]
    assert vm_names(emulator) == ["c1-other-0", "hand-made"]


def test_a_pools_gpus_converge_in_the_same_call_and_count_0_releases_them(emulator):
    gpu_pool = {"name": "gpu", "names": ["c1-g-0", "c1-g-1"], "vcpus": 4, "memory": 8192, "image_id": 12}
    first = pool(emulator, names=None, pools=[dict(gpu_pool, gpu={"type": "NVIDIA A100", "count": 2})])
    assert first["created"] == ["c1-g-0", "c1-g-1"] and len(first["reservations"]) == 4 and len(live(emulator)) == 4
    again = pool(emulator, names=None, pools=[dict(gpu_pool, gpu={"type": "NVIDIA A100", "count": 2})])
    assert not again["changed"] and len(again["reservations"]) == 4
    down = pool(emulator, names=None, pools=[dict(gpu_pool, gpu={"type": "NVIDIA A100", "count": 0})])
    assert down["changed"] and down["reservations"] == [] and live(emulator) == []


def test_a_teardown_by_cloudspace_name_sweeps_even_when_the_cloudspace_is_gone(emulator):
    gpu_pool = {
        "name": "gpu",
        "names": ["c1-g-0"],
        "vcpus": 4,
        "memory": 8192,
        "image_id": 12,
        "gpu": {"type": "NVIDIA A100"},
    }
    pool(emulator, names=None, pools=[gpu_pool])
    pool(emulator, cluster="c10", names=None, pools=[dict(gpu_pool, names=["c10-g-0"])])
    # a cloudspace by name that is not there: planned in check mode, created (and recorded as the cluster's) for real
    fresh = dict(cloudspace_id=None, cloudspace="fresh-cs", names=["c1-f-0"], pool="cpu")
    with pytest.raises(InputError, match="vcpus"):  # bad input is refused before the cloudspace is made
        pool(emulator, **dict(fresh, vcpus=None))
    plan = pool(emulator, check=True, **fresh)
    assert plan["changed"] and plan["created"] == ["c1-f-0"] and plan["cloudspace_id"] is None
    with emulator.client() as client:
        assert "fresh-cs" not in [c["name"] for c in client.cloudspaces()], "check mode created nothing"
    made = pool(emulator, **fresh)
    assert made["changed"] and made["created"] == ["c1-f-0"] and made["cloudspace_id"]
    with emulator.client() as client:
        assert cloudspaces.creator(client, made["cloudspace_id"]) == "c1", "a note records who created it"
    again = pool(emulator, **fresh)
    assert not again["changed"]
    assert again["cloudspace_id"] == made["cloudspace_id"]
    by_name = dict(cloudspace_id=None, cloudspace="capvco-demo", names=None, exclusive=True, sweep=True)
    check = pool(emulator, check=True, state="absent", force=True, **by_name)
    assert check["cloudspace_id"] == CS and check["deleted"] == ["c1-g-0"] and len(live(emulator)) == 1
    down = pool(emulator, state="absent", force=True, **by_name)
    assert down["deleted"] == ["c1-g-0"] and len(down["released"]) == 1 and live(emulator) == []
    assert vm_names(emulator) == ["c10-g-0"] and len(live(emulator, "c10")) == 1, "the prefix neighbour is kept"
    # a reservation left behind (its machine deleted by force), and the cloudspace gone: the sweep still finds it
    pool(emulator, names=None, pools=[gpu_pool])
    pool(emulator, names=["c1-g-0"], state="absent", force=True)
    assert len(live(emulator)) == 1
    gone = pool(emulator, state="absent", **dict(by_name, cloudspace="deleted-already"))
    assert gone["cloudspace_id"] is None and gone["deleted"] == [] and len(gone["released"]) == 1
    assert live(emulator) == [] and len(live(emulator, "c10")) == 1


@pytest.mark.parametrize("name", ["g p", "-g", "g_p", "", "{{ x }}"])
def test_an_invalid_pool_name_is_refused_before_a_new_cloudspace_is_made(emulator, name):
    before = emulator.snapshot()
    for params in (dict(pool=name, names=["c1-pp-0"]), dict(pools=[{"name": name, "names": ["c1-pp-0"]}])):
        with pytest.raises(InputError, match="invalid pool name"):
            pool(emulator, cloudspace_id=None, cloudspace="pp-cs", **params)
    assert emulator.snapshot() == before, "nothing was created (no pp-cs)"
