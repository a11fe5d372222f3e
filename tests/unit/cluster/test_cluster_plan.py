"""The cluster's planners by property, without a server: ``cluster.plan.plan`` and ``cluster.teardown.plan_teardown``
on random worlds (the cluster's machines, strangers' machines with the same name shape, reservations in every
state).  The plan is one object: its view (what check mode shows) is computed from the parts that the appliers are
handed, so what the view says is what the appliers get."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import plan as cluster_plan
from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import teardown
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.billing import HOURS_PER_MONTH
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.errors import InsufficientCapacity
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import (
    markers,
    naming,
    notes,
    poolsnote,
    poolsread,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import speccheck, specnote
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import Inventory

from properties import examples

CLUSTER, LOC, CS = "c1", "loc", "cs-1"
PROFILES = [
    {"id": "nvidia-a100-20c", "vendor": "NVIDIA", "model": "A100", "available_instances": 6},
    {"id": "nvidia-a100-40c", "vendor": "NVIDIA", "model": "A100", "available_instances": 3},
]
IMAGES = [{"image_id": 12, "name": "Ubuntu 22.04", "boot_disk_size": 10}, {"image_id": 14, "name": "Ubuntu 24.04"}]
#: A location's monthly prices of the units a plan counts, and what a price list may say instead of one.
MONTHLY = {"vcu": 12.0, "mu": 3.5, "su": 0.1, "fsu": 0.25, "piu": 5.0, "vgu": 730.0}
ABSENT = object()
NOT_PRICES = [0, None, -1, "x", float("nan"), float("inf"), True, [1], ABSENT]


class _Listing:
    """The one call ``Inventory`` makes, answered from a list (the client boundary, no server)."""

    def __init__(self, items):
        self.items = items

    def vgpus(self, location, include_deleted=False):
        return [dict(i) for i in self.items]


def prices(draw):
    """A location's price list: each unit's monthly price, now and then one or two that are 0, missing or not a
    finite number of 0 or more."""
    odd = draw(st.sets(st.sampled_from(sorted(MONTHLY)), max_size=2))
    listed = {u: draw(st.sampled_from(NOT_PRICES)) if u in odd else MONTHLY[u] for u in MONTHLY}
    return {u: v for u, v in listed.items() if v is not ABSENT}


def per_hour(world, unit):
    """The oracle's hourly price of a unit: a finite number of 0 or more / 730, else None."""
    v = world["price"]["resources"].get(unit)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < float("inf")
    return v / HOURS_PER_MONTH if ok else None


def whole(world, amounts):
    """The oracle's price per hour of ``amounts`` ({unit: amount}): None when a unit held has no known price."""
    total = 0.0
    for unit, amount in amounts.items():
        rate = per_hour(world, unit)
        if amount and rate is None:
            return None
        total += amount * (rate or 0.0)
    return total


def machine(vcpus, memory, disk, vgpus=0):
    return {"vcu": vcpus, "mu": memory / 1024, "su": disk, "vgu": vgpus}


def summed(*parts):
    out = {}
    for part in parts:
        for unit, amount in part.items():
            out[unit] = out.get(unit, 0) + amount
    return out


