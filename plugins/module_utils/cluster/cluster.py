# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A whole cluster from its spec: checked, read, planned with its capacity and price, then applied (pure Python).

1. The spec is checked whole (``clusterspec.check``): a bad one fails before anything is read.
2. The world is read in parallel: the cloudspace by name, the cluster's VMs with their markers, the location's
   reservations, GPU profiles and prices (and, for a teardown, the cloudspace's creator note).
3. :func:`plan` (pure) computes what must change: the cloudspace, the machines to create and delete, the vGPUs to
   reserve, attach and release, the capacity that needs, the user data of each pool, and the price per hour
   before and after.  Every check is here: ownership of every VM the plan touches, GPU types, capacity, user-data
   size, the budget.  A plan that cannot be carried out raises before the first platform write.
4. Check mode returns the plan.  The real run applies it through the machines, GPU and sweep cores (handed what
   was read, so nothing is read twice) and reports what it did, also when it fails halfway.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.billing import (
    currency_of,
    price_per_hour,
    price_problem,
    times,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces, pools, userdata
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.cloudspaces import cloudspaces_named
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes as ownership_notes
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    InputError,
    PartialFailure,
    WhiteskyError,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import run_parallel
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import planfile, sweep
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import clusterspec
from ansible_collections.whitesky.capvco.plugins.module_utils.world.diff import diff_lines
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import Inventory
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import described, not_owned

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.machines.plans import Pool
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import (
        Capacity,
        CloudspaceView,
        ClusterPlan,
        ClusterSpace,
        ClusterWorld,
        MachineCreate,
        Price,
        Reservation,
        SlotReserve,
        TeardownPlan,
        TeardownSpace,
    )

_K = TypeVar("_K")
#: A cluster spec, checked (``clusterspec.check``).
Spec = dict[str, Any]


def _read(jobs: Mapping[_K, Callable[[], Any]]) -> dict[_K, Any]:
    got, failed = run_parallel(jobs, len(jobs))
    if failed:
        raise next(iter(failed.values()))
    return got


def read(client: WhiteskyClient, spec: Spec, teardown: bool = False, parallel: int = 32) -> ClusterWorld:
    """The world a plan needs, read in two parallel rounds: ``{spaces: [{cloudspace, vms, creator, members}],
    inventory, profiles, price}`` (the same-named cloudspaces, earliest first; a converge reads the first one only;
    a teardown reads each one's notes: who holds it, and the other clusters noted as having machines in it)."""
    loc, name = spec["cluster"]["location"], spec["cluster"]["cloudspace"]
    jobs: dict[str, Callable[[], Any]] = {
        "spaces": lambda: cloudspaces_named(client, name, loc),
        "inventory": lambda: Inventory(client, loc),
        "price": lambda: client.prices(loc),
    }
    if not teardown and any(pool.get("gpu") for pool in spec["pools"]):
        jobs["profiles"] = lambda: client.gpu_profiles(loc)
    first = _read(jobs)
    spaces = first["spaces"] if teardown else first["spaces"][:1]
    second: dict[tuple[str, str], Callable[[], Any]] = {}
    for cs in spaces:
        cs_id = cs["cloudspace_id"]
        second[("vms", cs_id)] = partial(described, client, cs_id, spec["cluster"]["name"], parallel)
        if teardown:
            second[("notes", cs_id)] = partial(client.cloudspace_notes, cs_id)
    got = _read(second)
    out: list[ClusterSpace] = []
    for cs in spaces:
        notes = got.get(("notes", cs["cloudspace_id"])) or []
        holder = cloudspaces.holder(notes) if teardown else None
        out.append(
            {
                "cloudspace": cloudspaces.view(cs),
                "vms": got[("vms", cs["cloudspace_id"])],
                "creator": holder,
                "members": sorted(ownership_notes.clusters_in(notes) - {holder}) if teardown else [],
            }
        )
    return {
        "spaces": out,
        "inventory": first["inventory"],
        "price": first["price"],
        "profiles": first.get("profiles", []),
    }


def _machine_pools(spec: Spec) -> list[Pool]:
    """The spec's pools in the machines core's shape (``image_id``, ``disk_size``, ``vgpus.driver_version``)."""
    out: list[Pool] = []
    for pool in clusterspec.pools(spec):
        g = pool.get("gpu")
        out.append(
            {
                "name": pool["name"],
                "names": pool["names"],
                "vcpus": pool["vcpus"],
                "memory": pool["memory"],
                "image_id": pool.get("image"),
                "disk_size": pool.get("diskSize"),
                "gpu": dict(type=g["type"], count=g["count"], driver_version=g["driverVersion"]) if g else None,
            }
        )
    return out


def _scope(
    spec: Spec, cloudspace_id: str, parallel: int, state: str = "present", force: bool = False, exclusive: bool = True
) -> pools.Scope:
    """The machines core's scope, for this cluster."""
    c = spec["cluster"]
    return pools.Scope(cloudspace_id, c["name"], c["location"], state, exclusive, force, parallel)


def _boot(spec: Spec) -> userdata.Boot:
    """What the cluster's new machines boot with."""
    return userdata.Boot(dict(spec["first_boot"]))


def _price(world: ClusterWorld, before: int, reserve: int, release: int) -> Price:
    per_hour = price_per_hour(world.get("price"))
    return {
        "currency": currency_of(world.get("price")),
        "per_vgpu_hour": times(1, per_hour),
        "vgpus_before": before,
        "vgpus_after": before + reserve - release,
        "hourly_before": times(before, per_hour),
        "hourly_added": times(reserve, per_hour),
        "hourly_removed": times(release, per_hour),
        "hourly_after": times(before + reserve - release, per_hour),
    }


def _check_cap(price: Price, max_hourly_cost: float | None, world: ClusterWorld, location: str) -> None:
    """Refuse a plan whose vGPUs cost more per hour than ``max_hourly_cost``, or whose price is not known."""
    if max_hourly_cost is not None and price["hourly_after"] is None:
        raise InputError(
            "max_hourly_cost %s cannot be checked: %s for location %r, so the price of the plan's %d vGPU(s) is not "
            "known; nothing was changed"
            % (max_hourly_cost, price_problem(world.get("price")), location, price["vgpus_after"])
        )
    if max_hourly_cost is not None and price["hourly_after"] is not None and price["hourly_after"] > max_hourly_cost:
        raise InputError(
            "the plan costs %.4f %s per hour in vGPUs once applied (%d vGPU(s)), over max_hourly_cost %s; nothing was "
            "changed" % (price["hourly_after"], price["currency"] or "", price["vgpus_after"], max_hourly_cost)
        )


def plan(spec: Spec, world: ClusterWorld, max_hourly_cost: float | None = None) -> ClusterPlan:
    """What converging to ``spec`` changes, from the ``world`` :func:`read` returned (pure: no platform call).

    Raises :class:`InputError` (or ``InsufficientCapacity``) for any plan that cannot be carried out whole.
    """
    cluster, location = spec["cluster"]["name"], spec["cluster"]["location"]
    space = world["spaces"][0] if world["spaces"] else None
    vms = space["vms"] if space else []
    by_name = {v["name"]: v for v in vms}
    wanted = _machine_pools(spec)
    names = [n for pool in wanted for n in pool["names"]]
    foreign = [by_name[n] for n in names if n in by_name and by_name[n]["owner"] != cluster]
    if foreign:
        raise InputError(
            "; ".join(str(not_owned(v["name"], cluster, v.get("description"))) for v in foreign)
            + "; nothing was changed"
        )
    owned = sorted(v["name"] for v in vms if v["owner"] == cluster)
    spec_pools = clusterspec.pools(spec)  # the same pools as wanted, in the same order, as the spec has them
    create: list[MachineCreate] = [
        {"name": n, "pool": pool["name"]} for pool in spec_pools for n in pool["names"] if n not in by_name
    ]
    delete = [n for n in owned if n not in names]
    user_data = userdata.pool_user_data(
        _boot(spec),
        [{**pool, "names": [c["name"] for c in create if c["pool"] == pool["name"]]} for pool in wanted],
    )
    inventory = world["inventory"]
    reserve: list[SlotReserve] = []
    release: list[Reservation] = []
    attach: list[Reservation] = []
    #: by normalised type: (the type as the spec writes it, its profiles, {machine: slots to reserve})
    needs: dict[str, tuple[str, list[vgpus.Profile], dict[str, int]]] = {}
    for pool in wanted:
        g = pool["gpu"]
        type_ids: set[str] = set()
        if g:
            profiles = vgpus.profiles_of_type(world["profiles"], g["type"], location)
            type_ids = {p["id"] for p in profiles}
            needs.setdefault(vgpus.normalise_type(g["type"]), (g["type"], profiles, {}))
        for name in pool["names"]:
            items = inventory.owned(cluster, name)
            if not g and not items:
                continue
            vm_id = by_name[name]["vm_id"] if name in by_name else None
            mp = vgpus.plan_machine(items, vm_id, g["count"] if g else 0, type_ids, bool(g))
            release += mp.releases
            attach += mp.fixes
            if g:  # (with no GPU, nothing is missing; the profile is chosen below, for all pools at once)
                reserve += [{"machine": name, "slot": s, "type": g["type"], "profile": ""} for s in mp.missing]
            if g and mp.missing:
                needs[vgpus.normalise_type(g["type"])][2][name] = len(mp.missing)
    for name in delete:  # a graceful delete releases the machine's reservations first
        release += inventory.owned(cluster, name)
    capacity: dict[str, Capacity] = {}
    alloc: dict[str, str] = {}
    for label, profiles, slots in needs.values():
        alloc.update(vgpus.allocate(profiles, slots, label))  # InsufficientCapacity before anything is created
        capacity[label] = {
            "needed": sum(slots.values()),
            "available": sum(int(p.get("available_instances") or 0) for p in profiles),
        }
    for r in reserve:
        r["profile"] = alloc[r["machine"]]
    billed = inventory.owned(cluster)
    price = _price(world, len(billed), len(reserve), len(release))
    _check_cap(price, max_hourly_cost, world, location)
    return {
        "cloudspace": {
            "name": spec["cluster"]["cloudspace"],
            "cloudspace_id": space["cloudspace"]["cloudspace_id"] if space else None,
            "create": space is None,
        },
        "create": create,
        "delete": delete,
        "keep": [n for n in owned if n in names],
        "reserve": reserve,
        "release": sorted(i["vgpu_name"] for i in release),
        "attach": sorted(i["vgpu_name"] for i in attach),
        "capacity": capacity,
        "price": price,
        "user_data_bytes": {spec_pools[i]["name"]: len(data) for i, data in sorted(user_data.items())},
    }


def _changed(p: ClusterPlan) -> bool:
    return bool(p["cloudspace"]["create"] or p["create"] or p["delete"] or p["reserve"] or p["release"] or p["attach"])


def _result(spec: Spec, p: ClusterPlan, done: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The module's result: the plan, and what was done (in check mode: what the plan would do)."""
    if done is None:
        done = _sorted(
            {
                "cloudspace_created": p["cloudspace"]["create"],
                "created": [c["name"] for c in p["create"]],
                "deleted": list(p["delete"]),
                "reserved": sorted("%s/%02d" % (r["machine"], r["slot"]) for r in p["reserve"]),
                "released": list(p["release"]),
            }
        )
    if done.get("cloudspace_created") and not p["cloudspace"]["create"]:
        # this run made the cloudspace under the lease, then planned again from fresh reads: the plan it returns
        # says it created it, as its check mode did
        made = p["cloudspace"].copy()
        made["create"] = True
        p = p.copy()
        p["cloudspace"] = made
    space = diff_lines("cloudspace", [p["cloudspace"]["name"]])
    diff = {
        "before": ("" if p["cloudspace"]["create"] else space)
        + diff_lines("machine", sorted(p["keep"] + p["delete"]))
        + diff_lines("vgpus", [p["price"]["vgpus_before"]]),
        "after": space
        + diff_lines("machine", sorted(p["keep"] + [c["name"] for c in p["create"]]))
        + diff_lines("vgpus", [p["price"]["vgpus_after"]]),
    }
    out = dict(done, changed=_changed(p), plan=p, spec=spec, diff=diff)
    out["machines"] = [
        {"name": n, "pool": pool["name"], "gpu": pool.get("gpu") or {}}
        for pool in clusterspec.pools(spec)
        for n in pool["names"]
    ]
    return out


def converge(
    client: WhiteskyClient,
    raw_spec: Mapping[str, Any] | None,
    check_mode: bool = False,
    max_hourly_cost: float | None = None,
    parallel: int = 32,
    variables: Iterable[str] = (),
) -> dict[str, Any]:
    """Core of ``cluster`` with ``state=present``."""
    spec = clusterspec.check(raw_spec, variables)
    if max_hourly_cost is not None and not 0 <= max_hourly_cost < math.inf:
        raise InputError("max_hourly_cost must be a number of 0 or more, got %r" % max_hourly_cost)
    for _attempt in range(RESTARTS):
        world = read(client, spec, parallel=parallel)
        p = plan(spec, world, max_hourly_cost)
        if check_mode or not _changed(p):
            return dict(_result(spec, p), cloudspace_id=p["cloudspace"]["cloudspace_id"])
        done: dict[str, Any] = {
            "cloudspace_created": False,
            "created": [],
            "deleted": [],
            "reserved": [],
            "released": [],
        }
        try:
            return _converge_held(client, spec, world, p, done, parallel, max_hourly_cost)
        except lease.CloudspaceGone:
            continue  # a teardown deleted the cloudspace while this run waited for it: start again from the reads
        except WhiteskyError as exc:
            raise _failed(exc, done) from None
    raise WhiteskyError(
        "cluster %r: its cloudspace was deleted by another run %d times while this run waited for the cluster; "
        "run it again" % (spec["cluster"]["name"], RESTARTS)
    )


#: How often a run starts again from its reads when a teardown deletes the cloudspace it waited on.
RESTARTS = 3


def _converge_held(
    client: WhiteskyClient,
    spec: Spec,
    world: ClusterWorld,
    p: ClusterPlan,
    done: dict[str, Any],
    parallel: int,
    max_hourly_cost: float | None,
) -> dict[str, Any]:
    """The cloudspace (claimed when there is none), then, holding the cluster's lease on it, the world read again
    and planned again (what was read before may be stale), and the plan applied."""
    if world["spaces"]:
        space = world["spaces"][0]["cloudspace"]
    else:
        space = _claim(client, spec, done)
    with lease.held(client, space["cloudspace_id"], spec["cluster"]["name"]) as fresh:
        if fresh is not None:
            world = read(client, spec, parallel=parallel)
            if not world["spaces"] or world["spaces"][0]["cloudspace"]["cloudspace_id"] != space["cloudspace_id"]:
                raise lease.CloudspaceGone("cloudspace %s is no longer the cluster's" % space["cloudspace_id"], {})
            p = plan(spec, world, max_hourly_cost)
        cs = _apply(client, spec, world, p, done, parallel)
    out = dict(_result(spec, p, _sorted(done)), cloudspace_id=cs)
    if fresh is not None and fresh.holders:
        out["warnings"] = [lease.waited_message(fresh)]
    return out


def _claim(client: WhiteskyClient, spec: Spec, done: dict[str, Any]) -> CloudspaceView:
    """A new cloudspace for the cluster, its creator note on it (or the one another run made first)."""
    c = spec["cluster"]
    try:
        space, done["cloudspace_created"] = cloudspaces.claim(client, c["cloudspace"], c["location"], c["name"])
    except WhiteskyError as exc:  # created, but neither claimed nor taken back
        done["cloudspace_created"] = bool(exc.details.get("cloudspace_created"))
        raise
    return space


def _sorted(done: Mapping[str, Any]) -> dict[str, Any]:
    """What a run did, its lists sorted (the platform answers in its own order), each name once."""
    return {k: sorted(set(v)) if isinstance(v, list) else v for k, v in done.items()}


def _failed(exc: WhiteskyError, done: Mapping[str, Any]) -> PartialFailure:
    """A failure halfway: the error, with what the run did before it (``changed`` true when it did anything)."""
    done = _sorted(done)
    details = dict(exc.details, **done)
    details["changed"] = any(done.values())
    what = "; ".join("%s %s" % (k, ", ".join(v) if isinstance(v, list) else v) for k, v in done.items() if v)
    return PartialFailure("%s; before it failed, this run did: %s" % (exc, what or "nothing"), details)


def _apply(
    client: WhiteskyClient, spec: Spec, world: ClusterWorld, p: ClusterPlan, done: dict[str, Any], parallel: int
) -> str:
    space = world["spaces"][0]["cloudspace"]
    vms = world["spaces"][0]["vms"]
    cs = space["cloudspace_id"]
    wanted = _machine_pools(spec)
    try:
        got = pools.converge_machines(
            client, wanted, _scope(spec, cs, parallel), _boot(spec), world={"vms": vms, "inventory": world["inventory"]}
        )
    except PartialFailure as exc:
        done["created"] += exc.details.get("created", [])
        done["deleted"] += exc.details.get("deleted", [])
        raise
    done["created"] += got["created"]
    done["deleted"] += got["deleted"]
    done["released"] += got.get("released_vgpus", [])
    listed = [{"vm_id": m["vm_id"], "name": m["name"]} for m in got["machines"]]
    # by id: a slot bought again within the second its last reservation was made has the same name
    before = {i["vgpu_id"] for i in world["inventory"].items}
    cluster = spec["cluster"]["name"]
    alloc = {r["machine"]: r["profile"] for r in p["reserve"]}  # the plan's choice, made for all pools at once
    for pool in wanted:
        g = pool["gpu"]
        targets = [n for n in pool["names"] if g or world["inventory"].owned(cluster, n)]
        if not targets:
            continue
        try:
            got = vgpus.ensure(
                client,
                location=spec["cluster"]["location"],
                cloudspace_id=cs,
                cluster=cluster,
                machines=targets,
                gpu_type=g["type"] if g else None,
                count=g["count"] if g else 0,
                state="present" if g else "absent",
                parallel=parallel,
                world={"vms": listed, "inventory": world["inventory"], "profiles": world["profiles"], "alloc": alloc},
            )
        except PartialFailure as exc:  # the machines that did converge: what they reserved
            done["reserved"] += _new_slots(exc.details.get("reservations", []), before)
            raise
        mine = {i["vgpu_name"] for n in targets for i in world["inventory"].owned(cluster, n)}
        done["released"] += [n for n in p["release"] if n in mine]
        done["reserved"] += _new_slots(got.get("reservations", []), before)
    return cs


def _new_slots(reservations: Iterable[Mapping[str, Any]], before: Collection[str]) -> list[str]:
    """``MACHINE/SLOT`` of the reservations not among the ids ``before``."""
    return ["%s/%02d" % (r["vm_name"], r["slot"]) for r in reservations if r["vgpu_id"] not in before]


def plan_teardown(
    spec: Spec, world: ClusterWorld, machine: str | None = None, force: bool = False, delete_cloudspace: bool = True
) -> TeardownPlan:
    """What tearing the cluster down (or deleting ``machine`` of it) changes, from the ``world`` :func:`read`
    returned with ``teardown=True`` (pure).  A ``machine`` the cluster does not own is refused."""
    cluster = spec["cluster"]["name"]
    inventory = world["inventory"]
    spaces: list[TeardownSpace] = []
    delete: list[str] = []
    for space in world["spaces"]:
        going = [v for v in space["vms"] if v["owner"] == cluster]
        if machine is not None:
            going = [v for v in space["vms"] if v["name"] == machine]
            if going and going[0]["owner"] != cluster:
                raise not_owned(machine, cluster, going[0].get("description"))
        why = cloudspaces.keep_reason(space["creator"], space["vms"], cluster, {v["name"] for v in going})
        handover = None
        if machine is not None or not delete_cloudspace:
            why = why or "not asked to delete it"
        elif why is not None and space["creator"] == cluster:  # kept for other clusters' machines: theirs now
            handover = cloudspaces.successor(space["vms"], cluster, space["members"])
            why += "; handed over to cluster %r, whose teardown deletes it" % handover if handover else ""
        spaces.append(
            {
                **space["cloudspace"],
                "delete": why is None,
                "kept": why,
                "machines": [v["name"] for v in going],
                "handover": handover,
            }
        )
        delete += [v["name"] for v in going]
    if machine is None:
        release = inventory.owned(cluster)  # everything it owns, attached or not, recycle bin included
        _refuse_live_elsewhere(spec, release, [s["cloudspace"]["cloudspace_id"] for s in world["spaces"]])
    else:
        release = [] if force else [i for n in delete for i in inventory.owned(cluster, n)]
    return {
        "cloudspaces": spaces,
        "delete": sorted(delete),
        "release": sorted(i["vgpu_name"] for i in release),
        "price": _price(world, len(inventory.owned(cluster)), 0, len(release)),
    }


def _refuse_live_elsewhere(spec: Spec, release: Iterable[Reservation], torn_down: Collection[str]) -> None:
    """A teardown of the wrong cloudspace (a typo in ``cluster.cloudspace``) would strip the GPUs off the cluster's
    running machines: refuse, before anything, to release a reservation attached to a machine in a cloudspace that
    this teardown does not empty."""
    elsewhere: dict[Any, set[Any]] = {}  # {cloudspace id: VM names}, as the platform gives them
    for item in release:
        vm = item.get("virtual_machine")
        if vm and vm.get("id") is not None and vm.get("cloudspace_id") not in torn_down:
            elsewhere.setdefault(vm.get("cloudspace_id"), set()).add(vm.get("name"))
    if elsewhere:
        raise InputError(
            "cluster %r has vGPUs attached to machines in other cloudspaces than %r (%s), which this teardown does "
            "not delete; give that cloudspace as cluster.cloudspace. Nothing was changed"
            % (
                spec["cluster"]["name"],
                spec["cluster"]["cloudspace"],
                "; ".join("%s: %s" % (cs, ", ".join(sorted(names))) for cs, names in sorted(elsewhere.items())),
            )
        )


def teardown(
    client: WhiteskyClient,
    raw_spec: Mapping[str, Any] | None,
    check_mode: bool = False,
    machine: str | None = None,
    force: bool = False,
    delete_cloudspace: bool = True,
    parallel: int = 32,
    variables: Iterable[str] = (),
    plan_file: str | None = None,
) -> dict[str, Any]:
    """Core of ``cluster`` with ``state=absent``: every machine the cluster owns (or only ``machine``) deleted, every
    reservation it owns released, and each cloudspace of the name that the cluster created and that holds nothing
    else deleted.  In check mode, ``plan_file`` also writes the reservations it would release to that file, a
    reclaim plan (``reclaim_plan``) that ``vgpu_reclaim plan=FILE`` applies after review."""
    spec = clusterspec.check(raw_spec, variables)
    if plan_file is not None:
        if machine is not None:
            raise InputError("plan_file is for a whole cluster's teardown, not for deleting one machine")
        planfile.check_new(plan_file, check_mode)
    for _attempt in range(RESTARTS):
        world = read(client, spec, teardown=True, parallel=parallel)
        p = plan_teardown(spec, world, machine, force, delete_cloudspace)
        out = _teardown_result(spec, p, machine)
        if plan_file is not None:
            return dict(out, **_write_reclaim_plan(client, spec, world, p, plan_file))
        if check_mode or not out["changed"]:
            return out
        done: dict[str, list[str]] = {"deleted": [], "released": [], "cloudspaces_deleted": []}
        carry_out = partial(_apply_teardown, client, spec, force=force, sweep_all=machine is None, parallel=parallel)
        try:
            if not world["spaces"]:  # nothing but reservations left, in no cloudspace to hold a lease on
                carry_out(world, p, done)
                return dict(out, **_sorted(done))
            with lease.held(client, world["spaces"][0]["cloudspace"]["cloudspace_id"], spec["cluster"]["name"]) as got:
                if got is not None:  # what was read before this run held the cluster may be stale
                    world = read(client, spec, teardown=True, parallel=parallel)
                    p = plan_teardown(spec, world, machine, force, delete_cloudspace)
                    out = _teardown_result(spec, p, machine)
                carry_out(world, p, done)
        except lease.CloudspaceGone:
            continue  # another teardown deleted it while this run waited: read what is left
        except WhiteskyError as exc:
            raise _failed(exc, done) from None
        out = dict(out, **_sorted(done))
        if got is not None and got.holders:
            out.setdefault("warnings", []).append(lease.waited_message(got))
        return out
    raise WhiteskyError(
        "cluster %r: its cloudspace was deleted by another run %d times while this run waited for the cluster; "
        "run it again" % (spec["cluster"]["name"], RESTARTS)
    )


def _write_reclaim_plan(
    client: WhiteskyClient, spec: Spec, world: ClusterWorld, p: TeardownPlan, path: str
) -> dict[str, Any]:
    """The teardown's releases, written as a reclaim plan of scope ``cluster`` (``sweep.write_plan``)."""
    cluster, location = spec["cluster"]["name"], spec["cluster"]["location"]
    planned = set(p["release"])
    items = [i for i in world["inventory"].owned(cluster) if i["vgpu_name"] in planned]
    scope = planfile.scope_of("cluster", location, cluster)
    return sweep.write_plan(client, path, scope, items, "whitesky.capvco.cluster")


def _teardown_result(spec: Spec, p: TeardownPlan, machine: str | None) -> dict[str, Any]:
    """What a teardown would do (check mode), or the frame of what it did."""
    planned = {
        "deleted": p["delete"],
        "released": p["release"],
        "cloudspaces_deleted": [c["cloudspace_id"] for c in p["cloudspaces"] if c["delete"]],
    }
    out = dict(planned, changed=any(planned.values()), plan=p, spec=spec)
    out["diff"] = {
        "before": diff_lines("cloudspace", [c["name"] for c in p["cloudspaces"] if c["delete"]])
        + diff_lines("machine", p["delete"])
        + diff_lines("vgpus", [p["price"]["vgpus_before"]]),
        "after": diff_lines("vgpus", [p["price"]["vgpus_after"]]),
    }
    if machine is not None and not p["delete"]:
        out["warnings"] = [
            "machine %r is in no cloudspace %r of cluster %r: nothing to delete"
            % (machine, spec["cluster"]["cloudspace"], spec["cluster"]["name"])
        ]
    return out


def _apply_teardown(
    client: WhiteskyClient,
    spec: Spec,
    world: ClusterWorld,
    p: TeardownPlan,
    done: dict[str, list[str]],
    force: bool,
    sweep_all: bool,
    parallel: int,
) -> None:
    cluster, location = spec["cluster"]["name"], spec["cluster"]["location"]
    for space, planned in zip(world["spaces"], p["cloudspaces"], strict=True):
        if planned["machines"]:  # gracefully (their reservations released first) unless force
            got = pools.converge_machines(
                client,
                [{"name": None, "names": planned["machines"], "gpu": None}],
                _scope(spec, planned["cloudspace_id"], parallel, state="absent", force=force, exclusive=False),
                world={"vms": space["vms"], "inventory": world["inventory"]},
            )
            done["deleted"] += got["deleted"]
            done["released"] += got.get("released_vgpus", [])
    if sweep_all:
        planned_ids = {i["vgpu_id"] for i in world["inventory"].owned(cluster) if i["vgpu_name"] in p["release"]}
        swept = sweep.release_cluster(client, location=location, cluster=cluster, parallel=parallel, only=planned_ids)
        done["released"] += [r["vgpu_name"] for r in swept["released"]]
    for planned in p["cloudspaces"]:
        if planned["delete"]:
            cloudspaces.delete(client, planned)
            done["cloudspaces_deleted"].append(planned["cloudspace_id"])
        elif planned["handover"] and cloudspaces.hand_over(client, planned, cluster, planned["handover"]):
            done["cloudspaces_deleted"].append(planned["cloudspace_id"])  # its successor had gone meanwhile


def run(
    client: WhiteskyClient,
    *,
    spec: Mapping[str, Any] | None,
    variables: Iterable[str] | None = None,
    state: str = "present",
    machine: str | None = None,
    force: bool = False,
    delete_cloudspace: bool = True,
    max_hourly_cost: float | None = None,
    parallel: int = 32,
    plan_file: str | None = None,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Core of the ``cluster`` module: :func:`converge` or :func:`teardown`."""
    if state == "present":
        if machine is not None:
            raise InputError("machine is for state=absent (delete one machine of the cluster)")
        if plan_file is not None:
            raise InputError("plan_file is for state=absent (a teardown's reclaim plan, written in check mode)")
        return converge(client, spec, check_mode, max_hourly_cost, parallel, variables or ())
    return teardown(
        client,
        spec,
        check_mode,
        machine=machine,
        force=force,
        delete_cloudspace=delete_cloudspace,
        parallel=parallel,
        variables=variables or (),
        plan_file=plan_file,
    )
