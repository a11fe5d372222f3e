"""The pure planners, by property (no server): a machine's vGPU slots (``vgpus.plan_machine``), a cluster's machines
(``pools.plan_machines``), one machine (``machine.plan_machine``) and the reclaim's choice (``orphans.select``), each
on random worlds built the way the platform and the ownership formats build them."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import machine, pools, userdata
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers, naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import orphans, plandoc
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool
from ansible_collections.whitesky.capvco.plugins.module_utils.world import vms
from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import diff_lines
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import attached_to, deleted

from properties import examples

CLUSTER = "c1"
VM_ID = 7
TYPE_IDS = {"a100-40", "a100-20"}
FOREIGN_IDS = ["l4", "h100"]
NOW = 1_800_000_000
_ids = itertools.count()


def reservation(slot, gpu_id, state, machine="m0", cluster=CLUSTER, created=NOW - 3600):
    """A reservation as ``Inventory`` holds it: the platform's dict, its name encoding its owner, the owner decoded.

    ``state``: ``here`` (attached to the machine), ``elsewhere`` (attached to another VM), ``reserved`` (detached),
    ``deleted`` (in the recycle bin) or ``deleted-here`` (in the recycle bin, still naming the machine's VM)."""
    name = naming.encode(cluster, machine, slot, created=created)
    vm = None
    if state in ("here", "deleted-here"):
        vm = {"id": VM_ID, "name": machine, "cloudspace_id": "cs-1", "cloudspace_name": "cs"}
    elif state == "elsewhere":
        vm = {"id": 9, "name": "other-vm", "cloudspace_id": "cs-2", "cloudspace_name": "cs2"}
    return {
        "vgpu_id": "vgpu-%d" % next(_ids),
        "vgpu_name": name,
        "gpu_id": gpu_id,
        "status": "DELETED" if state.startswith("deleted") else ("ATTACHED" if vm else "RESERVED"),
        "virtual_machine": vm,
        "owner": naming.decode(name),
    }


STATES = st.sampled_from(["here", "elsewhere", "reserved", "deleted", "deleted-here"])
GPU_IDS = st.sampled_from(sorted(TYPE_IDS) + FOREIGN_IDS)
OWNED = st.lists(st.tuples(st.integers(0, 7), GPU_IDS, STATES), max_size=12).map(
    lambda specs: [reservation(slot, gpu_id, state) for slot, gpu_id, state in specs]
)


def _apply(items, plan):
    """The machine's reservations once the plan is carried out (a model of ``vgpus.apply``)."""
    released = {id(i) for i in plan.releases}
    after = [dict(i) for i in items if id(i) not in released]
    fixed = {i["vgpu_id"] for i in plan.fixes}
    for item in after:
        if item["vgpu_id"] in fixed:  # restored when deleted, attached (from another VM if need be)
            item.update(status="ATTACHED", virtual_machine={"id": VM_ID, "name": "m0"})
    for slot in plan.missing:
        after.append(reservation(slot, "a100-40", "here"))
    return after


@settings(max_examples=examples(300), deadline=None)
@given(items=OWNED, count=st.integers(0, 8))
def test_a_machine_plan_leaves_exactly_its_slots_attached_and_of_the_type(items, count):
    plan = vgpus.plan_machine(items, VM_ID, count, TYPE_IDS, present=True)
    # every reservation is either released or kept, never both; a fix is a kept one
    assert sorted(map(id, plan.releases + plan.kept)) == sorted(map(id, items))
    assert {id(i) for i in plan.fixes} <= {id(i) for i in plan.kept}
    after = _apply(items, plan)
    assert sorted(i["owner"].slot for i in after) == list(range(count)), "slots 0..count-1, each exactly once"
    for item in after:
        assert attached_to(item) == VM_ID and not deleted(item) and item["status"] == "ATTACHED"
        assert item["gpu_id"] in TYPE_IDS
    # nothing is released that could have been kept as it is: a slot's usable one attached here stays untouched
    for item in plan.releases:
        slot = item["owner"].slot
        if slot < count and item["gpu_id"] in TYPE_IDS and attached_to(item) == VM_ID and not deleted(item):
            assert any(k["owner"].slot == slot and k not in plan.fixes for k in plan.kept)


@settings(max_examples=examples(100), deadline=None)
@given(items=OWNED, count=st.integers(0, 8))
def test_a_machine_plan_without_gpus_releases_everything(items, count):
    plan = vgpus.plan_machine(items, VM_ID, count, TYPE_IDS, present=False)
    assert plan.releases == items
    assert plan.fixes == plan.kept == plan.missing == []


# --- pools.plan_machines ---

NAMES = ["n%d" % i for i in range(8)]
OWNERS = st.sampled_from([CLUSTER, "c2", None])


def described_vm(vm_id, name, owner, vcpus):
    """A VM of the listing with its owner read from its description (``vms.describe``)."""
    if owner is None:
        description = "made by hand"
    else:
        description = markers.machine_marker(owner, "workers")
    return dict(
        {"vm_id": vm_id, "name": name, "status": "RUNNING", "vcpus": vcpus, "memory": 4096},
        description=description,
        **vms.marker_view(description),
    )


@st.composite
def machine_worlds(draw):
    """``(pools, listing)``: pools of unique machine names, and the cloudspace's VMs with their owners."""
    listed = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=6))
    listing = [described_vm(100 + i, n, draw(OWNERS), draw(st.sampled_from([2, 4]))) for i, n in enumerate(listed)]
    wanted = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=6))
    cuts = sorted(draw(st.lists(st.integers(0, len(wanted)), max_size=2)))
    bounds = [0, *cuts, len(wanted)]
    pool_list = [
        Pool("p%d" % i, tuple(wanted[a:b]), vcpus=2, memory=4096, image=1, disk_size=10)
        for i, (a, b) in enumerate(itertools.pairwise(bounds))
    ]
    return pool_list, listing