@st.composite
def worlds(draw):
    cp = draw(st.integers(0, 2))
    gpu_replicas = draw(st.integers(0, 3))
    count = draw(st.integers(1, 2))
    gpu = {"type": "NVIDIA A100", "count": count}
    profile = draw(st.sampled_from([None, "full", "nvidia-a100-20c", "NVIDIA-A100-40C"]))
    if profile is not None:
        gpu["profile"] = profile
    # a pool no longer listed (old) is deleted only when the spec names it in remove_pools (issue 46)
    removed = draw(st.sampled_from([[], ["old"]]))
    spec = speccheck.check(
        {
            "remove_pools": removed,
            "cluster": {"name": CLUSTER, "location": LOC, "cloudspace": CS},
            "control_plane": {"replicas": cp, "vcpus": 1, "memory": 1024, "image": 12},
            "pools": [
                {
                    "name": "gpu",
                    "replicas": gpu_replicas,
                    "vcpus": 2,
                    "memory": 2048,
                    "image": 12,
                    "gpu": gpu,
                    **draw(st.sampled_from([{}, {"diskSize": 40}])),
                }
            ],
        }
    )
    candidates = ["c1-cp-%d" % i for i in range(3)] + ["c1-gpu-%d" % i for i in range(4)] + ["c1-old-0"]
    vms, vm_id = [], 100
    for name in draw(st.lists(st.sampled_from(candidates), unique=True, max_size=6)):
        vm_id += 1
        owner = CLUSTER if draw(st.integers(0, 4)) else "c2"  # now and then a stranger holds the name
        pool = draw(st.sampled_from([None, name.split("-")[1]]))  # the pool its marker names, or none
        vms.append(
            {
                "vm_id": vm_id,
                "name": name,
                "owner": owner,
                "description": markers.machine_marker(owner, pool),
                "vcpus": draw(st.integers(1, 16)),
                "memory": draw(st.sampled_from([1024, 1536, 65536])),
                "storage": draw(st.sampled_from([10, 25])),
                "pool": pool,
            }
        )
    items = []
    for i, (machine, slot, state) in enumerate(
        draw(st.lists(st.tuples(st.sampled_from(candidates), st.integers(0, 2), st.sampled_from("adr")), max_size=8))
    ):
        vm = next((v for v in vms if v["name"] == machine and v["owner"] == CLUSTER), None)
        attached = state == "a" and vm is not None
        items.append(
            {
                "vgpu_id": "v%d" % i,
                "vgpu_name": naming.encode(CLUSTER, machine, slot, created=1_800_000_000 + i),
                "gpu_id": draw(st.sampled_from(["nvidia-a100-20c", "nvidia-a100-40c", "l4"])),
                "status": "DELETED" if state == "d" else ("ATTACHED" if attached else "RESERVED"),
                "virtual_machine": {"id": vm["vm_id"], "name": machine, "cloudspace_id": CS} if attached else None,
            }
        )
    # the cluster's pools note as a run may find it: none, the spec's, another spec's, garbage, or two of them
    noted = cluster_plan.pools_note_plan(spec, None, IMAGES)["content"]
    other = poolsnote.pools_note(CLUSTER, [poolsnote.NotedPool("cp", 3, 1, 1024, None, 0)])[1]
    choices = [[], [noted], [other], ["pools cluster=c1 {{ x }}"], [other, noted]]
    pools_notes = [{"id": "n%d" % i, "content": c} for i, c in enumerate(draw(st.sampled_from(choices)))]
    world = {
        "spaces": [
            {
                "cloudspace": {"cloudspace_id": CS, "name": CS},
                "vms": vms,
                "creator": CLUSTER,
                "members": [],
                "pools_notes": pools_notes,
            }
        ],
        "inventory": Inventory(_Listing(items), LOC),
        "price": {"currency": "EUR", "resources": prices(draw)},
        "profiles": PROFILES,
        "images": IMAGES,
    }
    return spec, world


def check_vgpu_targets(spec, p):
    """A GPU pool's vGPU plan converges all of its machines; a pool without vGPUs only those holding reservations."""
    by_pool = {pool.name: pool for pool in spec.pools}
    for pv in p.vgpus:
        if by_pool[pv.pool].gpu is None:
            assert pv.targets and all(pv.plan.machines[n].releases for n in pv.targets), pv
        else:
            assert pv.targets == by_pool[pv.pool].names


