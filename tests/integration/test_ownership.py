"""Ownership by identity, never by name shape: neighbours in one cloudspace, prefix names, long names, the recycle
bin, scale down, and reserves or attaches whose outcome is unknown."""

from __future__ import annotations

import os
import threading

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus as gpu
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import machine as machines
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers, naming
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes as ownership_notes
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.vmlock import vm_locked
from capvco_lab.specs import cluster_spec as lab_spec

from helpers import ROOT, run_playbook, task_results
from test_gpu import CS, LOC, assert_converged, ensure, live, reclaim, vms

PLAYS = os.path.join(ROOT, "playbooks")
DELETE_CS = "Delete every machine the cluster owns, release every reservation it owns, then its own cloudspace"


def cluster_spec(name, cloudspace="shared-cs", gpu_replicas=1, count=1):
    return lab_spec(name, cloudspace, gpu_replicas, count, location=LOC)


def play(emu, name, spec, **extra):
    rc, out, data = run_playbook(os.path.join(PLAYS, name), emu, extra_vars=dict(spec, **extra))
    return rc, out, data


def state(emu):
    """The emulator's stored state, keyed for comparison: VMs by id, reservations by id, cloudspaces by id."""
    snap = emu.snapshot()
    return (
        {c["cloudspace_id"]: c for c in snap["cloudspaces"]},
        {v["vm_id"]: v for v in snap["vms"]},
        {g["vgpu_id"]: g for g in snap["vgpus"]},
    )


def of_cluster(vgpus, cluster):
    return {k: g for k, g in vgpus.items() if naming.owned_by(naming.decode(g["vgpu_name"]), cluster)}


def untouched(before, after, keep):
    """The rows of ``before`` that ``keep`` selects are in ``after`` unchanged."""
    return {k: v for k, v in before.items() if keep(v) and after.get(k) != v}


def cloudspace_id(emu, name):
    with emu.client() as client:
        found = [c["cloudspace_id"] for c in client.cloudspaces() if c["name"] == name]
    return found[0] if found else None


def vm_names(emu, cs_name):
    cs = cloudspace_id(emu, cs_name)
    if cs is None:
        return []
    with emu.client() as client:
        return sorted(v["name"] for v in client.vms(cs))


def test_two_clusters_and_a_hand_made_vm_share_a_cloudspace(emulator):
    """The reported data loss: `web`, `web-gpu` and a hand-made `web-db` in `shared-cs`."""
    rc, out, _ = play(emulator, "cluster_create.yml", cluster_spec("web"))
    assert rc == 0, out[-3000:]
    rc, out, _ = play(emulator, "cluster_create.yml", cluster_spec("web-gpu"))
    assert rc == 0, out[-3000:]
    cs = cloudspace_id(emulator, "shared-cs")
    with emulator.client() as client:
        client.create_vm(cs, name="web-db", description="the database, made by hand", vcpus=2, memory=2048)
    assert vm_names(emulator, "shared-cs") == ["web-cp-0", "web-db", "web-gpu-0", "web-gpu-cp-0", "web-gpu-gpu-0"]
    _spaces, vms_before, vgpus_before = state(emulator)

    def foreign_vm(v):
        return not markers.machine_owned(v["description"], "web")

    # converging `web` again touches nothing of `web-gpu` and not `web-db`
    rc, out, data = play(emulator, "cluster_create.yml", cluster_spec("web"))
    assert rc == 0, out[-3000:]
    assert data["stats"]["localhost"]["changed"] == 0
    _spaces, vms_after, vgpus_after = state(emulator)
    assert untouched(vms_before, vms_after, foreign_vm) == {}
    assert vgpus_after == vgpus_before

    # deleting `web` deletes web's machines and reservations only, and keeps the cloudspace (it holds others)
    rc, out, data = play(emulator, "cluster_delete.yml", cluster_spec("web"))
    assert rc == 0, out[-3000:]
    spaces, vms_after, vgpus_after = state(emulator)
    assert untouched(vms_before, vms_after, foreign_vm) == {}
    assert untouched(vgpus_before, vgpus_after, lambda g: not of_cluster({0: g}, "web")) == {}
    assert vm_names(emulator, "shared-cs") == ["web-db", "web-gpu-cp-0", "web-gpu-gpu-0"]
    assert live(emulator, "web") == [] and len(live(emulator, "web-gpu")) == 1
    (kept,) = [c["kept"] for r in task_results(data, DELETE_CS) for c in r["plan"]["cloudspaces"]]
    assert "web-db" in kept and "web-gpu-cp-0" in kept
    assert spaces[cs]["deleted_at"] is None

    # `web-gpu` has no orphans, and its own delete keeps the cloudspace: it did not create it
    rc, out, _ = play(emulator, "gpu_orphans.yml", {}, location=LOC, cluster="web-gpu")
    assert rc == 0, out[-3000:]
    rc, out, data = play(emulator, "cluster_delete.yml", cluster_spec("web-gpu"))
    assert rc == 0, out[-3000:]
    (kept,) = [c["kept"] for r in task_results(data, DELETE_CS) for c in r["plan"]["cloudspaces"]]
    assert "cluster 'web' created it, not 'web-gpu'" in kept
    assert vm_names(emulator, "shared-cs") == ["web-db"] and live(emulator, "web-gpu") == []
    assert emulator.ledger()["accruing"] == 0