@settings(max_examples=examples(300), deadline=None)
@given(world=machine_worlds(), present=st.booleans(), exclusive=st.booleans())
def test_plan_machines_creates_only_new_names_and_deletes_only_the_clusters(world, present, exclusive):
    pool_list, listing = world
    by_name = {v["name"]: v for v in listing}
    names = [n for p in pool_list for n in p.names]
    held_by_others = [n for n in names if n in by_name and by_name[n]["owner"] != CLUSTER]
    if held_by_others:
        with pytest.raises(InputError) as err:
            pools.plan_machines(pool_list, listing, CLUSTER, present, exclusive)
        assert all(repr(n) in str(err.value) for n in held_by_others) and "nothing was changed" in str(err.value)
        return
    plan = pools.plan_machines(pool_list, listing, CLUSTER, present, exclusive)
    created = [n for _p, n in plan.creates]
    assert not set(created) & set(by_name), "never creates a name that exists"
    assert all(v["owner"] == CLUSTER for v in plan.deletes), "never deletes a VM the cluster does not own"
    assert all(any(q is p and n in p.names for p in pool_list) for q, n in plan.creates)
    if not present:
        assert not created
    owned = {v["name"] for v in listing if v["owner"] == CLUSTER}
    assert plan.diff["before"] == diff_lines("machine", sorted(owned))
    after = (owned - {v["name"] for v in plan.deletes}) | set(created)
    assert plan.diff["after"] == diff_lines("machine", sorted(after))
    assert present or not plan.warnings


# --- orphans.select ---

MACHINES = ["m0", "m1", "worker-" + "w" * 50]  # the last is shortened in reservation names
CLUSTERS = [CLUSTER, "c2"]


