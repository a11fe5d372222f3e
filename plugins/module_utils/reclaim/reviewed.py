# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A reviewed reclaim, against the platform (plain Python, no Ansible): :func:`write_plan` writes what a reclaim
would release to a plan file (``planfile``), each with its cost, and :func:`apply_plan` releases exactly that file's
reservations that still match (``planfile.match``), through the same releases as a sweep (``release``)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.billing import (
    Billed,
    costs,
    currency_of,
    price_per_hour,
    times,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.converge import converge
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    InputError,
    PartialFailure,
    WhiteskyError,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import planfile
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.orphans import OrphanCheck, machines_in_location
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.release import (
    Releases,
    Releasing,
    refuse_foreign_vms,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import names_diff
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import (
    Inventory,
    attached_to,
    deleted,
    owner_of,
    view,
)

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import Reservation


def write_plan(
    client: WhiteskyClient,
    path: str,
    scope: planfile.PlanScope,
    items: Sequence[Reservation],
    made_by: str,
    kept: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Write the plan of releasing ``items`` (owned reservations) under ``scope`` to the file ``path``, each with
    its cost (one read of the consumption report and the prices), and, for a plan of orphans, those of ``kept``
    left out for the grace period; ``{plan_file, reclaim_plan}`` for the result."""
    now = time.time()
    billed = [Billed(i["vgpu_id"], attached_to(i), None, owner_of(i).created) for i in items]
    figures, currency, per_hour = costs(client, scope["location"], billed, now)
    entries = [planfile.entry(i, figures.get(i["vgpu_id"]), per_hour, currency) for i in items]
    plan = planfile.build(scope, entries, made_by, now, kept)
    written = planfile.write(path, plan)
    return {"plan_file": written, "reclaim_plan": _plan_view(written, plan)}


def _plan_view(path: str, plan: planfile.Plan) -> dict[str, Any]:
    """What a result says of a plan file: where, its digest, when and under what it was made, its totals, and (a
    plan of orphans as written) the orphans it left out for the grace period."""
    out = {
        "path": path,
        "digest": plan["digest"],
        "created": plan["created"],
        "made_by": plan["made_by"],
        "scope": dict(plan["scope"]),
        "summary": dict(plan["summary"]),
    }
    if "left_out" in plan:
        out["left_out"] = dict(plan["left_out"])
    return out


def apply_plan(
    client: WhiteskyClient,
    *,
    location: str,
    path: str,
    scope: str | None = None,
    cluster: str | None = None,
    parallel: int = 32,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Release exactly the reservations of the reviewed plan in file ``path`` that still match
    (``planfile.match``), through ``release.release``; report those skipped and why.

    The plan is read and checked whole first (its digest, its location, ``scope`` and ``cluster`` when given):
    refused before anything is read from the platform.  Then the same reads as ``sweep.reclaim`` (the listing before
    the VMs), and the same refusal of a reservation of the plan's cluster attached to a VM the cluster does not
    own.  A reservation that is not in the plan is never released.  Applied twice, the second run releases
    nothing (every entry is skipped as gone)."""
    plan = planfile.read(path, location)
    planned = plan["scope"]
    if scope is not None and scope != planned["kind"]:
        raise InputError(
            "reclaim plan %s is a plan of scope %s, not %s; nothing was released"
            % (planfile.resolve(path), planned["kind"], scope)
        )
    if cluster and cluster != planned["cluster"]:
        raise InputError(
            "reclaim plan %s is a plan of %s, not of cluster %r; nothing was released"
            % (
                planfile.resolve(path),
                "cluster %r" % planned["cluster"] if planned["cluster"] else "every cluster's orphans",
                cluster,
            )
        )
    return converge(client, _Reviewed(client, location, parallel, plan, path), check_mode)


@dataclass(frozen=True)
class Now:
    """What a reviewed plan is matched against: the location's reservations now, the orphan rule on its machines
    now (a plan of orphans), and the prices (read when something is released)."""

    inventory: Inventory
    orphan: OrphanCheck
    price: dict[str, Any]


class _Reviewed(Releasing[Now]):
    """A reviewed plan applied: what still matches it released, the rest skipped with why."""

    def __init__(self, client: WhiteskyClient, location: str, parallel: int, plan: planfile.Plan, path: str) -> None:
        super().__init__(client, location, parallel)
        self.reviewed, self.path = plan, planfile.resolve(path)

    def read(self) -> Now:
        """The same reads as ``sweep.reclaim`` (the listing before the VMs), and the same refusal of a reservation of
        the plan's cluster attached to a VM the cluster does not own."""
        client, location, planned = self.client, self.location, self.reviewed["scope"]
        inventory = Inventory(client, location)
        orphan = OrphanCheck(machines_in_location(client, location) if planned["kind"] == "orphans" else set())
        chosen, _skipped = planfile.match(self.reviewed, inventory.items, orphan)
        if planned["cluster"]:
            refuse_foreign_vms(client, chosen, planned["cluster"], self.parallel)
        return Now(inventory, orphan, client.prices(location) if chosen else {})

    def plan(self, world: Now) -> Releases:
        """What still matches the reviewed plan (``planfile.match``, pure), and why the rest is skipped."""
        plan, planned = self.reviewed, self.reviewed["scope"]
        chosen, skipped = planfile.match(plan, world.inventory.items, world.orphan)
        planned_ids = {e["vgpu_id"] for e in plan["entries"]}
        still = sorted(i["vgpu_name"] for i in chosen) + sorted(
            s["vgpu_name"] for s in skipped if s["reason"] != planfile.GONE
        )
        shown = {
            "released": [view(i) for i in chosen],
            "not_released": skipped,
            "kept": [],
            "ignored": sum(1 for i in world.inventory.items if i["vgpu_id"] not in planned_ids),
            "saved_per_hour": times(
                sum(1 for i in chosen if not deleted(i) or planned["permanently"]), price_per_hour(world.price)
            ),
            "currency": currency_of(world.price),
            "reclaim_plan": _plan_view(self.path, plan),
            "diff": names_diff(
                "vgpu", sorted(still), sorted(s["vgpu_name"] for s in skipped if s["reason"] != planfile.GONE)
            ),
        }
        return Releases(tuple(chosen), planned["permanently"], shown)

    def apply(self, plan: Releases, done: dict[str, Any]) -> None:
        done["not_released"] = plan.shown["not_released"]
        super().apply(plan, done)

    def result(self, plan: Releases, done: dict[str, Any] | None, check_mode: bool) -> dict[str, Any]:
        out = plan.view()
        planned = self.reviewed["scope"]
        live = _live_machines(plan.chosen) if planned["kind"] == "cluster" else []
        if live:
            out["warnings"] = [
                "reclaim plan %s is a teardown of cluster %r, and %d of its reservations are attached to machines "
                "that exist (%s): %s"
                % (
                    self.path,
                    planned["cluster"],
                    sum(1 for i in plan.chosen if attached_to(i) is not None),
                    ", ".join(live[:10]) + (" and %d more" % (len(live) - 10) if len(live) > 10 else ""),
                    "applying it would take their vGPUs from them (check mode: nothing was released)"
                    if check_mode
                    else "their vGPUs were taken from them",
                )
            ]
        return out

    def failed(self, exc: WhiteskyError, done: dict[str, Any]) -> WhiteskyError:
        if isinstance(exc, PartialFailure):
            exc.details["not_released"] = done["not_released"]
        return exc


def _live_machines(chosen: Iterable[Reservation]) -> list[str]:
    """The names of the VMs the reservations are attached to (VMs that exist: the listing names them)."""
    names = set()
    for item in chosen:
        vm = item.get("virtual_machine")
        if vm:
            names.add(str(vm.get("name")))
    return sorted(names)
