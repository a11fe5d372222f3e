# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A reviewed reclaim's plan against now: which planned reservations are still released, and why the others are
not (pure Python)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import attached_to, deleted

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.naming import Owner
    from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.plandoc import Plan, PlanEntry, PlanScope
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import Reservation

#: Why a planned reservation is not released (:func:`match`), each a ``reason`` of ``not_released``.
GONE = "gone"
RENAMED = "renamed"
OWNER_CHANGED = "owner_changed"
ATTACHED = "attached"
NOT_ORPHANED = "not_orphaned"
REASONS = (GONE, RENAMED, OWNER_CHANGED, ATTACHED, NOT_ORPHANED)


class Skipped(TypedDict):
    """A planned reservation that is not released, and why: ``reason`` (one of :data:`REASONS`) and ``message``."""

    vgpu_id: str
    vgpu_name: str
    reason: str
    message: str


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