@st.composite
def candidates(draw):
    """Owned reservations of several clusters and machines, of several ages, some in the recycle bin."""
    out = []
    for _ in range(draw(st.integers(0, 10))):
        state = draw(st.sampled_from(["here", "reserved", "deleted"]))
        out.append(
            reservation(
                draw(st.integers(0, 3)),
                "a100-40",
                state,
                machine=draw(st.sampled_from(MACHINES)),
                cluster=draw(st.sampled_from(CLUSTERS)),
                created=NOW - draw(st.integers(0, 7200)),
            )
        )
    return out


def _live(item, live_names):
    owner = item["owner"]
    return any(naming.owned_by(owner, c, name) for c in CLUSTERS for name in live_names)


@settings(max_examples=examples(300), deadline=None)
@given(
    items=candidates(),
    live=st.sets(st.sampled_from(MACHINES + ["n0"])),
    grace=st.integers(0, 3600),
    permanently=st.booleans(),
)
def test_select_releases_what_the_scope_allows_and_keeps_the_rest_with_a_reason(items, live, grace, permanently):
    for scope in ("cluster", "orphans"):
        chosen, kept = orphans.select(items, scope, orphans.OrphanCheck(live), grace, permanently, NOW)
        assert sorted(i["vgpu_id"] for i in chosen + kept) == sorted(i["vgpu_id"] for i in items)
        assert all(k["reason"] for k in kept), "each kept one says why"
        in_bin_kept = [i for i in items if deleted(i) and not permanently]
        if scope == "cluster":
            assert chosen == [i for i in items if i not in in_bin_kept]
            continue
        for item in chosen:
            assert not _live(item, live), "a reservation whose machine exists is never released"
            assert NOW - item["owner"].created >= grace, "nor one within the grace period"
        expected = [
            i for i in items if i not in in_bin_kept and not _live(i, live) and NOW - i["owner"].created >= grace
        ]
        assert chosen == expected
        # an orphan kept for the grace period says when it becomes eligible (issue 46), and so does the plan of them
        young = [k for k in kept if k["eligible_at"] is not None]
        assert all("grace period" in k["reason"] and k["eligible_at"] >= NOW for k in young)
        assert all(k["eligible_at"] is None for k in kept if "grace period" not in k["reason"])
        left = plandoc.left_out(kept, grace)
        assert left["count"] == len(young) and len(left["reservations"]) == min(len(young), plandoc.LEFT_OUT_SHOWN)
        when = sorted(k["eligible_at"] for k in young)
        assert left["first_eligible_at"] == (plandoc._utc(when[0]) if young else None)
        assert left["last_eligible_at"] == (plandoc._utc(when[-1]) if young else None)


@pytest.mark.parametrize(
    "price",
    [
        None,
        {},
        [],
        "abc",
        {"resources": None},
        {"resources": []},
        {"resources": {}},
        {"resources": {"vgu": None}},
        {"resources": {"vgu": -730}},
        {"resources": {"vgu": "abc"}},
        {"resources": {"vgu": "730"}},
        {"resources": {"vgu": [730]}},
        {"resources": {"vgu": True}},
        {"resources": {"vgu": float("nan")}},
        {"resources": {"vgu": float("inf")}},
    ],
    ids=repr,
)
def test_a_price_that_is_not_a_finite_number_of_zero_or_more_is_unknown_never_free(price):
    from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing

    assert billing.price_per_hour(price) is None
    assert billing.price_problem(price).startswith("the platform's price list has")
    assert billing.times(2, billing.price_per_hour(price)) is None and billing.times(0, None) == 0.0
    assert billing.shown(None, "EUR") == "unknown"


def test_a_known_price_is_per_hour():
    from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing

    assert billing.price_per_hour({"resources": {"vgu": 730}}) == 1.0
    assert billing.price_per_hour({"resources": {"vgu": 0}}) == 0.0
    assert billing.price_problem({"resources": {"vgu": 730.0}}) is None


# --- machine.plan_machine: one machine's typed plan ---


