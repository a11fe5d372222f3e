# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a cluster's plan costs (pure: no platform call): the price per hour of what the cluster holds before and
after it, of what it adds and removes, whole and by unit of the location's price list (:func:`price`, a
:class:`Price`), each pool of the spec with the price of one machine and of all of them (:func:`pool_views`, a
:class:`PoolView`), and the refusal of a plan over the budget, or whose price is not known (:func:`check_cap`).
``cluster.plan`` and ``cluster.teardown`` price their plans here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import profiles as gpu_profiles
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import PoolGpu, PoolShown

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.world import ClusterWorld
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.typed import ClusterSpec
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import VM


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


def check_cap(p: Price, max_hourly_cost: float | None, world: ClusterWorld, location: str) -> None:
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