def test_a_cluster_deletes_the_cloudspace_it_created_once_it_is_empty(emulator):
    rc, out, _ = play(emulator, "cluster_create.yml", cluster_spec("solo", cloudspace="solo-cs", gpu_replicas=0))
    assert rc == 0, out[-3000:]
    cs = cloudspace_id(emulator, "solo-cs")
    _s, vms_now, _g = state(emulator)
    assert {v["description"] for v in vms_now.values()} == {"capvco/v1 cluster=solo pool=cp"}
    notes = [n for n in emulator.snapshot()["notes"] if n["cloudspace_id"] == cs]
    assert [(n["title"], n["content"]) for n in notes] == [
        ("capvco/v1", "creator cluster=solo"),
        # the cluster's pools (information for the inventory, never proof of ownership), its GPU pool at zero
        ("capvco/v1", "pools cluster=solo cp:1:2:2048:0:-:12:10::-;gpu:0:4:8192:1:NVIDIA%20A100:12:10:550:-"),
    ]
    rc, out, data = play(emulator, "cluster_delete.yml", cluster_spec("solo", cloudspace="solo-cs", gpu_replicas=0))
    assert rc == 0, out[-3000:]
    spaces, _v, _g = state(emulator)
    assert spaces[cs]["deleted_at"] is not None


def test_a_name_taken_by_a_machine_the_cluster_does_not_own_fails_and_changes_nothing(emulator):
    rc, out, _ = play(emulator, "cluster_create.yml", cluster_spec("web", gpu_replicas=0))
    assert rc == 0, out[-3000:]
    cs = cloudspace_id(emulator, "shared-cs")
    with emulator.client() as client:
        client.create_vm(cs, name="web-gpu-0", description="made by hand", vcpus=2, memory=2048)
    before = state(emulator)
    rc, out, _ = play(emulator, "cluster_create.yml", cluster_spec("web", gpu_replicas=1))
    assert rc != 0 and "machine 'web-gpu-0' is not owned by cluster 'web'" in out
    assert state(emulator)[1:] == before[1:]
    # machine_delete refuses it too, gracefully or by force
    for force in (False, True):
        rc, out, _ = play(emulator, "machine_delete.yml", cluster_spec("web"), machine="web-gpu-0", force=force)
        assert rc != 0 and "is not owned by cluster 'web'" in out
    assert state(emulator)[1:] == before[1:]


def test_machine_info_lists_a_cluster_by_its_marker_not_its_prefix(emulator):
    with emulator.client() as client:
        for name, description in (
            ("a-0", markers.machine_marker("a", "cp")),
            ("a-b-0", markers.machine_marker("a-b", "cp")),
            ("a-1", "capvco/v1 cluster=a-b pool=gpu"),
            ("a-hand", "capvco cluster a"),
            ("a-old", "capvco cluster a, pool cp"),  # no release ever wrote this shape: it proves nothing
            ("b-0", markers.machine_marker("a", "gpu")),  # a's marker, not a's name: no machine of a's
        ):
            client.create_vm(CS, name=name, description=description, vcpus=1, memory=1024)
        emulator.reset_stats()
        found = machines.info(client, cloudspace_id=CS, cluster="a", parallel=4)
    assert [(m["name"], m["pool"]) for m in found["machines"]] == [("a-0", "cp")]
    # the name is the filter (the five a-* VMs are read, b-0 is not), the marker the proof
    assert emulator.op_count("getVirtualMachineInfo") == 5