@settings(max_examples=examples(300), deadline=None)
@given(worlds())
def test_a_converge_plan_is_one_object_whose_view_is_its_parts(case):
    spec, world = case
    strangers = {v["name"] for v in world["spaces"][0]["vms"] if v["owner"] != CLUSTER}
    try:
        p = cluster_plan.plan(spec, world)
    except InsufficientCapacity:  # the location has too few vGPUs (of the profile the pool asks for)
        return
    except InputError as exc:  # a stranger holds a name of the spec, or a pool no longer listed has machines
        dropped = [v["name"] for v in world["spaces"][0]["vms"] if v["owner"] == CLUSTER and v["pool"] == "old"]
        if not strangers & set(spec.names):
            assert dropped and not spec.remove_pools, exc
            assert "pool(s) old, whose machines this run would delete: old (%s)" % ", ".join(dropped) in str(exc)
            return
        assert any(n in str(exc) for n in strangers & set(spec.names)), exc
        return
    view = p.view()
    assert not strangers & set(spec.names)
    # the spec stays typed to the appliers: the plan holds the spec's pools as they are, and creates machines of them
    assert p.pools is spec.pools and all(any(q is pool for pool in spec.pools) for q, _n in p.machines.creates)
    # a machine of a pool the spec no longer lists is deleted only when the spec asks for it
    assert all(v["pool"] in (None, "cp", "gpu", *spec.remove_pools) for v in p.machines.deletes)
    # the machines: created only where no VM holds the name; deleted only the cluster's own, named in no pool
    assert [c["name"] for c in view["create"]] == [n for _pool, n in p.machines.creates]
    assert set(view["delete"]).isdisjoint(spec.names) and not set(view["delete"]) & strangers
    assert set(view["user_data_bytes"]) == {c["pool"] for c in view["create"]}
    # every reservation the view names is one the appliers are handed, and the other way round
    handed = [i for items in p.graceful.values() for i in items]
    handed += [i for pv in p.vgpus for mp in pv.plan.machines.values() for i in mp.releases]
    assert view["release"] == sorted(i["vgpu_name"] for i in handed)
    missing = [(n, s) for pv in p.vgpus for n, mp in pv.plan.machines.items() for s in mp.missing]
    assert sorted((r["machine"], r["slot"]) for r in view["reserve"]) == sorted(missing)
    assert all(r["profile"] == next(pv.plan.alloc[r["machine"]] for pv in p.vgpus if r["machine"] in pv.targets)
               for r in view["reserve"])  # fmt: skip
    # the profile the pool asks for (full: the A100's with the most GPU memory), and every reservation it keeps is one
    allowed = {None: {"nvidia-a100-40c"}, "full": {"nvidia-a100-40c"}}.get(
        spec.pools[1].gpu.profile, {str(spec.pools[1].gpu.profile).lower()}
    )
    assert {r["profile"] for r in view["reserve"]} <= allowed
    kept = [i for pv in p.vgpus for mp in pv.plan.machines.values() for i in mp.kept]
    assert {i["gpu_id"] for i in kept} <= allowed
    check_vgpu_targets(spec, p)
    # the price is the whole of what the cluster holds after the plan (its machines kept and created, its vGPUs, its
    # cloudspace's address), at each unit's price (or unknown), and each change is priced as the whole is
    price = view["price"]
    assert price["vgpus_before"] == len(world["inventory"].owned(CLUSTER))
    assert price["vgpus_after"] == price["vgpus_before"] + len(view["reserve"]) - len(view["release"])
    vms = {v["name"]: v for v in world["spaces"][0]["vms"] if v["owner"] == CLUSTER}
    size = {pool.name: pool for pool in spec.pools}
    disk = {pool.name: pool.disk_size or 10 for pool in spec.pools}  # the image's boot disk: 10 GiB
    created = [machine(size[c["pool"]].vcpus, size[c["pool"]].memory, disk[c["pool"]]) for c in view["create"]]
    kept = [machine(vms[n]["vcpus"], vms[n]["memory"], vms[n]["storage"]) for n in view["keep"]]
    after = summed(*created, *kept, {"piu": 1, "vgu": price["vgpus_after"]})
    expected = whole(world, after)
    assert (price["hourly_after"] is None) == (expected is None), (price, after)
    if expected is not None:
        assert price["hourly_after"] == pytest.approx(expected, abs=1e-3)
    if None not in (price["hourly_after"], price["hourly_before"], price["hourly_added"], price["hourly_removed"]):
        assert price["hourly_after"] == pytest.approx(
            price["hourly_before"] + price["hourly_added"] - price["hourly_removed"], abs=1e-3
        )
    for unit, line in price["units"].items():
        assert line["after"] == pytest.approx(after.get(unit, 0), abs=1e-3), unit
        assert line["after"] == pytest.approx(line["before"] + line["added"] - line["removed"], abs=1e-3)
    added = summed(*created, {"vgu": len(view["reserve"])})
    assert (price["hourly_added"] is None) == (whole(world, added) is None)
    # every pool of the spec with its price: one machine whole, and all of the pool's (0 at zero, whatever the price)
    assert [v["name"] for v in view["pools"]] == [pool.name for pool in spec.pools]
    for v, pool in zip(view["pools"], spec.pools, strict=True):
        count = pool.gpu.count if pool.gpu else 0
        assert v["replicas"] == len(pool.names) and (v["vcpus"], v["memory"]) == (pool.vcpus, pool.memory)
        shown = (pool.gpu.profile or "full") if pool.gpu else ""  # a pool without a profile takes whole cards
        memory = {"full": 40, "nvidia-a100-20c": 20, "nvidia-a100-40c": 40}.get(shown.lower())
        assert v["gpu"] == (
            {"type": pool.gpu.type, "count": count, "profile": shown, "memory": memory} if pool.gpu else None
        )
        one = whole(world, machine(pool.vcpus, pool.memory, disk[pool.name], count))
        assert v["disk_size"] == disk[pool.name]
        assert v["per_machine_hourly"] == (None if one is None else pytest.approx(one, abs=1e-3))
        if not pool.names:
            assert v["hourly"] == 0
        elif one is not None:
            assert v["hourly"] == pytest.approx(one * len(pool.names), abs=1e-3)
    # the pools note: written when it does not say the spec's pools (the oldest updated in place), others removed
    note, found = view["pools_note"], world["spaces"][0]["pools_notes"]
    assert poolsread.note_pools(notes.NOTE_TITLE, note["content"]) == (
        CLUSTER,
        tuple(cluster_plan.noted_pools(spec, IMAGES)),
    )
    if not found:
        assert note["write"] == "create" and note["remove"] == []
    else:
        assert note["note_id"] == found[0]["id"] and note["remove"] == [n["id"] for n in found[1:]]
        assert note["write"] == (None if found[0]["content"] == note["content"] else "update")
    assert p.changed == bool(
        view["create"]
        or view["delete"]
        or view["reserve"]
        or view["release"]
        or view["attach"]
        or note["write"]
        or note["remove"]
    )


