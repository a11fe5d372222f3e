# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cloudspaces by name, and who created them (plain Python, no Ansible).

The platform keeps no owner for a cloudspace, but it keeps notes on it.  A cloudspace a cluster creates gets a
note at once (``ownership_notes.creator_note``): the only proof a teardown accepts.  A cluster's teardown deletes a
cloudspace only when its earliest creator note names the cluster and no VM the cluster does not own is left in it.

Two runs that find no cloudspace of a name both create one; the platform lets both exist.  Every run then takes the
same one, the earliest (:func:`cloudspaces_named`), and the run whose new cloudspace is not it deletes its own,
still empty, at once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers, naming
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes as ownership_notes
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    InputError,
    PartialFailure,
    Resolved,
    WhiteskyError,
    gone_is_done,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import described

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import CloudspaceView, DescribedVM


def cloudspaces_named(client: WhiteskyClient, name: str, location: str) -> list[dict[str, Any]]:
    """The cloudspaces called ``name`` in ``location``, the earliest first: two runs that each created one agree on
    which is the cluster's.

    A cloudspace's ``creation_time`` is in whole seconds, so two made in one second tie; their ids say nothing of
    which came first.  Within a tie the order is that of their creator notes (whose times are fractional; a
    cloudspace without one yet comes last: the run that made it writes it after it listed, so later than any it
    saw), then the id.  Only a tie costs reads (the tied cloudspaces' notes)."""
    found = [cs for cs in client.cloudspaces() if cs["name"] == name and cs.get("location") == location]
    seconds: dict[object, int] = {}
    for cs in found:
        seconds[cs.get("creation_time") or 0] = seconds.get(cs.get("creation_time") or 0, 0) + 1
    noted: dict[str, float] = {}
    for cs in found:
        if seconds[cs.get("creation_time") or 0] > 1:
            noted[str(cs.get("cloudspace_id"))] = _creator_noted_at(client, str(cs.get("cloudspace_id")))
    return sorted(
        found,
        key=lambda cs: (
            cs.get("creation_time") or 0,
            noted.get(str(cs.get("cloudspace_id")), 0.0),
            str(cs.get("cloudspace_id")),
        ),
    )


def _creator_noted_at(client: WhiteskyClient, cloudspace_id: str) -> float:
    """When the cloudspace's earliest creator note was written (infinity: none yet, or the cloudspace is gone)."""
    try:
        notes = client.cloudspace_notes(cloudspace_id)
    except ApiError as exc:
        if exc.status == 404:
            return float("inf")
        raise
    times = [
        float(n["creation_time"])
        for n in notes
        if isinstance(n, dict)
        and isinstance(n.get("creation_time"), (int, float))
        and ownership_notes.note_creator(n.get("title"), n.get("content")) is not None
    ]
    return min(times, default=float("inf"))


def cloudspace_by_name(client: WhiteskyClient, name: str, location: str) -> dict[str, Any] | None:
    """The cloudspace called ``name`` in ``location`` (the earliest of several), or None."""
    found = cloudspaces_named(client, name, location)
    return found[0] if found else None


_VIEW = ("cloudspace_id", "name", "location", "status", "private_network")


def view(cs: Mapping[str, Any] | None) -> CloudspaceView:
    """A cloudspace as the modules return it (empty for none): the platform's fields, as it gives them."""
    return cast("CloudspaceView", {k: cs.get(k) for k in _VIEW}) if cs else {}


def info(client: WhiteskyClient, *, name: str | None = None, location: str | None = None) -> dict[str, Any]:
    """Core of ``cloudspace_info``."""
    spaces = client.cloudspaces()
    if name:
        spaces = [c for c in spaces if c["name"] == name]
    if location:
        spaces = [c for c in spaces if c.get("location") == location]
    return {"cloudspaces": [view(c) for c in spaces]}


