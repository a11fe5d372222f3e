# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vGPU billing: the platform's consumption report and prices, turned into seconds and cost (plain Python, no
Ansible).

A vGPU bills from reservation until permanent deletion.  The consumption
report gives ``vgu`` in unit-hours; the price list gives ``vgu`` per month,
and an hour is 1/730 of a month.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import Beside

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

#: ``{vgpu_id: (vgpu_seconds, cost)}``; the cost is None when the location's price is not known
Costs = dict[str, tuple[float, Optional[float]]]  # noqa: UP045 (a runtime alias, which Python 3.9 evaluates)

HOURS_PER_MONTH = 730.0
SECONDS_PER_VGU = 3600.0


#: What a price that is not known shows as, wherever a price is written for a person.
UNKNOWN = "unknown"


def _monthly(price: Any) -> Any:
    """The ``vgu`` of a ``getCustomerLocationPricing`` answer as the platform gave it (None when it gave none)."""
    resources = price.get("resources") if isinstance(price, dict) else None
    return resources.get("vgu") if isinstance(resources, dict) else None


def price_per_hour(price: Any) -> float | None:
    """The hourly price of one vGPU from a ``getCustomerLocationPricing`` answer, or None when the answer has no
    price that is a finite number of 0 or more (missing, null, negative, a string, a list: never taken as free)."""
    monthly = _monthly(price)
    if isinstance(monthly, bool) or not isinstance(monthly, (int, float)) or not 0 <= monthly < math.inf:
        return None
    return float(monthly) / HOURS_PER_MONTH


def price_problem(price: Any) -> str | None:
    """Why the answer's price is not known (naming what the platform answered, shortened), or None when it is."""
    if price_per_hour(price) is not None:
        return None
    monthly = _monthly(price)
    shown = "no vgu price" if monthly is None else "vgu price %s" % json_text(monthly)
    return "the platform's price list has %s (not a finite number of 0 or more)" % shown


def json_text(value: Any, limit: int = 80) -> str:
    """``value`` as JSON text, at most ``limit`` characters (what is shown of an answer in a message)."""
    try:
        text = json.dumps(value, default=str, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(type(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def currency_of(price: Any) -> str | None:
    """The price list's currency, when it is a short string."""
    currency = price.get("currency") if isinstance(price, dict) else None
    return currency if isinstance(currency, str) and 0 < len(currency) <= 16 else None


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
