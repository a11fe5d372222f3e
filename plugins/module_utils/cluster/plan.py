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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing, vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import profiles as gpu_profiles
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.plans import Capacity, VgpuPlan
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import catalog, pools, userdata
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.machine import need_graceful, need_size
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes as ownership_notes
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import clusterspec
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import PoolGpu, PoolShown

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.world import ClusterSpace, ClusterWorld
    from ansible_collections.whitesky.capvco.plugins.module_utils.machines.plans import MachinesPlan
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.clusterspec import ClusterSpec, PoolSpec
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import VM, Reservation


class UnitPrice(TypedDict):
    """One unit of the location's price list in a plan's price: what one of it is (``size``), its price per hour
    (None: not known), how much of it the cluster holds before the plan, what the plan adds and removes, what it
    holds after (None: not known), and what that costs per hour (None: not known; 0 when it holds none)."""

    size: str
    per_hour: float | None
    before: float | None
    added: float | None
    removed: float | None
    after: float | None
    hourly_after: float | None


class Price(TypedDict):
    """What the cluster costs per hour before and after a plan, whole: every unit of the location's price list that
    it holds (``billing.UNITS_PRICED``: its machines' vCPUs, memory and boot disks, its cloudspace's public address,
    its vGPUs), each in ``units``.  A price is None when a unit counted in it has no known price (missing, null,
    negative or not a number: never 0)."""

    currency: str | None
    per_vgpu_hour: float | None
    vgpus_before: int
    vgpus_after: int
    hourly_before: float | None
    hourly_added: float | None
    hourly_removed: float | None
    hourly_after: float | None
    units: dict[str, UnitPrice]


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


class GpuView(PoolGpu):
    """A pool's vGPUs as the plan shows them: their type and count, and what the location gives them."""

    #: the profile the pool takes (``profiles.effective``): its gpu.profile, ``full`` (whole cards) when it names
    #: none, a profile id, or ``any``
    profile: str
    #: GB of GPU memory each of its vGPUs has (at least, with ``any``), from the profiles it takes at the location;
    #: None when a profile's is not known
    memory: int | None


class PoolView(PoolShown):
    """One pool of the spec (the control plane included) as the plan shows it (``spec.pool.PoolShown``), with the
    price of every machine the spec asks for (``hourly``: 0 for a pool at zero)."""

    #: GiB of each machine's boot disk: its ``diskSize``, else its image's ``boot_disk_size`` (None: not known)
    disk_size: int | None
    gpu: GpuView | None
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


def price(world: ClusterWorld, before: billing.Amounts, added: billing.Amounts, removed: billing.Amounts) -> Price:
    """The price per hour of what the cluster holds ``before`` the plan, of what it adds and removes, and of what it
    holds after, whole and by unit, at the location's prices (``billing.rates``)."""
    listed = world.get("price")
    rates = billing.rates(listed)
    after = billing.plus(before, added)
    after = billing.plus(after, removed, -1)
    units: dict[str, UnitPrice] = {
        unit: {
            "size": billing.UNIT_SIZES[unit],
            "per_hour": None if rates[unit] is None else round(rates[unit] or 0.0, 6),
            "before": _shown(before[unit]),
            "added": _shown(added[unit]),
            "removed": _shown(removed[unit]),
            "after": _shown(after[unit]),
            "hourly_after": billing.unit_cost(after[unit], rates[unit]),
        }
        for unit in billing.UNITS_PRICED
    }
    return {
        "currency": billing.currency_of(listed),
        "per_vgpu_hour": billing.times(1, rates["vgu"]),
        "vgpus_before": int(before["vgu"] or 0),
        "vgpus_after": int(after["vgu"] or 0),
        "hourly_before": billing.cost(before, rates),
        "hourly_added": billing.cost(added, rates),
        "hourly_removed": billing.cost(removed, rates),
        "hourly_after": billing.cost(after, rates),
        "units": units,
    }


def claimed(p: Price) -> Price:
    """``p`` of a plan made again after this run created the cloudspace: its public address is one the run adds,
    not one the cluster held before, as the run's first plan (and its check mode) said."""
    line = p["units"]["piu"]
    if not line["before"]:
        return p
    moved = dict(line, before=0.0, added=(line["added"] or 0.0) + (line["before"] or 0.0))
    cost = billing.unit_cost(line["before"], line["per_hour"])
    return {
        **p,
        "hourly_before": None if p["hourly_before"] is None or cost is None else round(p["hourly_before"] - cost, 4),
        "hourly_added": None if p["hourly_added"] is None or cost is None else round(p["hourly_added"] + cost, 4),
        "units": {**p["units"], "piu": moved},  # type: ignore[dict-item]
    }


def _shown(amount: float | None) -> float | None:
    return None if amount is None else round(amount, 4)


def vm_amounts(vm: VM) -> billing.Amounts:
    """What a VM of the listing holds of each unit but vGPUs (those are its reservations): its vCPUs, memory and
    boot disk (``storage``, GiB)."""
    return billing.machine_amounts(vm.get("vcpus"), vm.get("memory"), vm.get("storage"))


def held(vms: Iterable[VM], cloudspaces: int, vgpus: int) -> billing.Amounts:
    """What ``vms``, ``cloudspaces`` (each its public address) and ``vgpus`` reservations hold of each unit."""
    total = billing.nothing()
    for vm in vms:
        total = billing.plus(total, vm_amounts(vm))
    return billing.plus(total, {"piu": float(cloudspaces), "vgu": float(vgpus)})


