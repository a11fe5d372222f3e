# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What converging a cluster to its spec changes, computed once from what was read (pure: no platform call).

:func:`plan` returns one :class:`ClusterPlan`: the cloudspace, the machines' plan (``pools.plan_machines``) with
every pool's user data rendered and the reservations each graceful delete releases first, every pool's vGPU plan
with the one allocation of profiles made for all pools at once (``vgpus.plan_groups``, the GPU core's planner), the
capacity that takes and the price per hour before and after, each pool's price (of one machine, and of all of it:
``price``), and the cluster's pools note on its cloudspace (``poolsnote.pools_note``: written when it does not say the
spec's pools yet, so that a pool at zero keeps its definition where the inventory reads it). Every check of a
converge is called here: ownership of every VM the plan touches, sizes, images (each machine to create boots one its
location has), user data, GPU types, capacity, the budget (``price.check_cap``). ``apply.apply`` carries out exactly
this object; check mode returns its :meth:`ClusterPlan.view`. A new check of a converge goes here, before the first
platform write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.price import (
    PoolView,
    Price,
    check_cap,
    held,
    pool_amounts,
    pool_disk,
    pool_views,
    price,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing, vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.plans import Capacity, VgpuPlan
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import catalog, pools, userdata
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.machine import need_graceful, need_size
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import poolsnote
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import specnote

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.world import ClusterSpace, ClusterWorld
    from ansible_collections.whitesky.capvco.plugins.module_utils.machines.plans import MachinesPlan
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.typed import ClusterSpec, PoolSpec
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import Reservation


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
    #: the spec's pools, the control plane first (``machines`` refers to these)
    pools: tuple[PoolSpec, ...]
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
            pv = by_pool.get(pool.name)
            if pv is None:
                continue
            for name in pv.targets:
                mp = pv.plan.machines[name]
                releases += mp.releases
                attach += mp.fixes
                if pool.gpu:
                    reserve += [
                        {"machine": name, "slot": s, "type": pool.gpu.type, "profile": pv.plan.alloc[name]}
                        for s in mp.missing
                    ]
        deleted = {v["name"] for v in self.machines.deletes}
        owned = self.machines.owned
        return {
            "cloudspace": dict(self.cloudspace),  # type: ignore[typeddict-item]
            "create": [{"name": n, "pool": pool.name or ""} for pool, n in self.machines.creates],
            "delete": [v["name"] for v in self.machines.deletes],
            "keep": [n for n in owned if n not in deleted],
            "reserve": reserve,
            "release": sorted(i["vgpu_name"] for i in releases),
            "attach": sorted(i["vgpu_name"] for i in attach),
            "capacity": dict(self.capacity),
            "price": self.price,
            "user_data_bytes": {self.pools[i].name: len(d) for i, d in sorted(self.user_data.items())},
            "pools": [
                {**v, "gpu": dict(v["gpu"]) if v["gpu"] else None}  # type: ignore[typeddict-item]
                for v in self.pool_views
            ],
            "pools_note": {**self.pools_note, "remove": list(self.pools_note["remove"])},
        }


def boot(spec: ClusterSpec) -> userdata.Boot:
    """What the cluster's new machines boot with."""
    return userdata.Boot(dict(spec.first_boot))


def noted_pools(spec: ClusterSpec, images: Iterable[Mapping[str, Any]] | None = None) -> list[poolsnote.NotedPool]:
    """The spec's pools as the pools note records them (``specnote.record``), each with the boot disk its
    machines are priced at (:func:`pool_disk`, from ``images``, when the spec gives none)."""
    out = []
    for pool, p in zip(spec.pools, specnote.record(spec).pools, strict=True):
        disk = pool_disk(pool, images)
        low, high = poolsnote.DISK
        out.append(p._replace(disk_size=disk) if disk is not None and low <= disk <= high else p)
    return out


def pools_note_plan(
    spec: ClusterSpec, space: ClusterSpace | None, images: Iterable[Mapping[str, Any]] | None = None
) -> PoolsNotePlan:
    """What becomes of the cluster's pools note on ``space`` (None: the cloudspace is created by this run): created
    when it has none, updated in place (the oldest) when it says other pools or does not parse, the others of the
    cluster deleted; nothing written when it says the spec's pools already."""
    record = specnote.record(spec)
    _title, content = poolsnote.pools_note(spec.name, noted_pools(spec, images), record.boot)
    found = space["pools_notes"] if space is not None else []
    if not found:
        return {"write": "create", "note_id": None, "content": content, "remove": []}
    first, rest = found[0], [n["id"] for n in found[1:]]
    write = None if first["content"] == content else "update"
    return {"write": write, "note_id": first["id"], "content": content, "remove": rest}


def _targets(planned: VgpuPlan, gpu: bool) -> VgpuPlan:
    """A pool's vGPU plan with its targets: every machine of a GPU pool, those of another pool that hold
    reservations to release."""
    if gpu:
        return planned
    return VgpuPlan(machines={n: mp for n, mp in planned.machines.items() if mp.releases}, alloc=planned.alloc)


def plan(spec: ClusterSpec, world: ClusterWorld, max_hourly_cost: float | None = None) -> ClusterPlan:
    """What converging to ``spec`` changes, from the ``world`` that ``world.read`` returned (pure).

    Raises :class:`InputError` (or ``InsufficientCapacity``) for any plan that cannot be carried out whole.
    """
    cluster, location = spec.name, spec.location
    space = world["spaces"][0] if world["spaces"] else None
    vms = space["vms"] if space else []
    by_name = {v["name"]: v for v in vms}
    wanted = spec.pools
    machines = pools.plan_machines(wanted, vms, cluster, present=True, exclusive=True)  # refuses foreign names
    pools.check_dropped(machines, (p.name for p in spec.pools), spec.remove_pools)  # a pool left out is kept
    for pool in wanted:
        missing = [n for q, n in machines.creates if q is pool]
        if missing:
            need_size(pool, missing)
    creating = [pool.only(n for q, n in machines.creates if q is pool) for pool in wanted]
    to_create = catalog.images_of(creating)
    if to_create and world.get("images") is not None:  # an image the location lacks: refused before any write
        catalog.check_images(world["images"] or [], to_create, location)
    user_data = userdata.pool_user_data(boot(spec), creating)
    inventory = world["inventory"]
    deletes = [v["name"] for v in machines.deletes]
    if deletes:
        need_graceful(False, cluster, location, deletes)
    graceful = {n: inventory.owned(cluster, n) for n in deletes}
    # every pool's vGPUs, one allocation per type for all its pools; a pool without vGPUs releases what its machines
    # hold (those that hold none are no targets)
    groups = [
        vgpus.Group(
            tuple((by_name[n]["vm_id"] if n in by_name else None, n) for n in pool.names),
            pool.gpu.count if pool.gpu else 0,
            pool.gpu.type if pool.gpu else None,
            pool.gpu.profile if pool.gpu else None,
        )
        for pool in wanted
    ]
    slots = vgpus.plan_groups(world["profiles"], inventory, cluster, location, groups)
    capacity = slots.capacity
    gpu_memory = {pool.name: m for pool, m in zip(wanted, slots.memory, strict=True) if pool.gpu}
    targeted = [_targets(vp, bool(pool.gpu)) for pool, vp in zip(wanted, slots.plans, strict=True)]
    pool_vgpus = tuple(
        PoolVgpus(pool.name, tuple(vp.machines), vp) for pool, vp in zip(wanted, targeted, strict=True) if vp.machines
    )
    reserve = sum(len(mp.missing) for pv in pool_vgpus for mp in pv.plan.machines.values())
    release = sum(len(mp.releases) for pv in pool_vgpus for mp in pv.plan.machines.values())
    release += sum(len(items) for items in graceful.values())
    images = world.get("images")
    added = held([], 0 if space else 1, reserve)  # the vGPUs it reserves, on new machines or kept ones
    for made, _name in machines.creates:
        added = billing.plus(added, pool_amounts(made, images, vgpus=False))
    p = price(
        world,
        held([by_name[n] for n in machines.owned if n in by_name], 1 if space else 0, len(inventory.owned(cluster))),
        added,
        held(machines.deletes, 0, release),
    )
    check_cap(p, max_hourly_cost, world, location)
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
        pool_views=pool_views(spec, billing.rates(world.get("price")), images, gpu_memory),
        pools_note=pools_note_plan(spec, space, images),
    )
