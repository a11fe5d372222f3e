# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A reviewed reclaim's plan, the document: what it holds and how it is made (pure Python).

Plan, then act.  ``vgpu_reclaim`` (``plan_file``, in check mode) and the ``cluster`` module's teardown (check mode)
write a plan: every reservation they would release, with its id, name, profile, status, attachment and cost, the
scope it was planned under and when, and a digest.  ``vgpu_reclaim plan=FILE`` reads it back (``planfile.read``,
checked by ``planload.loads``), lists the location again, and releases what ``planmatch.match`` keeps.

The digest is ``sha256:`` and the hex SHA-256 of the canonical JSON of ``{"entries": ..., "scope": ...}``
(:func:`canonical`: keys sorted, no white space, UTF-8, numbers as Python's ``json`` writes them).  It tells an
edited plan from the one that was reviewed; it is no signature (anyone can compute it again), so a plan read back
has every entry checked for itself too (``planload``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import view

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import Reservation

FORMAT = "whitesky.capvco/reclaim-plan"
VERSION = 1
#: The scopes a plan is made under: the orphan sweep's, and a cluster's (its teardown).
KINDS = ("orphans", "cluster")


class PlanScope(TypedDict):
    """What a plan was made under: ``kind`` (``orphans`` or ``cluster``), the location, the cluster (None: the
    orphans of every cluster), the grace period in seconds (0 for a cluster's), and whether a release is permanent
    (a reservation in the recycle bin still bills)."""

    kind: str
    location: str
    cluster: str | None
    grace_period: int
    permanently: bool


class PlanCost(TypedDict):
    """A planned reservation's cost: billed so far (None when the consumption report does not have it), per hour,
    in ``currency``."""

    so_far: float | None
    per_hour: float
    currency: str


class PlanEntry(TypedDict):
    """One reservation to release, as it was when the plan was made: its id, name (which encodes its owner:
    ``cluster``, ``machine``, ``slot``, ``created``), profile (``gpu_id``), status, the VM it was attached to, and its
    cost (None when the location has no price)."""

    vgpu_id: str
    vgpu_name: str
    gpu_id: str
    status: str | None
    vm_id: int | None
    vm_name: str | None
    cluster: str
    machine: str
    slot: int
    created: int
    cost: PlanCost | None


class PlanSummary(TypedDict):
    """The plan's totals (checked against its entries when it is read): how many, their cost per hour and so far."""

    count: int
    cost_per_hour: float | None
    cost_so_far: float | None
    currency: str | None


class LeftOut(TypedDict):
    """The orphans a plan of scope ``orphans`` left out because they were within its grace period (information for
    the reviewer, outside the digest: nothing is released or kept because of it): how many, when the first and the
    last of them become eligible (UTC; None: none), and the first :data:`LEFT_OUT_SHOWN` of them by when, each with
    its ``eligible_at``."""

    count: int
    grace_period: int
    first_eligible_at: str | None
    last_eligible_at: str | None
    reservations: list[dict[str, Any]]


class _Plan(TypedDict):
    format: str
    version: int
    made_by: str
    created: str
    scope: PlanScope
    summary: PlanSummary
    entries: list[PlanEntry]
    digest: str


class Plan(_Plan, total=False):
    """A plan file's document (``left_out``: a plan of scope ``orphans``, as written; never read back)."""

    left_out: LeftOut


#: How many of the orphans left out for the grace period a plan lists by name (the count covers all of them).
LEFT_OUT_SHOWN = 20


def canonical(value: object) -> bytes:
    """The canonical JSON of ``value``: keys sorted, no white space, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def digest(scope: Mapping[str, Any], entries: Sequence[Mapping[str, Any]]) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``{"entries": entries, "scope": scope}``."""
    return "sha256:" + hashlib.sha256(canonical({"entries": list(entries), "scope": dict(scope)})).hexdigest()


def scope_of(
    kind: str, location: str, cluster: str | None, grace_period: float = 0, permanently: bool = True
) -> PlanScope:
    """A plan's scope (``kind`` is one of :data:`KINDS`)."""
    if kind not in KINDS:
        raise InputError("a reclaim plan's scope is one of %s, not %r" % (", ".join(KINDS), kind))
    return {
        "kind": kind,
        "location": location,
        "cluster": cluster or None,
        "grace_period": int(grace_period),
        "permanently": bool(permanently),
    }


def entry(
    item: Reservation, cost: tuple[float, float | None] | None, per_hour: float | None, currency: str | None
) -> PlanEntry:
    """The plan's record of an owned reservation, with its cost (``(seconds, cost so far)`` from
    ``billing.costs``, or None) when the location's currency and price are known (None: the cost is unknown)."""
    row = view(item)
    if not row["owned"]:
        raise InputError("reservation %r is not this collection's: it cannot be planned" % item["vgpu_name"])
    return {
        "vgpu_id": row["vgpu_id"],
        "vgpu_name": row["vgpu_name"],
        "gpu_id": row["gpu_id"],
        "status": row["status"],
        "vm_id": row["vm_id"],
        "vm_name": row["vm_name"],
        "cluster": row["cluster"],
        "machine": row["machine"],
        "slot": row["slot"],
        "created": row["created"],
        "cost": None
        if currency is None or per_hour is None
        else {"so_far": None if cost is None else cost[1], "per_hour": round(per_hour, 4), "currency": currency},
    }


def summary(entries: Sequence[PlanEntry]) -> PlanSummary:
    """The totals of the entries (``cost_*`` 0 for no entry, None when an entry's cost is not known)."""
    costs = [e["cost"] for e in entries if e["cost"] is not None]
    known = len(costs) == len(entries)
    return {
        "count": len(entries),
        "cost_per_hour": round(sum(c["per_hour"] for c in costs), 4) if known else None,
        "cost_so_far": round(sum(c["so_far"] or 0.0 for c in costs), 4) if known else None,
        "currency": costs[0]["currency"] if costs else None,
    }


def _utc(stamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def left_out(kept: Iterable[Mapping[str, Any]], grace_period: int) -> LeftOut:
    """What a plan of orphans says of those it left out for the grace period: the ``kept`` of ``orphans.select``
    that have an ``eligible_at`` (pure)."""
    young = sorted(
        (k for k in kept if isinstance(k.get("eligible_at"), int)), key=lambda k: (k["eligible_at"], k["vgpu_name"])
    )
    return {
        "count": len(young),
        "grace_period": int(grace_period),
        "first_eligible_at": _utc(young[0]["eligible_at"]) if young else None,
        "last_eligible_at": _utc(young[-1]["eligible_at"]) if young else None,
        "reservations": [
            {"vgpu_id": k["vgpu_id"], "vgpu_name": k["vgpu_name"], "eligible_at": _utc(k["eligible_at"])}
            for k in young[:LEFT_OUT_SHOWN]
        ],
    }


def build(
    scope: PlanScope,
    entries: Iterable[PlanEntry],
    made_by: str,
    now: float | None = None,
    kept: Iterable[Mapping[str, Any]] | None = None,
) -> Plan:
    """A plan of ``entries`` (ordered by name, then id) made under ``scope``, with its digest; a plan of orphans
    also says which it left out for the grace period (``kept``, :func:`left_out`)."""
    ordered = sorted(entries, key=lambda e: (e["vgpu_name"], e["vgpu_id"]))
    plan: Plan = {
        "format": FORMAT,
        "version": VERSION,
        "made_by": made_by,
        "created": _utc(time.time() if now is None else now),
        "scope": scope,
        "summary": summary(ordered),
        "entries": ordered,
        "digest": digest(scope, ordered),
    }
    if scope["kind"] == "orphans":
        plan["left_out"] = left_out(kept or (), scope["grace_period"])
    return plan


def dumps(plan: Plan) -> str:
    """The plan file's text: the document, indented for a reviewer, keys in a fixed order."""
    return json.dumps(plan, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