@st.composite
def one_machine(draw):
    """What ``machine.ensure`` is asked (``Asked``) and what it read (``Found``), the way its read makes it: the VM
    with its owner only with a cluster, the images only for a machine to create, the reservations only for a
    graceful delete of the cluster's machine."""
    state = draw(st.sampled_from(["present", "absent"]))
    cluster = draw(st.sampled_from([None, CLUSTER]))
    force, location = draw(st.booleans()), draw(st.sampled_from([None, "loc"]))
    one = Pool(
        "a",
        ("c1-a",),
        vcpus=draw(st.sampled_from([None, 2])),
        memory=draw(st.sampled_from([None, 2048])),
        image=draw(st.sampled_from([None, 12, 99])),
        disk_size=draw(st.sampled_from([None, 20])),
    )
    asked = machine.Asked("cs-1", state, force, cluster, location, one, None, userdata.Boot({}, "#cloud-config\n"))
    vm = seen = None
    if draw(st.booleans()):
        owner = draw(st.sampled_from([CLUSTER, "c2", None]))
        vm = {"vm_id": VM_ID, "name": "c1-a", "status": "RUNNING", "vcpus": draw(st.sampled_from([2, 4])),
              "memory": 2048, "image_id": 12}  # fmt: skip
        if cluster:
            vm = seen = dict(
                vm, owner=owner, description=markers.machine_marker(owner, "a") if owner else "x", pool="a"
            )
    images = [{"image_id": 12}] if state == "present" and vm is None and location else None
    owned = None
    if state == "absent" and seen is not None and not force and location and seen["owner"] == cluster:
        owned = [reservation(s, "a100-40", "here", machine="c1-a") for s in range(draw(st.integers(0, 2)))]
    return asked, machine.Found(vm, seen, images, owned)


@settings(max_examples=examples(300), deadline=None)
@given(one_machine())
def test_one_machines_plan_is_typed_and_says_what_ensure_does(case):
    asked, found = case
    vm, one = found.vm, asked.machine
    stranger = found.seen is not None and found.seen["owner"] != asked.cluster
    creates = asked.state == "present" and vm is None
    deletes = asked.state == "absent" and vm is not None
    refused = (
        stranger
        or (creates and not (one.vcpus and one.memory and one.image))
        or (creates and found.images is not None and one.image != 12)
        or (deletes and not asked.force and not (asked.cluster and asked.location))
    )
    try:
        plan = machine.plan_machine(asked, found)
    except InputError as exc:
        assert refused, exc
        if stranger:
            assert "is not owned by cluster 'c1'" in str(exc)
        return
    assert not refused
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.create = None  # type: ignore[misc]
    view = plan.view()
    before = machine.vm_view(vm) if vm else {}
    assert plan.changed == view["changed"] == (creates or deletes)
    assert view["machine"] == view["diff"]["before"] == before
    if creates:  # the VM as it is made: the machine (a pool of one), its rendered first boot
        assert plan.create is one and "capvco-first-boot" in plan.user_data
        assert view["diff"]["after"] == {
            "name": "c1-a",
            "vcpus": one.vcpus,
            "memory": one.memory,
            "image_id": one.image,
        }
    else:
        assert plan.create is None and plan.user_data == ""
    if deletes:
        assert plan.delete is vm and view["diff"]["after"] == {} and plan.force == asked.force
        assert list(plan.releases) == (found.owned or [])
        assert ("released_vgpus" in view) == (not asked.force)
        assert view.get("released_vgpus", []) == [i["vgpu_name"] for i in found.owned or []]
    else:
        assert plan.delete is None and plan.releases == () and "released_vgpus" not in view
    if asked.state == "present" and vm is not None:  # it exists: never resized, a warning when its size differs
        assert view["diff"]["after"] == before
        assert ("warnings" in view) == (one.vcpus is not None and vm["vcpus"] != one.vcpus)
