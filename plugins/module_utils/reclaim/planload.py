# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A reviewed reclaim's plan read back: what a document must be to be applied (pure Python).

:func:`loads` refuses a plan whole, before anything is read from the platform, when it is not a plan of this format
(bounded JSON of finite numbers, at most :data:`MAX_DEPTH` deep), was changed since it was written (its digest or
its summary is not its content's), has an entry that is malformed or not the scope's (a name that does not decode as
this collection's, or is not the scope's cluster's, however the digest reads), or is of another location.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform import documents
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.plandoc import (
    FORMAT,
    KINDS,
    VERSION,
    Plan,
    PlanScope,
    digest,
    summary,
)

#: The deepest a plan's JSON nests (the document, its entries, an entry, its cost): a deeper one is no plan.
MAX_DEPTH = 6


def refuse(path: str, why: str) -> InputError:
    """The refusal of the plan file ``path``, saying ``why`` and that nothing was released."""
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
        raise refuse(path, "is not a plan: its scope %s" % wrong)
    if scope["kind"] not in KINDS:
        raise refuse(path, "is not a plan: its scope's kind is %r, not one of %s" % (scope["kind"], ", ".join(KINDS)))
    if scope["kind"] == "cluster" and scope["cluster"] is None:
        raise refuse(path, "is not a plan: a cluster's plan names no cluster")
    if scope["cluster"] is not None:
        try:
            naming.cluster_part(scope["cluster"])
        except InputError as exc:
            raise refuse(path, "is not a plan: %s" % exc) from None
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
            raise refuse(path, "is not a plan: it nests deeper than any plan") from None
        raise refuse(path, "is not a plan: it is not JSON of finite numbers (%s)" % exc) from None
    if documents.depth(doc, MAX_DEPTH) > MAX_DEPTH:
        raise refuse(path, "is not a plan: it nests deeper than %d levels" % MAX_DEPTH)
    return doc


def loads(text: str, path: str, location: str) -> Plan:
    """The plan in ``text`` (the file ``path``, named in every refusal), made for ``location``: refused whole
    (:class:`InputError`) when it is not a plan of this format, its digest does not match its content, an entry is
    malformed or not the scope's, or it is of another location."""
    doc = _document(text, path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise refuse(path, 'is not a plan: it has no "format": %r' % FORMAT)
    if isinstance(doc.get("version"), bool) or doc.get("version") != VERSION:
        raise refuse(path, "is a plan of version %r; this collection reads version %d" % (doc.get("version"), VERSION))
    scope = _check_scope(doc.get("scope"), path)
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise refuse(path, "is not a plan: it has no list of entries")
    want = digest(scope, entries)
    if doc.get("digest") != want:
        raise refuse(
            path,
            "was changed since it was written: its digest is %r, its content's is %r; make a new plan and review it"
            % (doc.get("digest"), want),
        )
    for i, item in enumerate(entries):
        wrong = _check_entry(item, scope)
        if wrong:
            raise refuse(path, "is not a plan: entry %d %s" % (i, wrong))
    ids = [e["vgpu_id"] for e in entries]
    if len(set(ids)) != len(ids):
        raise refuse(path, "is not a plan: a reservation is in it twice")
    if doc.get("summary") != summary(entries):
        raise refuse(path, "was changed since it was written: its summary is not its entries'")
    if scope["location"] != location:
        raise refuse(path, "was made for location %r, not %r" % (scope["location"], location))
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
