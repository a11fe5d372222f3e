# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A reviewed reclaim: the plan file of what a reclaim would release, and the match of a plan against now.

Plan, then act.  ``vgpu_reclaim`` (``plan_file``, in check mode) and the ``cluster`` module's teardown (check mode)
write a plan: every reservation they would release, with its id, name, profile, status, attachment and cost, the
scope it was planned under and when, and a digest.  ``vgpu_reclaim plan=FILE`` reads it back (:func:`read`:
refused whole, before anything is read from the platform, when it is not a plan, was changed since it was written,
or is of another location), lists the location again, and releases what :func:`match` keeps: each planned
reservation that still matches, never one that is not in the plan.

The digest is ``sha256:`` and the hex SHA-256 of the canonical JSON of ``{"entries": ..., "scope": ...}``
(:func:`canonical`: keys sorted, no white space, UTF-8, numbers as Python's ``json`` writes them).  It tells an
edited plan from the one that was reviewed; it is no signature (anyone can compute it again), so :func:`read`
also checks every entry for itself: a name that does not decode as this collection's, or that is not the scope's
cluster's, is refused however the digest reads.

Pure Python, but for :func:`write` and :func:`read`, which do the file.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform import documents, files
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import attached_to, deleted, view

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.naming import Owner
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import Reservation

FORMAT = "whitesky.capvco/reclaim-plan"
VERSION = 1
#: The scopes a plan is made under: the orphan sweep's, and a cluster's (its teardown).
KINDS = ("orphans", "cluster")
#: The largest plan file read (a plan of 100,000 reservations is about 50 MB).
MAX_BYTES = 128 * 1024 * 1024
#: The deepest a plan's JSON nests (the document, its entries, an entry, its cost): a deeper one is no plan.
MAX_DEPTH = 6

#: Why a planned reservation is not released (:func:`match`), each a ``reason`` of ``not_released``.
GONE = "gone"
RENAMED = "renamed"
OWNER_CHANGED = "owner_changed"
ATTACHED = "attached"
NOT_ORPHANED = "not_orphaned"
REASONS = (GONE, RENAMED, OWNER_CHANGED, ATTACHED, NOT_ORPHANED)


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


class Skipped(TypedDict):
    """A planned reservation that is not released, and why: ``reason`` (one of :data:`REASONS`) and ``message``."""

    vgpu_id: str
    vgpu_name: str
    reason: str
    message: str


# --- making a plan (pure) ---


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


# --- reading a plan back (pure: loads; read does the file) ---


def _refuse(path: str, why: str) -> InputError:
    return InputError("reclaim plan %s %s; nothing was released" % (path, why))


_ENTRY_TYPES: dict[str, tuple[type, ...]] = {
    "vgpu_id": (str,),
    "vgpu_name": (str,),
    "gpu_id": (str,),
    "status": (str, type(None)),
    "vm_id": (int, type(None)),
    "vm_name": (str, type(None)),
    "cluster": (str,),
    "machine": (str,),
    "slot": (int,),
    "created": (int,),
    "cost": (dict, type(None)),
}
_SCOPE_TYPES: dict[str, tuple[type, ...]] = {
    "kind": (str,),
    "location": (str,),
    "cluster": (str, type(None)),
    "grace_period": (int,),
    "permanently": (bool,),
}


def _fields(value: object, types: Mapping[str, tuple[type, ...]]) -> str | None:
    """What is wrong with the shape of a record (None: nothing): a dict of exactly those keys, each of its types."""
    if not isinstance(value, dict):
        return "is not an object"
    if set(value) != set(types):
        return "has the keys %s, not %s" % (", ".join(sorted(value)), ", ".join(sorted(types)))
    for key, allowed in types.items():
        bad = isinstance(value[key], bool) and bool not in allowed
        if bad or not isinstance(value[key], allowed):
            return "has %s %r, which is not a %s" % (key, value[key], " or ".join(t.__name__ for t in allowed))
    return None


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_entry(item: object, scope: PlanScope) -> str | None:
    """What is wrong with one entry (None: nothing): its shape, and its name against its owner and the scope."""
    wrong = _fields(item, _ENTRY_TYPES)
    if wrong or not isinstance(item, dict):
        return wrong
    owner = naming.decode(item["vgpu_name"])
    if owner is None:
        return "names %r, which is not this collection's name" % item["vgpu_name"]
    if (owner.cluster, owner.machine, owner.slot, owner.created) != (
        item["cluster"],
        item["machine"],
        item["slot"],
        item["created"],
    ):
        return "says %r is owned otherwise than its name says" % item["vgpu_name"]
    if scope["cluster"] is not None and not naming.owned_by(owner, scope["cluster"]):
        return "names %r, which is not cluster %r's" % (item["vgpu_name"], scope["cluster"])
    cost = item["cost"]
    if cost is not None:
        if set(cost) != {"so_far", "per_hour", "currency"} or not isinstance(cost["currency"], str):
            return "has a cost that is not {so_far, per_hour, currency}"
        if not _number(cost["per_hour"]) or not (cost["so_far"] is None or _number(cost["so_far"])):
            return "has a cost that is not a number"
    return None


def _check_scope(scope: object, path: str) -> PlanScope:
    wrong = _fields(scope, _SCOPE_TYPES)
    if wrong or not isinstance(scope, dict):
        raise _refuse(path, "is not a plan: its scope %s" % wrong)
    if scope["kind"] not in KINDS:
        raise _refuse(path, "is not a plan: its scope's kind is %r, not one of %s" % (scope["kind"], ", ".join(KINDS)))
    if scope["kind"] == "cluster" and scope["cluster"] is None:
        raise _refuse(path, "is not a plan: a cluster's plan names no cluster")
    if scope["cluster"] is not None:
        try:
            naming.cluster_part(scope["cluster"])
        except InputError as exc:
            raise _refuse(path, "is not a plan: %s" % exc) from None
    typed: PlanScope = {
        "kind": scope["kind"],
        "location": scope["location"],
        "cluster": scope["cluster"],
        "grace_period": scope["grace_period"],
        "permanently": scope["permanently"],
    }
    return typed


def _document(text: str, path: str) -> Any:
    """The JSON of a plan file, bounded: finite numbers only (no NaN, no 1e400), at most :data:`MAX_DEPTH` deep."""
    try:
        doc = documents.loads(text, "a plan")
    except documents.NotJson as exc:
        if exc.too_deep:
            raise _refuse(path, "is not a plan: it nests deeper than any plan") from None
        raise _refuse(path, "is not a plan: it is not JSON of finite numbers (%s)" % exc) from None
    if documents.depth(doc, MAX_DEPTH) > MAX_DEPTH:
        raise _refuse(path, "is not a plan: it nests deeper than %d levels" % MAX_DEPTH)
    return doc


def loads(text: str, path: str, location: str) -> Plan:
    """The plan in ``text`` (the file ``path``, named in every refusal), made for ``location``: refused whole
    (:class:`InputError`) when it is not a plan of this format, its digest does not match its content, an entry is
    malformed or not the scope's, or it is of another location."""
    doc = _document(text, path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _refuse(path, 'is not a plan: it has no "format": %r' % FORMAT)
    if isinstance(doc.get("version"), bool) or doc.get("version") != VERSION:
        raise _refuse(path, "is a plan of version %r; this collection reads version %d" % (doc.get("version"), VERSION))
    scope = _check_scope(doc.get("scope"), path)
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise _refuse(path, "is not a plan: it has no list of entries")
    want = digest(scope, entries)
    if doc.get("digest") != want:
        raise _refuse(
            path,
            "was changed since it was written: its digest is %r, its content's is %r; make a new plan and review it"
            % (doc.get("digest"), want),
        )
    for i, item in enumerate(entries):
        wrong = _check_entry(item, scope)
        if wrong:
            raise _refuse(path, "is not a plan: entry %d %s" % (i, wrong))
    ids = [e["vgpu_id"] for e in entries]
    if len(set(ids)) != len(ids):
        raise _refuse(path, "is not a plan: a reservation is in it twice")
    if doc.get("summary") != summary(entries):
        raise _refuse(path, "was changed since it was written: its summary is not its entries'")
    if scope["location"] != location:
        raise _refuse(path, "was made for location %r, not %r" % (scope["location"], location))
    plan: Plan = {
        "format": FORMAT,
        "version": VERSION,
        "made_by": str(doc.get("made_by", "")),
        "created": str(doc.get("created", "")),
        "scope": scope,
        "summary": doc["summary"],
        "entries": entries,
        "digest": want,
    }
    return plan


# --- the file ---


def resolve(path: str) -> str:
    """A plan file's path as the module uses it: ``~`` expanded, absolute.  A relative path is refused: a module
    works in the playbook's folder (for a playbook run by its name, inside the installed collection), never where the
    person ran ``ansible-playbook``; the collection's playbooks make a relative path absolute against that
    directory before they call the module."""
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        raise InputError(
            "plan file %r is a relative path: give an absolute one (the playbooks gpu_orphans and cluster_delete take "
            "a relative one from the directory ansible-playbook was started in)" % path
        )
    return os.path.normpath(path)


def read(path: str, location: str) -> Plan:
    """The plan in file ``path``, made for ``location`` (:func:`loads`); an unreadable file is refused, naming it.

    Who can write the plan decides what is released, and its digest can be recomputed by whoever edits it (it
    detects accidents, not forgery).  So, as ssh does with its keys, a plan file is refused when it is a symbolic
    link, not a regular file, writable by its group or by others, or owned by another user than the one applying
    it (or root)."""
    path = resolve(path)
    try:
        raw = files.read_bounded(path, MAX_BYTES, follow=False, check=functools.partial(_check_file, path))
    except files.TooLarge:
        raise _refuse(path, "is over %d bytes: not a plan this collection wrote" % MAX_BYTES) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path, "is a symbolic link: give the plan file itself") from None
        raise _refuse(path, "cannot be read (%s)" % (exc.strerror or exc)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _refuse(path, "is not a plan: it is not UTF-8 text") from None
    return loads(text, path, location)


def _check_file(path: str, st: os.stat_result) -> None:
    """Refuse a plan file that another user could have written (see :func:`read`)."""
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, "is not a regular file")
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        raise _refuse(path, "is owned by uid %d, not by the user applying it (uid %d)" % (st.st_uid, me))
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise _refuse(
            path,
            "is writable by %s (mode %04o): anyone who can write it decides what is released; chmod go-w it, "
            "or make the plan again" % ("others" if st.st_mode & stat.S_IWOTH else "its group", st.st_mode & 0o7777),
        )


def check_new(path: str, check_mode: bool) -> None:
    """Refuse, before anything is read, a plan file that cannot be written: outside check mode (a plan is made for
    review, not with a release), over a file that exists, or in a folder that does not."""
    if not check_mode:
        raise InputError(
            "plan_file %s: a plan is written in check mode only (check_mode: true, or --check), to be reviewed, then "
            "applied with plan=FILE; nothing was read or changed" % resolve(path)
        )
    path = resolve(path)
    if os.path.lexists(path):
        raise InputError(
            "plan file %s exists: a plan is never overwritten (the plan that was reviewed must be the one applied); "
            "remove it, or give another path" % path
        )
    if not os.path.isdir(os.path.dirname(path)):
        raise InputError("plan file %s cannot be written: folder %s does not exist" % (path, os.path.dirname(path)))


def write(path: str, plan: Plan) -> str:
    """Write the plan to ``path`` (on the machine the module runs on: the controller) and return its absolute path.

    Mode 0600, written whole or not at all (``files.write_whole``: a temporary file in the same folder, then linked
    into place), so a reader never sees half a plan.  A file that exists is never replaced (a plan that was reviewed
    is the one applied): refused, naming it."""
    path = resolve(path)
    if os.path.lexists(path):
        raise InputError(
            "plan file %s exists: a plan is never overwritten (the plan that was reviewed must be the one applied); "
            "remove it, or give another path" % path
        )
    try:
        files.write_whole(path, dumps(plan), replace=False)
    except FileExistsError:
        raise InputError(
            "plan file %s exists: a plan is never overwritten; remove it, or give another path" % path
        ) from None
    except OSError as exc:
        raise WhiteskyError("plan file %s could not be written (%s)" % (path, exc.strerror or exc)) from None
    return path


# --- matching a plan against now (pure) ---


def match(
    plan: Plan, items: Iterable[Reservation], orphan: Callable[[Owner], bool]
) -> tuple[list[Reservation], list[Skipped]]:
    """``(release, skipped)``: the reservations of now (``items``, a fresh listing of the plan's location, recycle bin
    included, their owners decoded) that the plan's entries still match, and the entries that do not, each with
    why.  ``orphan(owner)``: whether the owner's machine is gone now (an orphan plan asks it).

    An entry matches when its reservation (by ``vgpu_id``) is still listed (a plan that releases softly: and not in
    the recycle bin), under the same name (the same owner), attached to no VM or to the one it was attached to when
    planned; and, for an orphan plan, its machine is still gone.  Nothing but the plan's entries is ever
    returned to release."""
    by_id = {i["vgpu_id"]: i for i in items}
    release: list[Reservation] = []
    skipped: list[Skipped] = []
    for planned in plan["entries"]:
        now = by_id.get(planned["vgpu_id"])
        why = _mismatch(plan["scope"], planned, now, orphan)
        if why is None and now is not None:
            release.append(now)
        else:
            reason, message = why or (GONE, "not listed")
            skipped.append(
                {"vgpu_id": planned["vgpu_id"], "vgpu_name": planned["vgpu_name"], "reason": reason, "message": message}
            )
    return release, skipped


def _mismatch(
    scope: PlanScope, planned: PlanEntry, now: Reservation | None, orphan: Callable[[Owner], bool]
) -> tuple[str, str] | None:
    """``(reason, message)`` when the reservation of now no longer matches its plan entry, else None."""
    if now is None:
        return GONE, "no longer listed: released already"
    if deleted(now) and not scope["permanently"]:
        return GONE, "in the recycle bin already"
    owner: Owner | None = now.get("owner")
    if now["vgpu_name"] != planned["vgpu_name"]:
        if owner is None:
            return RENAMED, "renamed to %r, which is not this collection's name" % now["vgpu_name"]
        if (owner.cluster, owner.machine) != (planned["cluster"], planned["machine"]):
            return OWNER_CHANGED, "renamed to %r: owned now by cluster %r, machine %r" % (
                now["vgpu_name"],
                owner.cluster,
                owner.machine,
            )
        return RENAMED, "renamed to %r" % now["vgpu_name"]
    if owner is None or (scope["cluster"] is not None and not naming.owned_by(owner, scope["cluster"])):
        return OWNER_CHANGED, "not cluster %r's" % scope["cluster"]
    vm_id = attached_to(now)
    if vm_id is not None and vm_id != planned["vm_id"]:
        vm: Mapping[str, Any] = now.get("virtual_machine") or {}
        return ATTACHED, "attached now to VM %r (%s)" % (vm.get("name"), vm_id)
    if scope["kind"] == "orphans" and not orphan(owner):
        return NOT_ORPHANED, "no longer orphaned: machine %r exists again" % owner.machine
    return None
