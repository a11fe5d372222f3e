# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a cluster's plan is made from, read in two parallel rounds (a run reads nothing else to decide what to do):
the cloudspaces of the cluster's name, their VMs with their markers, the location's reservations, GPU profiles,
images (a converge that may create machines) and prices, and each cloudspace's notes (a teardown's: who holds it; a
converge's: the cluster's pools note)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.cloudspaces import cloudspaces_named
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers as ownership_markers
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes as ownership_notes
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import poolsread
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import run_parallel
from ansible_collections.whitesky.capvco.plugins.module_utils.world import vms
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import Inventory
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import described

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.typed import ClusterSpec
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import CloudspaceView, DescribedVM

_K = TypeVar("_K")


class PoolsNote(TypedDict):
    """A note on the cloudspace that is the cluster's pools note by its head (``poolsread.pools_note_cluster``), whether
    the rest parses or not: its id and content."""

    id: str
    content: str


class ClusterSpace(TypedDict):
    """One cloudspace of the cluster's name as :func:`read` gives it: its view, its VMs (described) and the
    cluster its creator note names (read for a teardown only)."""

    cloudspace: CloudspaceView
    vms: list[DescribedVM]
    creator: str | None
    #: the other clusters its notes name as having machines in it (a teardown's read; empty otherwise)
    members: list[str]
    #: the cluster's pools notes on it, oldest first (one, unless someone wrote more)
    pools_notes: list[PoolsNote]


class ClusterWorld(TypedDict):
    """What :func:`read` reads for a plan: the same-named cloudspaces (earliest first), the location's
    reservations, its price list, GPU profiles and VM images (as the platform gives them; ``images`` is None where
    they were not read: a teardown, or a spec with no machine to have)."""

    spaces: list[ClusterSpace]
    inventory: Inventory
    price: dict[str, Any]
    profiles: list[dict[str, Any]]
    images: list[dict[str, Any]] | None


def _order(note: Mapping[str, Any]) -> tuple[float, str]:
    stamp = note.get("creation_time")
    return (float(stamp) if isinstance(stamp, (int, float)) else float("inf"), str(note.get("id")))


def pools_notes(notes: Iterable[Any], cluster: str) -> list[PoolsNote]:
    """The notes that are ``cluster``'s pools notes by their head, oldest first (creation time, then id)."""
    found = [
        n
        for n in notes
        if isinstance(n, dict) and poolsread.pools_note_cluster(n.get("title"), n.get("content")) == cluster
    ]
    return [{"id": str(n.get("id")), "content": str(n.get("content"))} for n in sorted(found, key=_order)]


def recorded(client: WhiteskyClient, spec: ClusterSpec) -> tuple[CloudspaceView, list[PoolsNote]] | None:
    """The cluster's cloudspace (the first of its name in its location) and the cluster's pools notes on it, oldest
    first: what a scale of one pool reads its other pools from; None when there is no such cloudspace."""
    spaces = cloudspaces_named(client, spec.cloudspace, spec.location)
    if not spaces:
        return None
    return cloudspaces.view(spaces[0]), pools_notes(client.cloudspace_notes(spaces[0]["cloudspace_id"]), spec.name)


class SpaceElsewhere(TypedDict):
    """A cloudspace outside where a teardown looked whose notes name the cluster (its creator, a member, its pools
    note), with the cluster's machines there (by their marker)."""

    name: str
    location: str
    machines: list[str]


class MachineElsewhere(TypedDict):
    """A VM of the name a delete of one machine was given (or that name with the cluster's prefix), where it is and
    the cluster its marker names (None: none)."""

    name: str
    cloudspace: str
    location: str
    owner: str | None


class Elsewhere(TypedDict):
    """What the customer has of a cluster or machine of the name outside where a delete that found nothing looked
    (:func:`elsewhere`)."""

    cloudspaces: list[SpaceElsewhere]
    #: ``{location: count}`` of the cluster's vGPU reservations in the customer's other locations
    reservations: dict[str, int]
    machines: list[MachineElsewhere]


