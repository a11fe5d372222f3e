# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What converging a cluster to its spec changes, computed once from what was read (pure: no platform call).

:func:`plan` returns one :class:`ClusterPlan`: the cloudspace, the machines' plan (``pools.plan_machines``) with
every pool's user data rendered and the reservations each graceful delete releases first, every pool's vGPU plan
(``vgpus.plan_machine``) with the one allocation of profiles made for all pools at once, the capacity that takes
and the price per hour before and after, each pool's price (of one machine, and of all of it), and the cluster's pools
note on its cloudspace (``notes.pools_note``: written when it does not say the spec's pools yet, so that a pool at
zero keeps its definition where the inventory reads it).  Every check of a converge is called here: ownership of
every VM the plan touches, sizes, images (each machine to create boots one its location has), user data, GPU types,
capacity, the budget.  ``apply.apply`` carries out exactly this object; check mode returns its
:meth:`ClusterPlan.view`.  A new check of a converge goes here, before the first platform write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import profiles as gpu_profiles
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.billing import (
    currency_of,
    price_per_hour,
    price_problem,
    times,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.plans import MachinePlan, VgpuPlan
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import catalog, pools, userdata
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.machine import need_graceful, need_size
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes as ownership_notes
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import clusterspec

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.world import ClusterSpace, ClusterWorld
    from ansible_collections.whitesky.capvco.plugins.module_utils.machines.plans import MachinesPlan, Pool
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.clusterspec import ClusterSpec
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import Reservation


class Price(TypedDict):
    """What the cluster's vGPUs cost per hour before and after a plan; each price is None when the location's price
    is not known (``billing.price_per_hour``)."""

    currency: str | None
    per_vgpu_hour: float | None
    vgpus_before: int
    vgpus_after: int
    hourly_before: float | None
    hourly_added: float | None
    hourly_removed: float | None
    hourly_after: float | None


class CloudspacePlan(TypedDict):
    name: str
    cloudspace_id: str | None
    create: bool


class MachineCreate(TypedDict):
    name: str
    pool: str


class SlotReserve(TypedDict):
    machine: str
    slot: int
    type: str
    profile: str


class Capacity(TypedDict):
    needed: int
    available: int


class PoolGpu(TypedDict):
    type: str
    count: int
    #: the pool's gpu.profile (``full`` or a profile id), None: any of the type's profiles
    profile: str | None


class PoolView(TypedDict):
    """One pool of the spec (the control plane included) with its price: the vGPUs of one machine at the location's
    price (``per_machine_hourly``: 0 for a pool without GPUs, None when the price is not known) and of every
    machine the spec asks for (``hourly``: 0 for a pool at zero)."""

    name: str
    replicas: int
    vcpus: int
    memory: int
    gpu: PoolGpu | None
    per_machine_hourly: float | None
    hourly: float | None


class PoolsNotePlan(TypedDict):
    """The cluster's pools note on its cloudspace: what it says once the plan is applied (``content``), whether it
    is written (``create``; ``update`` of the note ``note_id``; None: it says so already), and ``remove``, the ids of
    the cluster's other pools notes there (one per cluster and cloudspace), deleted."""

    write: str | None
    note_id: str | None
    content: str
    remove: list[str]


class PlanView(TypedDict):
    """A :class:`ClusterPlan` as the ``cluster`` module returns it (``plan``; its shape is the module's RETURN)."""

    cloudspace: CloudspacePlan
    create: list[MachineCreate]
    delete: list[str]
    keep: list[str]
    reserve: list[SlotReserve]
    release: list[str]
    attach: list[str]
    capacity: dict[str, Capacity]
    price: Price
    user_data_bytes: dict[str, int]
    pools: list[PoolView]
    pools_note: PoolsNotePlan


@dataclass(frozen=True)
class PoolVgpus:
    """One pool's vGPU plan: the machines it converges (a GPU pool's all, another pool's those that hold
    reservations to release) and their :class:`~gpu.plans.VgpuPlan`, its profiles taken from the one allocation."""

    pool: str
    targets: tuple[str, ...]
    plan: VgpuPlan


@dataclass(frozen=True)
class ClusterPlan:
    """Everything a converge changes, and what its appliers need to do it without reading or planning again."""

    spec: ClusterSpec
    cloudspace: CloudspacePlan
    #: the spec's pools in the machines core's shape, the control plane first (``machines`` refers to these)
    pools: tuple[Pool, ...]
    machines: MachinesPlan
    #: ``{pool index: user data}`` of the pools with machines to create, rendered and checked
    user_data: dict[int, str]
    #: ``{machine: reservations}`` each machine to delete releases first
    graceful: dict[str, list[Reservation]]
    vgpus: tuple[PoolVgpus, ...]
    capacity: dict[str, Capacity]
    price: Price
    #: every pool of the spec with its price, in the spec's order (the control plane first)
    pool_views: tuple[PoolView, ...]
    pools_note: PoolsNotePlan

    @property
    def changed(self) -> bool:
        view = self.view()
        return bool(
            view["cloudspace"]["create"]
            or view["create"]
            or view["delete"]
            or view["reserve"]
            or view["release"]
            or view["attach"]
            or view["pools_note"]["write"]
            or view["pools_note"]["remove"]
        )

    def view(self) -> PlanView:
        """The plan as check mode shows it and the module returns it."""
        reserve: list[SlotReserve] = []
        releases: list[Reservation] = [i for items in self.graceful.values() for i in items]
        attach: list[Reservation] = []
        by_pool = {pv.pool: pv for pv in self.vgpus}
        for pool in self.pools:
            pv = by_pool.get(pool["name"] or "")
            if pv is None:
                continue
            for name in pv.targets:
                mp = pv.plan.machines[name]
                releases += mp.releases
                attach += mp.fixes
                if pool["gpu"]:
                    reserve += [
                        {"machine": name, "slot": s, "type": pool["gpu"]["type"], "profile": pv.plan.alloc[name]}
                        for s in mp.missing
                    ]
        deleted = {v["name"] for v in self.machines.deletes}
        owned = self.machines.owned
        return {
            "cloudspace": dict(self.cloudspace),  # type: ignore[typeddict-item]
            "create": [{"name": n, "pool": pool["name"] or ""} for pool, n in self.machines.creates],
            "delete": [v["name"] for v in self.machines.deletes],
            "keep": [n for n in owned if n not in deleted],
            "reserve": reserve,
            "release": sorted(i["vgpu_name"] for i in releases),
            "attach": sorted(i["vgpu_name"] for i in attach),
            "capacity": dict(self.capacity),
            "price": self.price,
            "user_data_bytes": {self.pools[i]["name"] or "": len(d) for i, d in sorted(self.user_data.items())},
            "pools": [
                {**v, "gpu": dict(v["gpu"]) if v["gpu"] else None}  # type: ignore[typeddict-item]
                for v in self.pool_views
            ],
            "pools_note": {**self.pools_note, "remove": list(self.pools_note["remove"])},
        }


def machine_pools(spec: ClusterSpec) -> tuple[Pool, ...]:
    """The spec's pools in the machines core's shape (``image_id``, ``disk_size``, ``gpu.driver_version``,
    ``gpu.profile``)."""
    return tuple(
        {
            "name": p.name,
            "names": list(p.names),
            "vcpus": p.vcpus,
            "memory": p.memory,
            "image_id": p.image,
            "disk_size": p.disk_size,
            "gpu": dict(type=p.gpu.type, count=p.gpu.count, driver_version=p.gpu.driver_version, profile=p.gpu.profile)
            if p.gpu
            else None,
        }
        for p in spec.pools
    )


def boot(spec: ClusterSpec) -> userdata.Boot:
    """What the cluster's new machines boot with."""
    return userdata.Boot(dict(spec.first_boot))


def price(world: ClusterWorld, before: int, reserve: int, release: int) -> Price:
    """The price per hour of ``before`` vGPUs, and of what reserving and releasing some changes."""
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


def pool_views(spec: ClusterSpec, per_hour: float | None) -> tuple[PoolView, ...]:
    """Every pool of the spec with its price at ``per_hour`` per vGPU (``billing.price_per_hour``; None: not
    known, never free): one machine's vGPUs, and all of the pool's (``billing.times``)."""
    out: list[PoolView] = []
    for p in spec.pools:
        count = p.gpu.count if p.gpu else 0
        out.append(
            {
                "name": p.name,
                "replicas": len(p.names),
                "vcpus": p.vcpus,
                "memory": p.memory,
                "gpu": {"type": p.gpu.type, "count": p.gpu.count, "profile": p.gpu.profile} if p.gpu else None,
                "per_machine_hourly": times(count, per_hour),
                "hourly": times(count * len(p.names), per_hour),
            }
        )
    return tuple(out)


def noted_pools(spec: ClusterSpec) -> list[ownership_notes.NotedPool]:
    """The spec's pools as the pools note records them."""
    return list(clusterspec.record(spec).pools)


def pools_note_plan(spec: ClusterSpec, space: ClusterSpace | None) -> PoolsNotePlan:
    """What becomes of the cluster's pools note on ``space`` (None: the cloudspace is created by this run): created
    when it has none, updated in place (the oldest) when it says other pools or does not parse, the others of the
    cluster deleted; nothing written when it says the spec's pools already."""
    record = clusterspec.record(spec)
    _title, content = ownership_notes.pools_note(spec.name, record.pools, record.boot)
    found = space["pools_notes"] if space is not None else []
    if not found:
        return {"write": "create", "note_id": None, "content": content, "remove": []}
    first, rest = found[0], [n["id"] for n in found[1:]]
    write = None if first["content"] == content else "update"
    return {"write": write, "note_id": first["id"], "content": content, "remove": rest}


def _check_cap(p: Price, max_hourly_cost: float | None, world: ClusterWorld, location: str) -> None:
    """Refuse a plan whose vGPUs cost more per hour than ``max_hourly_cost``, or whose price is not known."""
    if max_hourly_cost is not None and p["hourly_after"] is None:
        raise InputError(
            "max_hourly_cost %s cannot be checked: %s for location %r, so the price of the plan's %d vGPU(s) is not "
            "known; nothing was changed"
            % (max_hourly_cost, price_problem(world.get("price")), location, p["vgpus_after"])
        )
    if max_hourly_cost is not None and p["hourly_after"] is not None and p["hourly_after"] > max_hourly_cost:
        raise InputError(
            "the plan costs %.4f %s per hour in vGPUs once applied (%d vGPU(s)), over max_hourly_cost %s; nothing was "
            "changed" % (p["hourly_after"], p["currency"] or "", p["vgpus_after"], max_hourly_cost)
        )


def plan(spec: ClusterSpec, world: ClusterWorld, max_hourly_cost: float | None = None) -> ClusterPlan:
    """What converging to ``spec`` changes, from the ``world`` that ``world.read`` returned (pure).

    Raises :class:`InputError` (or ``InsufficientCapacity``) for any plan that cannot be carried out whole.
    """
    cluster, location = spec.name, spec.location
    space = world["spaces"][0] if world["spaces"] else None
    vms = space["vms"] if space else []
    by_name = {v["name"]: v for v in vms}
    wanted = machine_pools(spec)
    machines = pools.plan_machines(wanted, vms, cluster, present=True, exclusive=True)  # refuses foreign names
    pools.check_dropped(machines, (p.name for p in spec.pools), spec.remove_pools)  # a pool left out is kept
    for pool in wanted:
        missing = [n for q, n in machines.creates if q is pool]
        if missing:
            need_size(pool, missing)
    to_create = catalog.images_of({**pool, "names": [n for q, n in machines.creates if q is pool]} for pool in wanted)
    if to_create and world.get("images") is not None:  # an image the location lacks: refused before any write
        catalog.check_images(world["images"] or [], to_create, location)
    user_data = userdata.pool_user_data(
        boot(spec), [{**pool, "names": [n for q, n in machines.creates if q is pool]} for pool in wanted]
    )
    inventory = world["inventory"]
    deletes = [v["name"] for v in machines.deletes]
    if deletes:
        need_graceful(False, cluster, location, deletes)
    graceful = {n: inventory.owned(cluster, n) for n in deletes}
    #: by normalised type: (the type as the spec writes it, its profiles, {machine: slots to reserve}, {machine: the
    #: profile ids its pool's gpu.profile allows})
    needs: dict[str, tuple[str, list[gpu_profiles.Profile], dict[str, int], dict[str, set[str]]]] = {}
    per_pool: list[tuple[Pool, dict[str, MachinePlan]]] = []
    for pool in wanted:
        g = pool["gpu"]
        type_ids: set[str] = set()
        if g:
            profiles = gpu_profiles.profiles_of_type(world["profiles"], g["type"], location)
            # the profiles the pool asks for (all of the type's without gpu.profile): a reservation of another is
            # replaced, and a profile the type does not have is refused here, before anything is written
            type_ids = {p["id"] for p in gpu_profiles.choose(profiles, g.get("profile"), g["type"], location)}
            needs.setdefault(gpu_profiles.normalise_type(g["type"]), (g["type"], profiles, {}, {}))
        plans: dict[str, MachinePlan] = {}
        for name in pool["names"]:
            items = inventory.owned(cluster, name)
            if not g and not items:
                continue
            vm_id = by_name[name]["vm_id"] if name in by_name else None
            mp = vgpus.plan_machine(items, vm_id, g["count"] if g else 0, type_ids, bool(g))
            plans[name] = mp
            if g and mp.missing:
                needs[gpu_profiles.normalise_type(g["type"])][2][name] = len(mp.missing)
                needs[gpu_profiles.normalise_type(g["type"])][3][name] = type_ids
        per_pool.append((pool, plans))
    capacity: dict[str, Capacity] = {}
    alloc: dict[str, str] = {}
    for label, profiles, slots, allowed in needs.values():
        # InsufficientCapacity before anything is made; one allocation for the type's pools, whatever each asks for
        alloc.update(gpu_profiles.allocate(profiles, slots, label, allowed))
        usable = set().union(*allowed.values()) if allowed else {p["id"] for p in profiles}
        capacity[label] = {
            "needed": sum(slots.values()),
            "available": sum(int(p.get("available_instances") or 0) for p in profiles if p["id"] in usable),
        }
    pool_vgpus = tuple(
        PoolVgpus(
            pool["name"] or "",
            tuple(plans),
            VgpuPlan(machines=plans, alloc={n: alloc[n] for n, mp in plans.items() if mp.missing}),
        )
        for pool, plans in per_pool
        if plans
    )
    reserve = sum(len(mp.missing) for pv in pool_vgpus for mp in pv.plan.machines.values())
    release = sum(len(mp.releases) for pv in pool_vgpus for mp in pv.plan.machines.values())
    release += sum(len(items) for items in graceful.values())
    p = price(world, len(inventory.owned(cluster)), reserve, release)
    _check_cap(p, max_hourly_cost, world, location)
    per_hour = price_per_hour(world.get("price"))
    return ClusterPlan(
        spec=spec,
        cloudspace={
            "name": spec.cloudspace,
            "cloudspace_id": space["cloudspace"]["cloudspace_id"] if space else None,
            "create": space is None,
        },
        pools=wanted,
        machines=machines,
        user_data=user_data,
        graceful=graceful,
        vgpus=pool_vgpus,
        capacity=capacity,
        price=p,
        pool_views=pool_views(spec, per_hour),
        pools_note=pools_note_plan(spec, space),
    )