@settings(max_examples=examples(200), deadline=None)
@given(worlds(), st.booleans())
def test_a_teardown_plan_deletes_only_the_clusters_machines_and_releases_what_it_owns(case, force):
    spec, world = case
    p = teardown.plan_teardown(spec, world, force=force)
    view = p.view()
    own = sorted(v["name"] for v in world["spaces"][0]["vms"] if v["owner"] == CLUSTER)
    assert view["delete"] == own
    assert view["release"] == sorted(i["vgpu_name"] for i in world["inventory"].owned(CLUSTER))
    assert (not p.graceful) if force else set(p.graceful) == set(own)
    assert view["price"]["vgpus_after"] == 0
    # what it removes is what the cluster held, whole: its machines, its vGPUs, the address of a cloudspace it deletes
    vms = {v["name"]: v for v in world["spaces"][0]["vms"]}
    gone = summed(*(machine(vms[n]["vcpus"], vms[n]["memory"], vms[n]["storage"]) for n in own))
    deleted = view["cloudspaces"][0]["delete"]
    removed = summed(gone, {"piu": 1 if deleted else 0, "vgu": len(view["release"])})
    units = view["price"]["units"]
    for unit in ("vcu", "mu", "su", "piu", "vgu"):
        assert units[unit]["removed"] == pytest.approx(removed.get(unit, 0), abs=1e-3), unit
        assert units[unit]["after"] == pytest.approx(units[unit]["before"] - removed.get(unit, 0), abs=1e-3), unit
    expected = whole(world, {"piu": 0 if deleted else 1})
    assert (view["price"]["hourly_after"] is None) == (expected is None)
    if expected is not None:
        assert view["price"]["hourly_after"] == pytest.approx(expected, abs=1e-3)
    # the cloudspace is deleted with its notes, or kept (not asked to delete it): the pools notes are deleted then
    kept = teardown.plan_teardown(spec, world, force=force, delete_cloudspace=False).view()["cloudspaces"][0]
    assert kept["pools_notes"] == [n["id"] for n in world["spaces"][0]["pools_notes"]]
    assert view["cloudspaces"][0]["pools_notes"] == ([] if view["cloudspaces"][0]["delete"] else kept["pools_notes"])
    if own:
        one = teardown.plan_teardown(spec, world, machine=own[0], force=force).view()["cloudspaces"][0]
        assert one["pools_notes"] == [], "deleting one machine keeps the cluster's pools note"


