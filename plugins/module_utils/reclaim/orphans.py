# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The orphan rule (plain Python; only :func:`machines_in_location` reads): a reservation is an orphan when it is
owned (its name decodes) and no VM of its machine exists in the location; :func:`select` says which of a scope's
reservations a reclaim releases, and why it keeps the others.  The report (``report.info``), the reclaim
(``sweep.reclaim``), a reviewed plan (``planmatch.match``) and the event source (``reclaim.events``) all ask here:
a new orphan rule goes here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import deleted, owner_of, view

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.naming import Owner
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import Reservation


def machines_in_location(client: WhiteskyClient, location: str) -> set[str]:
    """Names of the VMs that exist in the location (all the customer's cloudspaces there)."""
    names: set[str] = set()
    for cs in client.cloudspaces():
        if cs.get("location") == location:
            names.update(v["name"] for v in client.vms(cs["cloudspace_id"]))
    return names


class OrphanCheck:
    """Whether an owned reservation's machine is gone: the machine keys of the VMs that exist.  A machine's key
    depends on its cluster only through the length of the cluster's part of the name (the room left to the machine's
    part), so the keys are computed once per such length, not once per cluster: a location's check costs its VMs
    times a handful of lengths, however many clusters it holds."""

    def __init__(self, vm_names: Collection[str]) -> None:
        self.vm_names = vm_names
        self._keys: dict[int, set[str]] = {}

    def __call__(self, owner: Owner) -> bool:
        room = len(owner.cluster)
        keys = self._keys.get(room)
        if keys is None:
            keys = set()
            for name in self.vm_names:
                try:
                    keys.add(naming.machine_key(owner.cluster, name))
                except InputError:
                    continue
            self._keys[room] = keys
        return owner.machine not in keys


def past_grace(owner: Owner, grace_period: float, now: float) -> bool:
    """Whether an orphan is past the grace period: at least ``grace_period`` seconds old at ``now`` (its name says
    when it was made).  Younger ones are left alone: a machine being created may not be listed yet."""
    return now - owner.created >= grace_period


def select(
    candidates: Iterable[Reservation],
    scope: str,
    orphan: Callable[[Owner], bool],
    grace_period: float,
    permanently: bool,
    now: float,
) -> tuple[list[Reservation], list[dict[str, Any]]]:
    """``(release, kept)`` among a cluster's (or every cluster's) reservations (pure): all of them for a
    teardown; for ``scope=orphans``, those whose machine is gone and that are older than the grace period.  Each
    kept one says why, and when it becomes eligible (``eligible_at``, seconds since the epoch: an orphan within the
    grace period; None for the others)."""
    chosen: list[Reservation] = []
    kept: list[dict[str, Any]] = []
    for item in candidates:
        owner = owner_of(item)
        age = now - owner.created
        eligible = None
        if deleted(item) and not permanently:
            why = "already in the recycle bin"
        elif scope == "cluster":
            why = None
        elif not orphan(owner):
            why = "machine %r exists" % owner.machine
        elif not past_grace(owner, grace_period, now):
            why = "within the grace period (age %ds < %ds)" % (age, grace_period)
            eligible = int(math.ceil(owner.created + grace_period))
        else:
            why = None
        if why is None:
            chosen.append(item)
        else:
            kept.append(dict(view(item), reason=why, eligible_at=eligible))
    return chosen, kept
