# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The orphan events of a location (plain Python, no Ansible): which owned reservations escaped (orphans), and
the events a reading of them calls for against what was already delivered.

:func:`read` reads a location (its reservations, its VMs, the orphans' costs); :func:`plan` says what that reading
means against a location's :class:`Place` (the orphans reported so far, whether the cost threshold was crossed):
the :class:`Step` of each event to deliver, the event itself and what delivering it changes; :func:`settle` brings
the place up to date once they are delivered.  The event source (``faces/events.py``, its cursor
``faces/cursor.py``) delivers them; docs/gpus.md, "Events", is the user's description:

- ``vgpu.orphaned``: once per escape of a reservation: it is owned (its name decodes), no VM of its machine exists
  in the location, and it is at least ``grace_period`` old (its age is read from its name, as ``vgpu_reclaim``
  reads it: the reservations ``gpu_orphans -e reclaim=true`` would release).
- ``vgpu.reclaimed``: once, for a reservation whose ``vgpu.orphaned`` was delivered, when a later reading no longer
  shows it as an orphan: ``reason: released`` when it is no longer listed at all (deleted permanently, the one
  state in which a vGPU stops billing: by ``gpu_orphans``, ``vgpu_reclaim``, by hand); ``reason: owner_back`` when
  it is still listed but a VM of its machine's name exists again.  Detaching it, moving it to the recycle bin
  (soft delete) or restoring it from there changes nothing: it still bills, and it is still an orphan.
- ``cost.threshold``: when the money at risk in a location rises above ``cost_threshold``: the figure is the
  location's escaped orphans (those ``vgpu.orphaned`` reports, soft-deleted ones included) times the hourly price
  of one vGPU there (the price list's monthly ``vgu`` / 730).  Once per crossing: it is re-armed when a reading
  shows the figure at or below the threshold.

Everything the platform says is hostile: a string it gives is passed on in an event only when it is a plain token
(:func:`plain`: letters, digits, space, ``. _ : @ + -``; so never a Jinja template, which a playbook's extra vars
would render) and is ``null`` otherwise, named in the event's ``withheld``; a number only when it is finite.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.billing import Billed, Costs, add, costs, times
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.orphans import (
    OrphanCheck,
    machines_in_location,
    past_grace,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import attached_to, listing

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

ORPHANED = "vgpu.orphaned"
RECLAIMED = "vgpu.reclaimed"
THRESHOLD = "cost.threshold"
#: How many reservations a ``cost.threshold`` names (the oldest); its counts cover all of them.
THRESHOLD_NAMES = 20

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._:@+-]{0,254}")


def plain(value: object) -> str | None:
    """``value`` when it is a plain token (at most 255 letters, digits, spaces and ``. _ : @ + -``, starting with a
    letter or digit), else None: what the platform says goes into an event only as such a token."""
    return value if isinstance(value, str) and _PLAIN.fullmatch(value) else None


def finite(value: object, digits: int = 4) -> float | None:
    """``value`` rounded, when it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return round(float(value), digits)


# -- a reading of a location ------------------------------------------------------------------------------------


class Found(NamedTuple):
    """An owned reservation as a reading keeps it."""

    vgpu_id: str
    vgpu_name: str
    owner: naming.Owner
    status: str
    vm_id: int | None
    vm_name: str | None


class Reading(NamedTuple):
    """What one poll read of a location: the ids of its owned reservations (soft-deleted ones included), its
    orphans (owned, no VM of their machine in the location; of any age), their costs, one vGPU's hourly price and
    the currency."""

    location: str
    now: float
    listed: frozenset[str]
    orphans: tuple[Found, ...]
    costs: Costs
    per_hour: float | None  # None: the location's price is not known
    currency: str | None

    def escaped(self, grace_period: float) -> list[Found]:
        """The orphans at least ``grace_period`` old, the oldest first."""
        out = [o for o in self.orphans if past_grace(o.owner, grace_period, self.now)]
        out.sort(key=lambda o: (o.owner.created, o.vgpu_name))
        return out

    def at_risk(self, grace_period: float) -> float | None:
        """The money at risk per hour: the escaped orphans times one vGPU's hourly price (None: not known)."""
        return times(len(self.escaped(grace_period)), self.per_hour)


def read(client: WhiteskyClient, location: str, now: float | None = None) -> Reading:
    """Read a location: its reservations (soft-deleted included), then its VMs, then the orphans' costs (blocking).

    The reservations are listed before the VMs, as ``vgpu_reclaim`` lists them: a reservation needs its VM to
    exist, so one made while this reads is never taken for an orphan."""
    now = time.time() if now is None else now
    owned: list[Found] = []
    for item in listing(client, location):
        owner = item["owner"]
        if owner is None:
            continue  # not ours: never reported
        vm = item.get("virtual_machine")
        owned.append(
            Found(item["vgpu_id"], item["vgpu_name"], owner, item["status"], attached_to(item), vm and vm["name"])
        )
    is_orphan = OrphanCheck(machines_in_location(client, location))
    orphans = tuple(o for o in owned if is_orphan(o.owner))
    billed = [Billed(o.vgpu_id, o.vm_id, o.owner.cluster, o.owner.created) for o in orphans]
    figures, currency, per_hour = costs(client, location, billed, now)
    return Reading(location, now, frozenset(o.vgpu_id for o in owned), orphans, figures, per_hour, currency)


# -- what was delivered, and what a reading calls for ------------------------------------------------------------


class Reported(NamedTuple):
    """An orphan whose ``vgpu.orphaned`` was delivered (until its ``vgpu.reclaimed`` is): what the reclaimed event
    says of it.  Immutable: the cursor keeps each one's JSON text until it changes."""

    vgpu_name: str
    seq: int
    orphaned_at: float
    cost_per_hour: float | None  # None: the price was not known
    currency: str | None
    cost: float | None
    last_seen: float


@dataclasses.dataclass
class Place:
    """A location's part of the cursor: its reported orphans by vgpu_id, and whether its ``cost.threshold`` was
    delivered and is not re-armed yet."""

    reported: dict[str, Reported] = dataclasses.field(default_factory=dict)
    above: bool = False


class Step(NamedTuple):
    """One event to deliver (``seq`` is set when it is), and what the cursor records once it is delivered: the
    reservation it reports (``vgpu.orphaned``) or lets go (``vgpu.reclaimed``), or the threshold crossed."""

    event: dict[str, Any]
    report: tuple[str, Reported] | None = None
    drop: str | None = None
    above: bool = False


#: The keys of each event as the source delivers it (its ``seq`` included): what a pending event must have.
EVENT_KEYS: dict[str, frozenset[str]] = {
    ORPHANED: frozenset(
        [
            "type",
            "location",
            "vgpu_name",
            "owner",
            "age",
            "grace_period",
            "in_recycle_bin",
            "vm_id",
            "vgpu_seconds",
            "cost",
            "cost_per_hour",
            "detected_at",
            "withheld",
            "vgpu_id",
            "status",
            "vm_name",
            "currency",
            "seq",
        ]
    ),
    RECLAIMED: frozenset(
        [
            "type",
            "location",
            "vgpu_name",
            "owner",
            "reason",
            "orphaned_seq",
            "orphaned_at",
            "last_seen",
            "cost",
            "cost_per_hour",
            "saved_per_hour",
            "detected_at",
            "withheld",
            "vgpu_id",
            "currency",
            "seq",
        ]
    ),
    THRESHOLD: frozenset(
        [
            "type",
            "location",
            "cost_per_hour",
            "threshold",
            "orphans",
            "cost",
            "vgpu_names",
            "grace_period",
            "detected_at",
            "withheld",
            "currency",
            "seq",
        ]
    ),
}


def _owner(owner: naming.Owner) -> dict[str, Any]:
    return {"cluster": owner.cluster, "machine": owner.machine, "slot": owner.slot, "created": owner.created}


def _withheld(event: dict[str, Any], raw: Mapping[str, object]) -> dict[str, Any]:
    """``event`` with each of ``raw``'s platform strings as a plain token, or None and named in ``withheld``."""
    event["withheld"] = []
    for key, value in raw.items():
        event[key] = plain(value)
        if value is not None and event[key] is None:
            event["withheld"].append(key)
    return event


def orphaned_event(found: Found, reading: Reading, grace_period: float) -> dict[str, Any]:
    seconds, cost = reading.costs.get(found.vgpu_id, (0.0, times(0, reading.per_hour)))
    event: dict[str, Any] = {
        "type": ORPHANED,
        "location": reading.location,
        "vgpu_name": found.vgpu_name,
        "owner": _owner(found.owner),
        "age": int(reading.now - found.owner.created),
        "grace_period": grace_period,
        "in_recycle_bin": found.status == "DELETED",
        "vm_id": found.vm_id,
        "vgpu_seconds": finite(seconds, 1),
        "cost": finite(cost),
        "cost_per_hour": finite(reading.per_hour),
        "detected_at": round(reading.now, 3),
    }
    raw = {"vgpu_id": found.vgpu_id, "status": found.status, "vm_name": found.vm_name, "currency": reading.currency}
    return _withheld(event, raw)


def reclaimed_event(vgpu_id: str, reported: Reported, reason: str, reading: Reading) -> dict[str, Any]:
    owner = naming.decode(reported.vgpu_name)
    event: dict[str, Any] = {
        "type": RECLAIMED,
        "location": reading.location,
        "vgpu_name": reported.vgpu_name,
        "owner": _owner(owner) if owner is not None else None,
        "reason": reason,
        "orphaned_seq": reported.seq,
        "orphaned_at": reported.orphaned_at,
        "last_seen": reported.last_seen,
        "cost": finite(reported.cost),
        "cost_per_hour": finite(reported.cost_per_hour),
        "saved_per_hour": finite(reported.cost_per_hour) if reason == "released" else 0.0,
        "detected_at": round(reading.now, 3),
    }
    return _withheld(event, {"vgpu_id": vgpu_id, "currency": reported.currency})


def _sum_costs(costs: Iterable[float | None]) -> float | None:
    """The sum of costs; None once one of them is not known."""
    total: float | None = 0.0
    for cost in costs:
        total = add(total, cost)
    return total


def threshold_event(reading: Reading, grace_period: float, threshold: float) -> dict[str, Any]:
    escaped = reading.escaped(grace_period)
    event: dict[str, Any] = {
        "type": THRESHOLD,
        "location": reading.location,
        "cost_per_hour": reading.at_risk(grace_period),
        "threshold": threshold,
        "orphans": len(escaped),
        "cost": _sum_costs(reading.costs.get(o.vgpu_id, (0.0, 0.0))[1] for o in escaped),
        "vgpu_names": [o.vgpu_name for o in escaped[:THRESHOLD_NAMES]],
        "grace_period": grace_period,
        "detected_at": round(reading.now, 3),
    }
    return _withheld(event, {"currency": reading.currency})


def plan(place: Place, reading: Reading, grace_period: float, cost_threshold: float | None) -> list[Step]:
    """The events a reading calls for, in order, against a location's :class:`Place` (pure): a ``vgpu.reclaimed``
    for each reported orphan the reading no longer shows as one (in the order they were reported), a
    ``vgpu.orphaned`` for each escaped orphan not reported yet (the oldest first), then a ``cost.threshold`` when
    the money at risk is above ``cost_threshold`` and the threshold is armed."""
    current = {o.vgpu_id for o in reading.orphans}
    steps: list[Step] = []
    for vgpu_id, reported in sorted(place.reported.items(), key=lambda item: item[1].seq):
        if vgpu_id not in current:
            reason = "owner_back" if vgpu_id in reading.listed else "released"
            steps.append(Step(reclaimed_event(vgpu_id, reported, reason, reading), drop=vgpu_id))
    seen: set[str] = set()  # a listing that names a reservation twice (a hostile one, or pages that raced) says it once
    for found in reading.escaped(grace_period):
        if found.vgpu_id in place.reported or found.vgpu_id in seen:
            continue
        seen.add(found.vgpu_id)
        cost = reading.costs.get(found.vgpu_id, (0.0, 0.0))[1]
        reported = Reported(
            vgpu_name=found.vgpu_name,
            seq=0,  # the event's, once it is delivered
            orphaned_at=round(reading.now, 3),
            cost_per_hour=finite(reading.per_hour),
            currency=plain(reading.currency),
            cost=finite(cost),
            last_seen=round(reading.now, 3),
        )
        steps.append(Step(orphaned_event(found, reading, grace_period), report=(found.vgpu_id, reported)))
    at_risk = reading.at_risk(grace_period)  # unknown (no price): no threshold is crossed on a guess
    if cost_threshold is not None and not place.above and at_risk is not None and at_risk > cost_threshold:
        steps.append(Step(threshold_event(reading, grace_period, cost_threshold), above=True))
    return steps


def settle(place: Place, reading: Reading, grace_period: float, cost_threshold: float | None) -> None:
    """After a reading's events are delivered: each reported orphan still shown gets its cost so far and the time it
    was last seen; the threshold is re-armed when the money at risk is at or below it (or there is none)."""
    for found in reading.orphans:
        reported = place.reported.get(found.vgpu_id)
        if reported is not None:
            cost = finite(reading.costs.get(found.vgpu_id, (0.0, 0.0))[1])
            place.reported[found.vgpu_id] = reported._replace(
                cost=reported.cost if cost is None else cost, last_seen=round(reading.now, 3)
            )
    at_risk = reading.at_risk(grace_period)
    if place.above and (cost_threshold is None or (at_risk is not None and at_risk <= cost_threshold)):
        place.above = False