def test_clusters_whose_names_are_prefixes_never_share_reservations(emulator):
    vms(emulator, "prod-0", cluster="prod")
    vms(emulator, "prod-2-0", cluster="prod-2")
    ensure(emulator, cluster="prod", machines=["prod-0"], count=1)
    ensure(emulator, cluster="prod-2", machines=["prod-2-0"], count=2)
    with pytest.raises(InputError, match="machine 'prod-0' is not owned by cluster 'prod-2'"):
        ensure(emulator, cluster="prod-2", machine="prod-0", count=1)  # prod's machine, whatever its name
    with emulator.client() as client:  # a reservation of prod-2's on prod's machine, made by hand, still is prod-2's
        vm_id = [v["vm_id"] for v in client.vms(CS) if v["name"] == "prod-0"][0]
        client.reserve_attach_vgpu(CS, vm_id, "nvidia-a100-20c", naming.encode("prod-2", "prod-0", 0))
    assert len(live(emulator, "prod")) == 1 and len(live(emulator, "prod-2")) == 3
    res = reclaim(emulator, scope="cluster", cluster="prod")
    assert [r["cluster"] for r in res["released"]] == ["prod"]
    assert live(emulator, "prod") == [] and len(live(emulator, "prod-2")) == 3


def test_teardown_purges_owned_reservations_in_the_recycle_bin(emulator):
    vms(emulator, "w0")
    ensure(emulator, machine="w0", count=2)
    held = live(emulator)
    with emulator.client() as client:  # one of them soft-deleted: still billed
        client.delete_vgpu(LOC, held[0]["vgpu_id"], detach=True, permanently=False)
    assert len(live(emulator)) == 2, "a soft-deleted reservation still accrues"
    res = reclaim(emulator, scope="cluster", cluster="c1")
    assert len(res["released"]) == 2
    assert live(emulator) == [] and emulator.ledger()["accruing"] == 0


def test_long_cluster_names_are_not_orphans_while_their_machine_lives(emulator):
    cluster = "a-very-long-cluster-name-over-twenty"
    vms(emulator, "a-very-long-cluster-name-over-twenty-gpu-0", cluster=cluster)
    ensure(emulator, cluster=cluster, machine="a-very-long-cluster-name-over-twenty-gpu-0", count=1)
    res = reclaim(emulator, scope="orphans", cluster=None, grace_period=0)
    assert res["released"] == [] and len(live(emulator, cluster)) == 1


def test_lowering_count_releases_the_top_slots_and_keeps_the_rest(emulator):
    vms(emulator, "w0", "w1")
    ensure(emulator, machines=["w0", "w1"], count=3)
    kept = {r["vgpu_id"] for r in live(emulator) if naming.decode(r["vgpu_name"]).slot == 0}
    res = ensure(emulator, machines=["w0", "w1"], count=1)
    assert res["changed"]
    assert_converged(emulator, ["w0", "w1"], 1)
    assert {r["vgpu_id"] for r in live(emulator)} == kept
    ensure(emulator, machines=["w0", "w1"], count=0)
    assert live(emulator) == []


def live_per_slot(emu):
    """Live reservations per decoded (cluster, machine, slot): names embed a time, so doubles hide under new names."""
    counts = {}
    for r in emu.ledger()["reservations"]:
        owner = naming.decode(r["vgpu_name"])
        if r["deleted_at"] is None and owner is not None:
            key = (owner.cluster, owner.machine, owner.slot)
            counts[key] = counts.get(key, 0) + 1
    return counts


def test_a_reserve_that_commits_after_the_client_gave_up_is_found_not_bought_again(emulator):
    vms(emulator, "w0")
    emulator.faults(vm_op_seconds=3)  # the platform commits after the module's 2 s timeout
    with emulator.client(backoff=0.01, timeout=2) as client:
        res = gpu.ensure(
            client, location=LOC, cloudspace_id=CS, cluster="c1", machines=["w0"], gpu_type="NVIDIA A100", parallel=8
        )
    assert len(res["reservations"]) == 1
    emulator.quiesce()  # a request the module gave up on may still commit: wait for every one to end
    assert live_per_slot(emulator) == {("c1", "w0", 0): 1}
    assert emulator.ledger()["double_reservations"] == 0


def test_an_attach_whose_answer_was_lost_is_a_success(emulator):
    (vm_id,) = vms(emulator, "w0")
    ensure(emulator, machine="w0", count=1)
    (held,) = live(emulator)
    with emulator.client() as client:
        client.detach_vgpu(CS, vm_id, held["vgpu_id"])
    emulator.faults(drop_after_commit={"attachVGPUToVM": 1})
    res = ensure(emulator, machine="w0", count=1)
    assert [r["vgpu_id"] for r in res["reservations"]] == [held["vgpu_id"]]
    assert [r["vm_id"] for r in live(emulator)] == [vm_id]