def elsewhere(client: WhiteskyClient, spec: ClusterSpec, machine: str | None = None, parallel: int = 32) -> Elsewhere:
    """Where the customer has the cluster (or, with ``machine``, a VM of that name) outside the cloudspace of the
    spec's name in its location, read only when a delete found nothing there: each other cloudspace's notes (those
    that name the cluster are its, with its machines by their marker) and the cluster's reservations in each other
    location; for a machine, every cloudspace's VMs of the name (and of ``<cluster>-<name>`` when the name lacks
    the cluster's prefix), each described for its owner."""
    spaces = [cs for cs in client.cloudspaces() if isinstance(cs, dict)]
    looked = {
        cs["cloudspace_id"]
        for cs in spaces
        if cs.get("name") == spec.cloudspace and cs.get("location") == spec.location
    }
    out: Elsewhere = {"cloudspaces": [], "reservations": {}, "machines": []}
    if machine is not None:
        wanted = {machine} | (
            {"%s-%s" % (spec.name, machine)} if not ownership_markers.may_own(spec.name, machine) else set()
        )
        listed = _read({cs["cloudspace_id"]: partial(client.vms, cs["cloudspace_id"]) for cs in spaces})
        jobs = {
            (cs["cloudspace_id"], vm["vm_id"]): partial(vms.describe, client, cs["cloudspace_id"], vm)
            for cs in spaces
            for vm in listed[cs["cloudspace_id"]]
            if vm.get("name") in wanted and not (cs["cloudspace_id"] in looked and vm.get("name") == machine)
        }
        found, _failed = run_parallel(jobs, parallel)
        by_id = {cs["cloudspace_id"]: cs for cs in spaces}
        out["machines"] = sorted(
            (
                {"name": str(v["name"]), "cloudspace": str(by_id[cs_id].get("name")),
                 "location": str(by_id[cs_id].get("location")), "owner": v["owner"]}
                for (cs_id, _vm), v in found.items()
                if v is not None
            ),
            key=lambda m: (m["location"], m["cloudspace"], m["name"]),
        )  # fmt: skip
        return out
    others = [cs for cs in spaces if cs["cloudspace_id"] not in looked]
    notes_of = _read({cs["cloudspace_id"]: partial(client.cloudspace_notes, cs["cloudspace_id"]) for cs in others})
    theirs = [
        cs
        for cs in others
        if spec.name in ownership_notes.clusters_in(notes_of[cs["cloudspace_id"]])
        or pools_notes(notes_of[cs["cloudspace_id"]], spec.name)
    ]
    locations = [loc for loc in client.location_names() if loc != spec.location]
    second: dict[tuple[str, str], Callable[[], Any]] = {
        ("vms", cs["cloudspace_id"]): partial(described, client, cs["cloudspace_id"], spec.name, parallel)
        for cs in theirs
    }
    second.update({("vgpus", loc): partial(Inventory, client, loc) for loc in locations})
    got = _read(second)
    out["cloudspaces"] = sorted(
        (
            {"name": str(cs.get("name")), "location": str(cs.get("location")),
             "machines": sorted(v["name"] for v in got[("vms", cs["cloudspace_id"])] if v["owner"] == spec.name)}
            for cs in theirs
        ),
        key=lambda c: (c["location"], c["name"]),
    )  # fmt: skip
    counts = {loc: len(got[("vgpus", loc)].owned(spec.name)) for loc in locations}
    out["reservations"] = {loc: n for loc, n in sorted(counts.items()) if n}
    return out


def _read(jobs: Mapping[_K, Callable[[], Any]]) -> dict[_K, Any]:
    got, failed = run_parallel(jobs, len(jobs))
    if failed:
        raise next(iter(failed.values()))
    return got


def read(client: WhiteskyClient, spec: ClusterSpec, teardown: bool = False, parallel: int = 32) -> ClusterWorld:
    """The world a plan needs, read in two parallel rounds (a converge reads the first same-named cloudspace only;
    a teardown reads each one's notes: who holds it, and the other clusters noted as having machines in it; a
    converge whose spec has machines reads the location's images, so that the plan refuses an image the location
    lacks before anything is written, and prices each pool's boot disk: one whose spec names no ``diskSize`` is its
    image's)."""
    jobs: dict[str, Callable[[], Any]] = {
        "spaces": lambda: cloudspaces_named(client, spec.cloudspace, spec.location),
        "inventory": lambda: Inventory(client, spec.location),
        "price": lambda: client.prices(spec.location),
    }
    if not teardown and any(pool.gpu for pool in spec.pools):
        jobs["profiles"] = lambda: client.gpu_profiles(spec.location)
    if not teardown and (spec.names or any(p.image is not None and not p.disk_size for p in spec.pools)):
        # a pool at zero whose disk is its image's is priced (and noted) with the image's boot disk too
        jobs["images"] = lambda: client.images(spec.location)
    first = _read(jobs)
    spaces = first["spaces"] if teardown else first["spaces"][:1]
    second: dict[tuple[str, str], Callable[[], Any]] = {}
    for cs in spaces:
        cs_id = cs["cloudspace_id"]
        second[("vms", cs_id)] = partial(described, client, cs_id, spec.name, parallel)
        second[("notes", cs_id)] = partial(client.cloudspace_notes, cs_id)
    got = _read(second)
    out: list[ClusterSpace] = []
    for cs in spaces:
        notes = got.get(("notes", cs["cloudspace_id"])) or []
        holder = cloudspaces.holder(notes) if teardown else None
        out.append(
            {
                "cloudspace": cloudspaces.view(cs),
                "vms": got[("vms", cs["cloudspace_id"])],
                "creator": holder,
                "members": sorted(ownership_notes.clusters_in(notes) - {holder}) if teardown else [],
                "pools_notes": pools_notes(notes, spec.name),
            }
        )
    return {
        "spaces": out,
        "inventory": first["inventory"],
        "price": first["price"],
        "profiles": first.get("profiles", []),
        "images": first.get("images"),
    }