def pool_disk(pool: Pool, images: Iterable[Mapping[str, Any]] | None) -> int | None:
    """GiB of the boot disk a machine of ``pool`` gets: its ``disk_size``, else its image's ``boot_disk_size``
    (None when neither is known)."""
    if pool.disk_size:
        return pool.disk_size
    for image in images or []:
        if isinstance(image, Mapping) and image.get("image_id") == pool.image:
            size = image.get("boot_disk_size")
            return size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None
    return None


def pool_amounts(pool: Pool, images: Iterable[Mapping[str, Any]] | None, vgpus: bool = True) -> billing.Amounts:
    """What one machine of ``pool`` holds of each unit once created: its size, boot disk and (``vgpus``) vGPUs."""
    count = pool.gpu.count if pool.gpu and vgpus else 0
    return billing.machine_amounts(pool.vcpus, pool.memory, pool_disk(pool, images), count)


def pool_views(
    spec: ClusterSpec,
    rates: Mapping[str, float | None],
    images: list[Any] | None,
    gpu_memory: Mapping[str, int | None] | None = None,
) -> tuple[PoolView, ...]:
    """Every pool of the spec with its price at the hourly prices ``rates`` (``billing.rates``; None: not known,
    never free): one machine whole, and all of the pool's machines; a GPU pool's profile and the GPU memory of each
    of its vGPUs (``gpu_memory``, by pool)."""
    out: list[PoolView] = []
    for p in spec.pools:
        one = pool_amounts(p, images)
        out.append(
            {
                "name": p.name,
                "replicas": len(p.names),
                "vcpus": p.vcpus,
                "memory": p.memory,
                "disk_size": pool_disk(p, images),
                "gpu": {
                    "type": p.gpu.type,
                    "count": p.gpu.count,
                    "profile": gpu_profiles.effective(p.gpu.profile),
                    "memory": (gpu_memory or {}).get(p.name),
                }
                if p.gpu
                else None,
                "per_machine_hourly": billing.cost(one, rates),
                "hourly": billing.cost(billing.scaled(one, len(p.names)), rates),
            }
        )
    return tuple(out)


def noted_pools(
    spec: ClusterSpec, images: Iterable[Mapping[str, Any]] | None = None
) -> list[ownership_notes.NotedPool]:
    """The spec's pools as the pools note records them (``clusterspec.record``), each with the boot disk its
    machines are priced at (:func:`pool_disk`, from ``images``, when the spec gives none)."""
    out = []
    for pool, p in zip(spec.pools, clusterspec.record(spec).pools, strict=True):
        disk = pool_disk(pool, images)
        low, high = ownership_notes.DISK
        out.append(p._replace(disk_size=disk) if disk is not None and low <= disk <= high else p)
    return out


def pools_note_plan(
    spec: ClusterSpec, space: ClusterSpace | None, images: Iterable[Mapping[str, Any]] | None = None
) -> PoolsNotePlan:
    """What becomes of the cluster's pools note on ``space`` (None: the cloudspace is created by this run): created
    when it has none, updated in place (the oldest) when it says other pools or does not parse, the others of the
    cluster deleted; nothing written when it says the spec's pools already."""
    record = clusterspec.record(spec)
    _title, content = ownership_notes.pools_note(spec.name, noted_pools(spec, images), record.boot)
    found = space["pools_notes"] if space is not None else []
    if not found:
        return {"write": "create", "note_id": None, "content": content, "remove": []}
    first, rest = found[0], [n["id"] for n in found[1:]]
    write = None if first["content"] == content else "update"
    return {"write": write, "note_id": first["id"], "content": content, "remove": rest}


def _units_text(p: Price, units: Iterable[str] | None = None) -> str:
    """The units of a price a message names: ``vcu 20 vCPU: 0.3288, mu 72 GiB of memory: 0.3452`` (those held after,
    or ``units``)."""
    shown = []
    for unit, line in p["units"].items():
        if units is None and not line["after"]:
            continue
        if units is not None and unit not in units:
            continue
        cost = line["hourly_after"]
        shown.append(
            "%s %s: %s"
            % (unit, billing.amount_text(unit, line["after"]), billing.UNKNOWN if cost is None else "%.4f" % cost)
        )
    return ", ".join(shown) or "nothing"


def _check_cap(p: Price, max_hourly_cost: float | None, world: ClusterWorld, location: str) -> None:
    """Refuse a plan whose whole price per hour once applied is over ``max_hourly_cost``, or is not known."""
    if max_hourly_cost is None:
        return
    if p["hourly_after"] is None:
        rates = {u: line["per_hour"] for u, line in p["units"].items()}
        after = {u: line["after"] for u, line in p["units"].items()}
        missing = billing.unpriced(after, rates)
        raise InputError(
            "max_hourly_cost %s cannot be checked: %s for location %r, so the price of what the plan holds once "
            "applied (%s) is not known; nothing was changed"
            % (max_hourly_cost, billing.price_problem(world.get("price"), missing), location, _units_text(p, missing))
        )
    if p["hourly_after"] > max_hourly_cost:
        raise InputError(
            "the plan costs %.4f %s per hour once applied (%s), over max_hourly_cost %s; nothing was changed"
            % (p["hourly_after"], p["currency"] or "", _units_text(p), max_hourly_cost)
        )


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
    _check_cap(p, max_hourly_cost, world, location)
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
