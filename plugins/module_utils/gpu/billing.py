# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Billing: the platform's price list read per unit, what a machine holds of each unit, and the vGPUs' consumption
report turned into seconds and cost (plain Python, no Ansible).

The price list (``getCustomerLocationPricing``) gives a monthly price per resource unit, and an hour is 1/730 of a
month.  A price that is missing, null, negative, not finite or not a number is not known: never taken as free.  The
units a machine or a cluster holds are :data:`UNITS_PRICED`, each of the size :data:`UNIT_SIZES` says (the spec
names the units, not their sizes: docs/gpus.md says what is assumed).  A vGPU bills from reservation until permanent
deletion; the consumption report gives ``vgu`` in unit-hours.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import Beside
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

#: ``{vgpu_id: (vgpu_seconds, cost)}``; the cost is None when the location's price is not known
Costs = dict[str, tuple[float, Optional[float]]]  # noqa: UP045 (a runtime alias, which Python 3.9 evaluates)

HOURS_PER_MONTH = 730.0
SECONDS_PER_VGU = 3600.0


#: What a price that is not known shows as, wherever a price is written for a person.
UNKNOWN = "unknown"


#: What one of each unit is that a machine or a cluster holds, by the unit's key in the price list.  The spec says
#: only "Monthly price for resource unit of type VCU" (and so on); the sizes are the collection's reading of it.
UNIT_SIZES: dict[str, str] = {
    "vcu": "vCPU",
    "mu": "GiB of memory",
    "su": "GiB of boot disk",
    "fsu": "GiB of flash storage",
    "piu": "public IP address",
    "vgu": "vGPU",
}
#: The units a price counts, in the order it shows them.
UNITS_PRICED: tuple[str, ...] = tuple(UNIT_SIZES)
#: Every unit of the spec's price list (``ResourcePricesStruct``) named: the counted ones, and those that bill by use
#: or by what the collection never makes, which no plan counts.
UNIT_NAMES: dict[str, str] = {
    **UNIT_SIZES,
    "ou": "object storage unit (by use)",
    "tu": "transaction unit (disk IOPS, by use)",
    "nu": "network transfer unit (by use)",
    "wu": "Windows licence (the collection boots Linux)",
}
#: MiB in one ``mu`` (a GiB of memory): a machine's memory is given in MiB.
MIB_PER_MU = 1024

#: How much of each unit something holds (``{unit: amount}``, the units of :data:`UNITS_PRICED`); None where the
#: amount is not known (a disk whose size was not read).
Amounts = dict[str, Optional[float]]  # noqa: UP045 (a runtime alias, which Python 3.9 evaluates)


def _monthly(price: Any, unit: str = "vgu") -> Any:
    """A unit's price of a ``getCustomerLocationPricing`` answer as the platform gave it (None when it gave none)."""
    resources = price.get("resources") if isinstance(price, dict) else None
    return resources.get(unit) if isinstance(resources, dict) else None


def known_number(value: Any) -> float | None:
    """``value`` as a price when it is a finite number of 0 or more, else None (null, negative, NaN, infinite, a
    string, a list, a boolean: never taken as free)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        return None
    return float(value)


def unit_per_hour(price: Any, unit: str) -> float | None:
    """The hourly price of one ``unit`` from a ``getCustomerLocationPricing`` answer (its monthly price / 730), or
    None when the answer has no price of it that is a finite number of 0 or more."""
    monthly = known_number(_monthly(price, unit))
    return None if monthly is None else monthly / HOURS_PER_MONTH


def price_per_hour(price: Any) -> float | None:
    """The hourly price of one vGPU (``vgu``) from a ``getCustomerLocationPricing`` answer, or None when it is not
    known (:func:`unit_per_hour`)."""
    return unit_per_hour(price, "vgu")


def rates(price: Any) -> dict[str, float | None]:
    """The hourly price of one of each unit of :data:`UNITS_PRICED` (None: not known)."""
    return {unit: unit_per_hour(price, unit) for unit in UNITS_PRICED}


def unit_problem(price: Any, unit: str) -> str | None:
    """Why a unit's price is not known (naming what the platform answered, shortened), or None when it is."""
    if unit_per_hour(price, unit) is not None:
        return None
    monthly = _monthly(price, unit)
    return "no %s price" % unit if monthly is None else "%s price %s" % (unit, json_text(monthly))