def test_release_waits_out_a_neighbours_lock_on_the_vm(emulator):
    (vm_id,) = vms(emulator, "w0")
    ensure(emulator, machine="w0", count=2)
    emulator.faults(vm_op_seconds=1.0)
    with emulator.client() as client:
        nets = client.external_networks(LOC)

    def neighbour_attaches():  # the neighbour waits out our lock as we wait out its
        with emulator.client() as other:
            for _ in range(3):
                other.attach_nic(CS, vm_id, nets[0]["external_network_id"], retry_if=vm_locked(other, CS, vm_id))

    neighbour = threading.Thread(target=neighbour_attaches)
    neighbour.start()
    try:
        ensure(emulator, machine="w0", state="absent", count=0)
    finally:
        neighbour.join()
    assert live(emulator) == []
    assert emulator.stats()["vm_lock_conflicts"] >= 1, "the release met the neighbour's lock and waited it out"


def test_the_machine_module_refuses_a_vm_the_cluster_does_not_own(emulator):
    vms(emulator, "c1-w0", cluster=None)
    with emulator.client() as client:
        for state_ in ("present", "absent"):
            params = dict(
                cloudspace_id=CS, name="c1-w0", cluster="c1", state=state_, force=True, vcpus=2, memory=2048,
                location=LOC, pool=None, description=None, first_boot=None,
                user_data=None, bootstrap_data=None, provider_id=None, image_id=12, disk_size=None,
            )  # fmt: skip
            try:
                machines.ensure(client, **params)
            except InputError as exc:
                assert "'c1-w0' is not owned by cluster 'c1'" in str(exc)
            else:
                raise AssertionError("a VM without the cluster's marker was accepted (%s)" % state_)
            # a name outside the cluster's rule is refused before anything is read
            emulator.reset_stats()
            with pytest.raises(InputError, match=r"machine name 'w0' does not start with the cluster's name"):
                machines.ensure(client, **dict(params, name="w0"))
            assert emulator.stats()["operations"] == {}
        assert [v["name"] for v in client.vms(CS)] == ["c1-w0"]


def test_every_mutating_call_on_a_vm_waits_out_its_lock(emulator):
    """No hook given: the client adds the lock wait to every mutating call on a VM's path."""
    (vm_id,) = vms(emulator, "w0")
    emulator.faults(vm_op_seconds=0.5)
    with emulator.client() as client:
        net = client.external_networks(LOC)[0]["external_network_id"]
    errors = []

    def call(kind, i):
        try:
            with emulator.client() as client:
                if kind == "nic":
                    client.attach_nic(CS, vm_id, net)
                else:
                    client.reserve_attach_vgpu(CS, vm_id, "nvidia-a100-40c", naming.encode("c1", "w0", i))
        except Exception as exc:  # collected: every call must succeed
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(k, i)) for i, k in enumerate(["nic", "vgpu", "nic", "vgpu"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert emulator.stats()["vm_lock_conflicts"] >= 1
    assert len(live(emulator)) == 2


def test_a_cluster_says_once_that_it_has_machines_in_a_cloudspace_it_did_not_create(emulator):
    """The member note (read by the inventory to know whose markers to read) is written the first time the cluster
    holds its lease on a cloudspace it did not create, and never again; a dry run writes nothing."""
    params = dict(
        cloudspace_id=CS, name="c1-m0", cluster="c1", state="present", force=False, vcpus=2, memory=2048,
        location=LOC, pool=None, description=None, first_boot=None,
        user_data=None, bootstrap_data=None, provider_id=None, image_id=12, disk_size=None,
    )  # fmt: skip

    def notes():
        return sorted(n["content"] for n in emulator.snapshot()["notes"] if n["cloudspace_id"] == CS)

    with emulator.client() as client:
        machines.ensure(client, check_mode=True, **params)
        assert notes() == []
        machines.ensure(client, **params)
        machines.ensure(client, **dict(params, name="c1-m1"))
        machines.ensure(client, **dict(params, name="c2-m0", cluster="c2"))
        assert notes() == ["member cluster=c1", "member cluster=c2"]
        assert ownership_notes.clusters_in(client.cloudspace_notes(CS)) == {"c1", "c2"}
