# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cloudspaces by name, and who created them (pure Python).

The platform keeps no owner for a cloudspace, but it keeps notes on it.  A cloudspace a cluster creates gets a
note at once (``ownership.creator_note``): the only proof a teardown accepts.  A cluster's teardown deletes a
cloudspace only when its earliest creator note names the cluster and no VM the cluster does not own is left in it.

Two runs that find no cloudspace of a name both create one; the platform lets both exist.  Every run then takes the
same one, the earliest (:func:`cloudspaces_named`), and the run whose new cloudspace is not it deletes its own,
still empty, at once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ansible_collections.whitesky.capvco.plugins.module_utils import ownership
from ansible_collections.whitesky.capvco.plugins.module_utils.errors import (
    ApiError,
    InputError,
    PartialFailure,
    Resolved,
    WhiteskyError,
    gone_is_done,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.vms import described

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.records import CloudspaceView, DescribedVM


def cloudspaces_named(client: WhiteskyClient, name: str, location: str) -> list[dict[str, Any]]:
    """The cloudspaces called ``name`` in ``location``, the earliest first (creation time, then id): two runs that
    each created one agree on which is the cluster's."""
    found = [cs for cs in client.cloudspaces() if cs["name"] == name and cs.get("location") == location]
    return sorted(found, key=lambda cs: (cs.get("creation_time") or 0, str(cs.get("cloudspace_id"))))


def cloudspace_by_name(client: WhiteskyClient, name: str, location: str) -> dict[str, Any] | None:
    """The cloudspace called ``name`` in ``location`` (the earliest of several), or None."""
    found = cloudspaces_named(client, name, location)
    return found[0] if found else None


_VIEW = ("cloudspace_id", "name", "location", "status", "private_network")


def view(cs: Mapping[str, Any] | None) -> CloudspaceView:
    """A cloudspace as the modules return it (empty for none): the platform's fields, as it gives them."""
    return cast("CloudspaceView", {k: cs.get(k) for k in _VIEW}) if cs else {}


def info(
    client: WhiteskyClient, *, name: str | None = None, location: str | None = None, check_mode: bool = False
) -> dict[str, Any]:
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
        ownership.cluster_part(cluster)
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
    title, content = ownership.creator_note(cluster)

    def resolve(_exc: Exception) -> Resolved | None:
        # the answer was lost (or 502/503/504): is the note there after all?
        for note in client.cloudspace_notes(cloudspace_id):
            if note.get("title") == title and note.get("content") == content:
                return Resolved(note)
        return None

    client.create_cloudspace_note(cloudspace_id, title, content, resolve=resolve)


def creator(client: WhiteskyClient, cloudspace_id: str) -> str | None:
    """The cluster a cloudspace's earliest creator note names, or None."""
    notes = sorted(client.cloudspace_notes(cloudspace_id), key=lambda n: (n.get("creation_time") or 0, n.get("id")))
    for note in notes:
        owner = ownership.note_creator(note.get("title"), note.get("content"))
        if owner is not None:
            return owner
    return None


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