def price_problem(price: Any, units: Iterable[str] = ("vgu",)) -> str | None:
    """Why the answer's price of ``units`` is not known (each unit whose price is not, naming what the platform
    answered), or None when every one is."""
    problems = [p for p in (unit_problem(price, u) for u in units) if p is not None]
    if not problems:
        return None
    return "the platform's price list has %s (not a finite number of 0 or more)" % ", ".join(problems)


def machine_amounts(vcpus: Any, memory: Any, disk: Any, vgpus: int = 0) -> Amounts:
    """What one machine holds of each unit: its vCPUs (``vcu``), its memory in MiB as GiB (``mu``), its boot disk in
    GiB (``su``; None when its size is not known) and its vGPUs (``vgu``); no flash storage and no public address
    of its own (a machine's external NICs come and go with its pods)."""
    return {
        "vcu": known_number(vcpus),
        "mu": None if known_number(memory) is None else float(memory) / MIB_PER_MU,
        "su": known_number(disk),
        "fsu": 0.0,
        "piu": 0.0,
        "vgu": float(vgpus),
    }


def nothing() -> Amounts:
    """No amount of any unit."""
    return dict.fromkeys(UNITS_PRICED, 0.0)


def plus(a: Mapping[str, float | None], b: Mapping[str, float | None], sign: int = 1) -> Amounts:
    """``a`` plus (``sign`` -1: minus) ``b``, per unit; None where either's amount is not known."""
    out: Amounts = {}
    for unit in UNITS_PRICED:
        x, y = a.get(unit, 0.0), b.get(unit, 0.0)
        out[unit] = None if x is None or y is None else x + sign * y
    return out


def scaled(amounts: Mapping[str, float | None], factor: float) -> Amounts:
    """``amounts`` times ``factor`` (a pool's machines: one machine's times their count; 0 of them hold nothing)."""
    out: Amounts = {}
    for unit in UNITS_PRICED:
        x = amounts.get(unit, 0.0)
        out[unit] = 0.0 if factor == 0 else None if x is None else x * factor
    return out


def unit_cost(amount: float | None, per_hour: float | None, digits: int = 4) -> float | None:
    """What ``amount`` of a unit costs per hour at ``per_hour``, rounded: 0 for none of it (whatever its price) or
    at a price of 0; None when the price is not known, or the amount is not and the price is not 0."""
    if amount == 0 or per_hour == 0:
        return 0.0
    if amount is None or per_hour is None:
        return None
    return round(amount * per_hour, digits)


def cost(amounts: Mapping[str, float | None], per_hour: Mapping[str, float | None], digits: int = 4) -> float | None:
    """What ``amounts`` cost per hour together at the hourly prices ``per_hour`` (:func:`rates`), rounded; None
    once one unit's cost is not known (:func:`unit_cost`)."""
    total = 0.0
    for unit in UNITS_PRICED:
        one = unit_cost(amounts.get(unit, 0.0), per_hour.get(unit), digits + 4)
        if one is None:
            return None
        total += one
    return round(total, digits)


def unpriced(amounts: Mapping[str, float | None], per_hour: Mapping[str, float | None]) -> list[str]:
    """The units of ``amounts`` whose cost is not known (:func:`unit_cost`), in :data:`UNITS_PRICED`'s order."""
    return [u for u in UNITS_PRICED if unit_cost(amounts.get(u, 0.0), per_hour.get(u)) is None]


def amount_text(unit: str, amount: float | None) -> str:
    """An amount of a unit for a person: ``20 vCPU``, ``72 GiB of memory``, ``an unknown number of GiB of boot
    disk``."""
    if amount is None:
        return "an unknown number of %s" % UNIT_SIZES.get(unit, unit)
    return "%s %s" % (("%.4f" % amount).rstrip("0").rstrip("."), UNIT_SIZES.get(unit, unit))


