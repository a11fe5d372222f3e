# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A converge's plan carried out: the machines' applier with the machines' part of the :class:`ClusterPlan`, then
the vGPUs' applier with each pool's part.  Nothing here reads what to do or plans again: the appliers write what the
plan says (reading only to resolve a lost answer or wait out a VM lock), and the new machines' ids come from
their creates.  ``done`` says what was done, also when a step fails halfway."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import pools
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes as ownership_notes
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    PartialFailure,
    Resolved,
    gone_is_done,
)

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.plan import ClusterPlan
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient


def apply(client: WhiteskyClient, plan: ClusterPlan, cloudspace_id: str, done: dict[str, Any], parallel: int) -> None:
    """Carry out ``plan`` in the cloudspace ``cloudspace_id`` (the plan's, or the one this run just created)."""
    spec = plan.spec
    scope = pools.Scope(cloudspace_id, spec.name, spec.location, state="present", exclusive=True, parallel=parallel)
    result: dict[str, Any] = {"created": [], "deleted": [], "machines": []}
    try:
        if plan.machines.creates or plan.machines.deletes:
            pools.apply_machines(client, scope, plan.pools, plan.machines, plan.user_data, plan.graceful, result)
    finally:
        done["created"] += result["created"]
        done["deleted"] += result["deleted"]
        done["released"] += [i["vgpu_name"] for n in result["deleted"] for i in plan.graceful.get(n, ())]
    ids = {v["name"]: v["vm_id"] for v in plan.machines.listed}
    ids.update((m["name"], m["vm_id"]) for m in result["machines"])
    # by id: a slot bought again within the second its last reservation was made has the same name
    before = {i["vgpu_id"] for items in plan.graceful.values() for i in items}
    before |= {i["vgpu_id"] for pv in plan.vgpus for mp in pv.plan.machines.values() for i in mp.kept + mp.releases}
    target = vgpus.Target(spec.location, cloudspace_id, spec.name, True, parallel)
    for pv in plan.vgpus:
        try:
            got = vgpus.apply(client, target, [(ids[n], n) for n in pv.targets], pv.plan)
        except PartialFailure as exc:  # the machines that did converge: what they reserved
            done["reserved"] += _new_slots(exc.details.get("reservations", []), before)
            raise
        done["released"] += [i["vgpu_name"] for mp in pv.plan.machines.values() for i in mp.releases]
        done["reserved"] += _new_slots(got, before)
    write_pools_note(client, plan, cloudspace_id)


def write_pools_note(client: WhiteskyClient, plan: ClusterPlan, cloudspace_id: str) -> None:
    """The cluster's pools note as the plan says: created, or updated in place (created when it went meanwhile),
    and the cluster's other pools notes deleted; written last, by a run that still proves it holds the cluster."""
    note = plan.pools_note
    if not note["write"] and not note["remove"]:
        return
    lease.fence(client, "the pools note")
    title, content = ownership_notes.NOTE_TITLE, note["content"]

    def resolve(_exc: Exception) -> Resolved | None:  # the answer was lost: is the note there after all?
        for n in client.cloudspace_notes(cloudspace_id):
            if isinstance(n, dict) and n.get("title") == title and n.get("content") == content:
                return Resolved(n)
        return None

    if note["write"] == "update" and note["note_id"] is not None:
        try:
            client.update_cloudspace_note(cloudspace_id, note["note_id"], title, content)
        except ApiError as exc:
            if exc.status != 404:
                raise
            client.create_cloudspace_note(cloudspace_id, title, content, resolve=resolve)
    elif note["write"] is not None:
        client.create_cloudspace_note(cloudspace_id, title, content, resolve=resolve)
    for note_id in note["remove"]:
        gone_is_done(client.delete_cloudspace_note, cloudspace_id, note_id)


def _new_slots(reservations: Iterable[Mapping[str, Any]], before: Collection[str]) -> list[str]:
    """``MACHINE/SLOT`` of the reservations not among the ids ``before``."""
    return ["%s/%02d" % (r["vm_name"], r["slot"]) for r in reservations if r["vgpu_id"] not in before]
