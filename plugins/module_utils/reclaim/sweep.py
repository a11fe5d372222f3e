# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sweeps of ``vgpu_reclaim`` (plain Python, no Ansible): what a cluster owns, or what escaped (orphans),
released through the one runner (``ownership.converge``, no lease; the releases: ``release``).

A sweep releases only what decodes as this cluster's (``scope=cluster``), or
what is owned but whose machine no longer exists, after a grace period
(``scope=orphans``).  A name that does not decode is never touched.

A reviewed reclaim (``reclaim_plan``) is the same sweep in two steps: ``reviewed.write_plan`` writes what it would
release to a file, and ``reviewed.apply_plan`` releases exactly that file's reservations that still match, through
the same releases.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.billing import currency_of, price_per_hour, times
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.converge import converge
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, PartialFailure
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import planfile
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.orphans import (
    OrphanCheck,
    machines_in_location,
    select,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.release import (
    Releases,
    Releasing,
    refuse_foreign_vms,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.reviewed import apply_plan, write_plan
from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import names_diff
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import Inventory, deleted, view

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import Reservation


def reclaim(
    client: WhiteskyClient,
    *,
    location: str,
    scope: str | None = None,
    cluster: str | None = None,
    grace_period: float = 900,
    permanently: bool = True,
    parallel: int = 32,
    only: Collection[str] | None = None,
    plan: str | None = None,
    plan_file: str | None = None,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Core of ``vgpu_reclaim``: release what a cluster owns, or what escaped (orphans).  The reads, then
    ``orphans.select`` (pure), then check mode returns the selection, or ``release.release`` carries it out.

    ``only`` (the ids a caller planned to release, a teardown's) narrows the candidates: a reservation made since
    that plan is never released by it.  The reservations are listed before the VMs: a reservation needs its VM to
    exist, so one that a concurrent run makes is never taken for an orphan.

    ``plan_file`` (check mode only) writes what would be released to that file for review (``reviewed.write_plan``);
    ``plan`` releases exactly such a plan's reservations that still match (``reviewed.apply_plan``)."""
    if plan is not None:
        if plan_file is not None:
            raise InputError("plan (apply a reviewed plan) and plan_file (write one) are exclusive")
        return apply_plan(
            client, location=location, path=plan, scope=scope, cluster=cluster, parallel=parallel, check_mode=check_mode
        )
    if scope is None:
        raise InputError("scope is required (cluster or orphans), unless plan is given")
    if scope == "cluster" and not cluster:
        raise InputError("scope=cluster needs cluster (the cluster whose reservations to release)")
    if grace_period < 0:
        raise InputError("grace_period must be 0 or more seconds, got %r" % grace_period)
    if cluster:
        naming.cluster_part(cluster)
    if plan_file is not None:
        planfile.check_new(plan_file, check_mode)
    concern = _Sweep(client, location, parallel, scope, cluster, grace_period, permanently, only, plan_file)
    return converge(client, concern, check_mode)


@dataclass(frozen=True)
class Candidates:
    """What a sweep chooses from: the location's reservations (the listing, before its VMs), the candidates (those
    the cluster owns, or every owned one, narrowed by ``only``), the orphan rule on the location's machines, when
    it read them, and the prices (read when something is released)."""

    inventory: Inventory
    candidates: list[Reservation]
    orphan: OrphanCheck
    now: float
    price: dict[str, Any]


class _Sweep(Releasing[Candidates]):
    """``vgpu_reclaim``'s sweep: what ``select`` chooses, released."""

    def __init__(
        self,
        client: WhiteskyClient,
        location: str,
        parallel: int,
        scope: str,
        cluster: str | None,
        grace_period: float,
        permanently: bool,
        only: Collection[str] | None,
        plan_file: str | None,
    ) -> None:
        super().__init__(client, location, parallel)
        self.scope, self.cluster, self.grace_period, self.permanently = scope, cluster, grace_period, permanently
        self.only, self.plan_file = only, plan_file

    def read(self) -> Candidates:
        """The listing, then the location's machines (a scope of orphans); a reservation of the cluster's on a VM
        that is not the cluster's is refused, as ``vgpu`` refuses it; the prices."""
        client, location = self.client, self.location
        inventory = Inventory(client, location)
        candidates = inventory.owned(self.cluster)
        if self.only is not None:
            candidates = [i for i in candidates if i["vgpu_id"] in self.only]
        orphan = OrphanCheck(machines_in_location(client, location) if self.scope == "orphans" else set())
        found = Candidates(inventory, candidates, orphan, time.time(), {})
        chosen, _kept = self._select(found)
        if self.cluster:
            refuse_foreign_vms(client, chosen, self.cluster, self.parallel)
        return replace(found, price=client.prices(location) if chosen else {})

    def _select(self, world: Candidates) -> tuple[list[Reservation], list[dict[str, Any]]]:
        return select(world.candidates, self.scope, world.orphan, self.grace_period, self.permanently, world.now)

    def plan(self, world: Candidates) -> Releases:
        """What ``select`` chooses (pure), and what that saves."""
        chosen, kept = self._select(world)
        candidates = world.candidates
        shown = {
            "released": [view(i) for i in chosen],
            "kept": kept,
            "ignored": len(world.inventory.items) - len(candidates),
            "saved_per_hour": times(
                sum(1 for i in chosen if not deleted(i) or self.permanently), price_per_hour(world.price)
            ),
            "currency": currency_of(world.price),
            "diff": names_diff(
                "vgpu",
                sorted(i["vgpu_name"] for i in candidates),
                sorted(i["vgpu_name"] for i in candidates if i not in chosen),
            ),
        }
        return Releases(tuple(chosen), self.permanently, shown)

    def result(self, plan: Releases, done: dict[str, Any] | None, check_mode: bool) -> dict[str, Any]:
        out = plan.view()
        if done is None and self.plan_file is not None:  # check mode (planfile.check_new refused it otherwise)
            grace = self.grace_period if self.scope == "orphans" else 0
            planned = planfile.scope_of(self.scope, self.location, self.cluster, grace, self.permanently)
            made_by = "whitesky.capvco.vgpu_reclaim"
            out.update(write_plan(self.client, self.plan_file, planned, plan.chosen, made_by, out["kept"]))
        return out


def release_cluster(
    client: WhiteskyClient,
    *,
    location: str,
    cluster: str,
    parallel: int = 32,
    only: Collection[str] | None = None,
    check_mode: bool = False,
) -> dict[str, Any]:
    """A teardown's last step: every reservation ``cluster`` owns released (or, with ``only``, those planned); one
    that is kept (in the recycle bin already, with ``permanently``) fails the call, naming it."""
    swept = reclaim(
        client,
        location=location,
        scope="cluster",
        cluster=cluster,
        grace_period=0,
        parallel=parallel,
        only=only,
        check_mode=check_mode,
    )
    if swept["kept"]:
        raise PartialFailure(
            "%d reservation(s) of cluster %r were not released: %s"
            % (len(swept["kept"]), cluster, ", ".join(k["vgpu_name"] for k in swept["kept"])),
            {"released": swept["released"], "kept": swept["kept"]},
        )
    return swept