def json_text(value: Any, limit: int = 80) -> str:
    """``value`` as JSON text, at most ``limit`` characters (what is shown of an answer in a message)."""
    try:
        text = json.dumps(value, default=str, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(type(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def currency_of(price: Any) -> str | None:
    """The price list's currency, when it is a short string, scrubbed (``scrub``: it is shown wherever a price is,
    so a control character in it is escaped here, once, for every place)."""
    currency = price.get("currency") if isinstance(price, dict) else None
    return scrub(currency) if isinstance(currency, str) and 0 < len(currency) <= 16 else None


def times(count: float, per_hour: float | None, digits: int = 4) -> float | None:
    """``count`` times an hourly price, rounded; None when the price is not known (and ``count`` is not 0)."""
    if per_hour is None:
        return 0.0 if count == 0 else None
    return round(count * per_hour, digits)


def shown(amount: float | None, currency: str | None) -> str:
    """A price for a person: ``2.1918 EUR``, or ``unknown``."""
    if amount is None:
        return UNKNOWN
    return ("%s %s" % (amount, currency)) if currency else str(amount)


class Billed(NamedTuple):
    """The least of a reservation that its cost is computed from, kept per reservation by a scan (a tuple: a scan of
    100,000 reservations keeps 100,000 of them): its id, the VM it is attached to, and, for a name that decodes,
    its cluster (as the name has it) and when it was made."""

    vgpu_id: str
    vm_id: int | None
    cluster: str | None
    created: int | None


class Figures(NamedTuple):
    """What the costs need of a consumption report and a price list, kept instead of the report (which carries
    every reservation's whole consumption): ``vgu`` unit-hours per detached reservation and per VM, and the price."""

    unassigned: dict[str, float]
    vms: dict[int, float]
    price: dict[str, Any]


#: The units of a consumption breakdown (``VmConsumptionModelVmConsumption`` and its kin).
UNITS = frozenset(("su", "tu", "nu", "vcu", "mu", "piu", "wu", "fsu", "vgu"))
_UNASSIGNED = frozenset(("vgpu_id", "consumption"))


def compact(obj: dict[str, Any]) -> Any:
    """``json.loads``'s object hook for a consumption report that only :func:`figures` reads: a breakdown (an object
    of units only) is parsed as its ``vgu`` alone, and an unassigned vGPU's entry as ``(vgpu_id, vgu)``: a report
    over 100,000 reservations takes a third of the memory (each parsed object is let go as soon as it is read)."""
    if obj.keys() <= UNITS:
        return obj.get("vgu")
    if obj.keys() == _UNASSIGNED:
        return (obj["vgpu_id"], obj["consumption"])
    return obj


def _vgu(consumption: Any) -> float:
    """The ``vgu`` of a breakdown, parsed whole (an object) or by :func:`compact` (its value)."""
    value = consumption.get("vgu") if isinstance(consumption, dict) else consumption
    return float(value or 0.0)


def figures(report: dict[str, Any] | None, price: dict[str, Any] | None) -> Figures:
    """The :class:`Figures` of a consumption report (parsed whole, or through :func:`compact`) and a price list."""
    report = report or {}
    unassigned: dict[str, float] = {}
    for u in report.get("unassigned_vgpus") or []:
        vgpu_id, consumption = u if isinstance(u, tuple) else (u["vgpu_id"], u.get("consumption"))
        unassigned[vgpu_id] = _vgu(consumption)
    vms: dict[int, float] = {}
    for space in report.get("cloudspaces") or []:
        for vm in space.get("vms") or []:
            vms[vm["vm_id"]] = _vgu(vm.get("consumption"))
    return Figures(unassigned, vms, price if isinstance(price, dict) else {})


def fetch(client: WhiteskyClient, location: str, start: float, now: float) -> Figures:
    """The consumption report from ``start`` and the price list, read at once, as :class:`Figures` (the report
    itself is let go as soon as it is read)."""
    with Beside(1) as beside:  # independent reads: one round trip
        price_f = beside.start(client.prices, location)
        report = client.consumption(location, int(start) - 1, int(now) + 1, object_hook=compact)
        return figures(report, price_f.result())


def detached_cost(figures: Figures, vgpu_id: str) -> tuple[float, float | None]:
    """``(vgpu_seconds, cost)`` of a reservation attached to no VM, from the report's figures."""
    vgu = figures.unassigned.get(vgpu_id, 0.0)
    return round(vgu * SECONDS_PER_VGU, 1), times(vgu, price_per_hour(figures.price))


class Streamed:
    """The costs of the detached reservations of a listing, added up as it streams once the report it started
    (``start``, ``report``: read beside the listing) is in, so that a scan of 100,000 orphans keeps no record of
    each: :meth:`keep` says whether a record must still be kept for :func:`costs` (attached, made before the
    report's start, or the report not in yet)."""

    def __init__(self, start: float, report: Future[Figures]) -> None:
        self.start = start
        self.report = report
        self.total: float | None = 0.0
        self.by_cluster: dict[str, float | None] = {}
        self.count = 0

    def keep(self, record: Billed) -> bool:
        if record.vm_id is not None or record.created is None or record.created < self.start or not self.report.done():
            return True
        _seconds, cost = detached_cost(self.report.result(), record.vgpu_id)
        self.total = add(self.total, cost)
        if record.cluster is not None:
            self.by_cluster[record.cluster] = add(self.by_cluster.get(record.cluster, 0.0), cost)
        self.count += 1
        return False


def add(total: float | None, cost: float | None) -> float | None:
    """A sum of costs, rounded; None once one of them is not known."""
    return None if total is None or cost is None else round(total + cost, 4)


def oldest(items: Sequence[Billed], now: float) -> float:
    """When the oldest of the (owned) reservations was made; a day before ``now`` when none is owned."""
    return min((i.created for i in items if i.created is not None), default=int(now) - 86400)


def costs(
    client: WhiteskyClient,
    location: str,
    items: Sequence[Billed],
    now: float,
    fetched: tuple[float, Figures] | None = None,
) -> tuple[Costs, str | None, float | None]:
    """``{vgpu_id: (vgpu_seconds, cost)}`` from the platform's consumption and prices.

    A vGPU's own figure comes from ``unassigned_vgpus`` while it was detached;
    while attached it is a share of its VM's ``vgu`` (split evenly between the
    VM's current vGPUs).  ``fetched`` is ``(start, figures)`` read earlier; it is used when its report
    starts no later than the oldest of ``items``, else both are read again.
    """
    if not items:
        return {}, None, 0.0
    start = oldest(items, now)
    got = fetched[1] if fetched is not None and fetched[0] <= start else fetch(client, location, start, now)
    per_hour = price_per_hour(got.price)
    sharing: dict[int, int] = {}
    for item in items:
        if item.vm_id is not None:
            sharing[item.vm_id] = sharing.get(item.vm_id, 0) + 1
    out: Costs = {}
    for item in items:
        vgu = got.unassigned.get(item.vgpu_id, 0.0)
        if item.vm_id is not None:
            vgu += got.vms.get(item.vm_id, 0.0) / sharing[item.vm_id]
        out[item.vgpu_id] = (round(vgu * SECONDS_PER_VGU, 1), times(vgu, per_hour))
    return out, currency_of(got.price), per_hour


def billing(client: WhiteskyClient, *, location: str, since: float | None = None) -> dict[str, Any]:
    """Core of ``vgpu_billing_info``: vGPU consumption and its cost over a window (``since`` a time, or the last
    day), from the platform."""
    end = int(time.time()) + 1
    start = int(since) if since is not None else end - 86400
    if start > end:
        raise InputError("since %r is in the future" % since)
    report = client.consumption(location, start, end) or {}
    vgu = float((report.get("consumption") or {}).get("vgu") or 0.0)
    price = client.prices(location) or {}
    per_hour = price_per_hour(price)
    return {
        "start": start,
        "end": end,
        "vgpu_seconds": round(vgu * SECONDS_PER_VGU, 1),
        "cost": times(vgu, per_hour),
        "currency": currency_of(price),
        "unassigned_vgpus": len(report.get("unassigned_vgpus") or []),
    }