def test_a_teardown_of_one_machine_a_stranger_holds_is_refused():
    spec = speccheck.check({"cluster": {"name": CLUSTER, "location": LOC}})
    vm = {"vm_id": 1, "name": "c1-cp-0", "owner": "c2", "description": markers.machine_marker("c2")}
    world = {
        "spaces": [
            {"cloudspace": {"cloudspace_id": CS}, "vms": [vm], "creator": "c2", "members": [], "pools_notes": []}
        ],
        "inventory": Inventory(_Listing([]), LOC),
        "price": {},
        "profiles": [],
    }
    with pytest.raises(InputError, match="'c1-cp-0' is not owned by cluster 'c1'"):
        teardown.plan_teardown(spec, world, machine="c1-cp-0")


def _empty_world(images):
    return {
        "spaces": [],
        "inventory": Inventory(_Listing([]), LOC),
        "price": {},
        "profiles": PROFILES,
        "images": images,
    }


def _spec(cp_image, pool_image):
    return speccheck.check(
        {
            "cluster": {"name": CLUSTER, "location": LOC},
            "control_plane": {"replicas": 1, "vcpus": 1, "memory": 1024, "image": cp_image},
            "pools": [{"name": "w", "replicas": 2, "vcpus": 1, "memory": 1024, "image": pool_image}],
        }
    )


def test_a_converge_whose_image_the_location_lacks_is_refused_by_the_plan_naming_it_and_the_valid_ones():
    with pytest.raises(InputError) as err:
        cluster_plan.plan(_spec(12, 99), _empty_world(IMAGES))
    msg = str(err.value)
    assert "image 99 (for machine(s) 'c1-w-0', 'c1-w-1'): location 'loc' has no such image" in msg
    assert "its images: 12 'Ubuntu 22.04', 14 'Ubuntu 24.04'" in msg and "nothing was created" in msg
    assert "image 12" not in msg
    # the images it has: planned; not read (a world without them): the plan does not guess
    assert [c["name"] for c in cluster_plan.plan(_spec(12, 14), _empty_world(IMAGES)).view()["create"]] == [
        "c1-cp-0",
        "c1-w-0",
        "c1-w-1",
    ]
    assert cluster_plan.plan(_spec(12, 99), _empty_world(None)).changed


def test_a_converge_that_creates_nothing_does_not_check_images():
    """Machines that exist already are kept whatever image the spec names now (a VM's image is not changed)."""
    spec = _spec(12, 99)
    vms = [{"vm_id": i, "name": n, "owner": CLUSTER, "description": markers.machine_marker(CLUSTER)}
           for i, n in enumerate(spec.names, 1)]  # fmt: skip
    world = dict(_empty_world(IMAGES), spaces=[
        {"cloudspace": {"cloudspace_id": CS, "name": CS}, "vms": vms, "creator": CLUSTER, "members": [],
         "pools_notes": []}
    ])  # fmt: skip
    assert cluster_plan.plan(spec, world).view()["create"] == []