def ensure(
    client: WhiteskyClient,
    *,
    name: str,
    location: str,
    private_network: str | None = None,
    state: str = "present",
    cluster: str | None = None,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Core of ``cloudspace``: a cloudspace of this name exists in the location, or not (with ``cluster``: deleted
    only when that cluster created it and it holds nothing else)."""
    if cluster:
        naming.cluster_part(cluster)
    cs = cloudspace_by_name(client, name, location)
    result: dict[str, Any] = {"changed": False, "cloudspace": view(cs)}
    if state == "present":
        if cs:
            return result
        result.update(changed=True, diff={"before": {}, "after": {"name": name, "location": location}})
        if not check_mode:
            result["cloudspace"], result["created"] = claim(client, name, location, cluster, private_network)
        return result
    if not cs:
        return result
    if cluster:
        left = described(client, cs["cloudspace_id"], cluster)
        why = keep_reason(creator(client, cs["cloudspace_id"]), left, cluster)
        if why:
            result["kept"] = why
            return result
    result.update(changed=True, diff={"before": view(cs), "after": {}})
    if not check_mode:
        delete(client, cs)
    return result


def delete(client: WhiteskyClient, cs: Mapping[str, Any]) -> None:
    """Delete a cloudspace permanently (gone already counts as done); one that still has machines is refused."""
    try:
        gone_is_done(client.delete_cloudspace, cs["cloudspace_id"], permanently=True)
    except ApiError as exc:
        if exc.status == 409:
            raise InputError("cloudspace %r still has machines: %s" % (cs["name"], exc.message)) from None
        raise


def create(client: WhiteskyClient, name: str, location: str, private_network: str | None = None) -> CloudspaceView:
    """A new cloudspace, viewed; a lost answer is resolved by looking for one made since (by name)."""
    before = {c["cloudspace_id"] for c in cloudspaces_named(client, name, location)}

    def resolve(_exc: Exception) -> Resolved | None:  # the answer was lost: created after all?
        new = [c for c in cloudspaces_named(client, name, location) if c["cloudspace_id"] not in before]
        return Resolved(new[-1]["cloudspace_id"]) if new else None

    cs_id = client.create_cloudspace(name, location, private_network, resolve=resolve)
    return view(client.get_cloudspace(cs_id.value if isinstance(cs_id, Resolved) else cs_id))


def claim(
    client: WhiteskyClient, name: str, location: str, cluster: str | None = None, private_network: str | None = None
) -> tuple[CloudspaceView, bool]:
    """Create the cloudspace, record ``cluster`` as its creator (a note), and settle a race: ``(view, created)``.

    When another run made one of the same name first, ours is deleted again (it is empty) and theirs returned,
    with ``created`` False.
    """
    made = create(client, name, location, private_network)
    if cluster:
        try:
            record_creator(client, made["cloudspace_id"], cluster)
        except WhiteskyError as exc:  # a cloudspace no note claims would outlive every teardown: take it back
            try:
                delete(client, made)
            except WhiteskyError as again:
                raise PartialFailure(
                    "cloudspace %r (%s) was created, but its creator note could not be written (%s), nor could it be "
                    "deleted again (%s): delete it by hand" % (name, made["cloudspace_id"], exc, again),
                    {"cloudspace_created": True, "cloudspace_id": made["cloudspace_id"]},
                ) from None
            raise
    first = cloudspace_by_name(client, name, location)
    if first is not None and first["cloudspace_id"] != made["cloudspace_id"]:
        delete(client, made)
        return view(first), False
    return made, True


def record_creator(client: WhiteskyClient, cloudspace_id: str, cluster: str) -> None:
    """Write the note that makes ``cluster`` the cloudspace's creator; a lost answer is resolved by reading the
    notes (the note is sent again only when it is not there)."""
    title, content = ownership_notes.creator_note(cluster)

    def resolve(_exc: Exception) -> Resolved | None:
        # the answer was lost (or 502/503/504): is the note there after all?
        for note in client.cloudspace_notes(cloudspace_id):
            if note.get("title") == title and note.get("content") == content:
                return Resolved(note)
        return None

    client.create_cloudspace_note(cloudspace_id, title, content, resolve=resolve)


def creator(client: WhiteskyClient, cloudspace_id: str) -> str | None:
    """The cluster that holds the cloudspace (:func:`holder`, from its notes), or None."""
    return holder(client.cloudspace_notes(cloudspace_id))


def holder(notes: Sequence[Mapping[str, Any]]) -> str | None:
    """The cluster a cloudspace's notes say holds it (pure): the earliest creator note's, then each handover note
    written after it by the cluster that held it then, in order.  A handover from a cluster that did not hold the
    cloudspace at that point changes nothing."""
    current = None
    for note in sorted(notes, key=lambda n: (n.get("creation_time") or 0, str(n.get("id")))):
        title, content = note.get("title"), note.get("content")
        if current is None:
            current = ownership_notes.note_creator(title, content)
            continue
        handed = ownership_notes.note_handover(title, content)
        if handed is not None and handed[0] == current:
            current = handed[1]
    return current


def successor(left: Sequence[DescribedVM], cluster: str, members: Collection[str]) -> str | None:
    """The cluster a torn-down creator hands its cloudspace over to: when every VM left that it does not own is
    another cluster's (its marker read says so) or named like a machine of a cluster the cloudspace's notes name as
    a member, the first of those clusters by name; else None (a VM made by hand is left: the cloudspace is kept, and
    handed to nobody).  A handover is no proof of anything but the creator's leaving: the successor's teardown
    still deletes the cloudspace only when no VM it does not own is left in it."""
    owners = set()
    for vm in left:
        if vm["owner"] == cluster:
            continue
        owner = vm["owner"] or next((m for m in sorted(members) if markers.may_own(m, vm["name"])), None)
        if owner is None:
            return None
        owners.add(str(owner))
    return min(owners) if owners else None


def hand_over(client: WhiteskyClient, cs: Mapping[str, Any], cluster: str, to: str) -> bool:
    """Write the handover note of ``cluster``'s cloudspace to cluster ``to``, then look again: when no VM is left
    (``to``'s teardown ran meanwhile, having read the notes before this one), delete the cloudspace here.  Whether
    it was deleted."""
    title, content = ownership_notes.handover_note(cluster, to)
    client.create_cloudspace_note(cs["cloudspace_id"], title, content)
    if client.vms(cs["cloudspace_id"]):
        return False
    delete(client, cs)
    return True


def finish_handed_over(client: WhiteskyClient, cs: Mapping[str, Any], cluster: str) -> bool:
    """After ``cluster``'s teardown deleted its machines from a cloudspace it did not hold when it planned: when the
    cloudspace's notes now say ``cluster`` holds it (its creator handed it over meanwhile, :func:`holder`) and no VM
    is left, delete it here.  The creator writes its handover and then looks for VMs; this teardown deletes its VMs
    and then looks for the handover: whatever the interleaving, one of the two sees the other.  Whether it was
    deleted."""
    if holder(client.cloudspace_notes(cs["cloudspace_id"])) != cluster or client.vms(cs["cloudspace_id"]):
        return False
    delete(client, cs)
    return True


def keep_reason(
    made_by: str | None, left: Sequence[DescribedVM], cluster: str, going: Collection[str] = ()
) -> str | None:
    """Why cluster ``cluster``'s teardown must leave a cloudspace whose creator note names ``made_by`` and that holds
    the VMs ``left`` (described), once the names in ``going`` are deleted; None when it may delete it."""
    if made_by != cluster:
        return (
            "cluster %r did not create it (no note of it on the cloudspace)" % cluster
            if made_by is None
            else "cluster %r created it, not %r" % (made_by, cluster)
        )
    foreign = sorted(v["name"] for v in left if v["owner"] != cluster)
    if foreign:
        return "it holds %d machine(s) cluster %r does not own: %s" % (len(foreign), cluster, ", ".join(foreign))
    staying = sorted(v["name"] for v in left if v["name"] not in going)
    if staying:
        return "cluster %r's machines are still in it: %s" % (cluster, ", ".join(staying))
    return None