def _world(vms):
    return {
        "spaces": [
            {
                "cloudspace": {"cloudspace_id": CS, "name": CS},
                "vms": [
                    {"vm_id": 100 + i, "name": n, "owner": CLUSTER, "pool": pool, "vcpus": 1, "memory": 1024}
                    for i, (n, pool) in enumerate(vms)
                ],
                "creator": CLUSTER,
                "members": [],
                "pools_notes": [],
            }
        ],
        "inventory": Inventory(_Listing([]), LOC),
        "price": {"currency": "EUR", "resources": {"vgu": 730.0}},
        "profiles": PROFILES,
        "images": IMAGES,
    }


def test_a_spec_that_leaves_a_pool_out_deletes_its_machines_only_when_it_says_so():
    """Issue 46, point 11: ``-e '{"pools": [{"name": "gpu", ...}]}'`` on a cluster with a CPU pool deleted every
    machine of it.  Left out, the pool is refused by name with its machines; at 0 or in remove_pools, it goes."""
    world = _world([("c1-cp-0", "cp"), ("c1-cpu-0", "cpu"), ("c1-cpu-1", "cpu"), ("c1-gpu-0", "gpu")])
    base = {
        "cluster": {"name": CLUSTER, "location": LOC, "cloudspace": CS},
        "control_plane": {"replicas": 1, "vcpus": 1, "memory": 1024, "image": 12},
    }
    gpu = {"name": "gpu", "replicas": 1, "vcpus": 1, "memory": 1024, "image": 12}
    with pytest.raises(InputError) as exc:
        cluster_plan.plan(speccheck.check(dict(base, pools=[gpu])), world)
    assert "the spec no longer names pool(s) cpu, whose machines this run would delete: cpu (c1-cpu-0, c1-cpu-1)" in (
        str(exc.value)
    )
    assert exc.value.details["dropped_pools"] == {"cpu": ["c1-cpu-0", "c1-cpu-1"]}
    # the spec asks for it: the pool at zero, or named in remove_pools
    at_zero = dict(base, pools=[gpu, {"name": "cpu", "replicas": 0, "vcpus": 1, "memory": 1024}])
    removed = dict(base, pools=[gpu], remove_pools=["cpu"])
    for spec in (at_zero, removed):
        assert cluster_plan.plan(speccheck.check(spec), world).view()["delete"] == ["c1-cpu-0", "c1-cpu-1"]
    # a machine whose marker names no pool is no pool's: the spec's pools decide it as before
    loose = _world([("c1-cp-0", "cp"), ("c1-gpu-0", "gpu"), ("c1-extra-0", None)])
    assert cluster_plan.plan(speccheck.check(dict(base, pools=[gpu])), loose).view()["delete"] == ["c1-extra-0"]


@settings(max_examples=100, deadline=None)
@given(worlds(), st.lists(st.sampled_from(["containerd", "kubelet=1.30*"]), max_size=2), st.integers(1, 20))
def test_what_a_cluster_records_of_its_spec_makes_the_same_spec_again(case, packages, attempts):
    """The pools note records what a scale of one pool needs: the spec made from it is the spec (issue 46)."""
    spec, _world_ = case
    doc = dict(spec.as_dict(), first_boot={"packages": packages, "attempts": attempts}, remove_pools=[])
    spec = speccheck.check(doc)
    again = speccheck.check(specnote.from_record(spec.document["cluster"], specnote.record(spec)))
    assert again.pools == spec.pools and dict(again.first_boot) == dict(spec.first_boot)
    assert cluster_plan.pools_note_plan(again, None) == cluster_plan.pools_note_plan(spec, None)
