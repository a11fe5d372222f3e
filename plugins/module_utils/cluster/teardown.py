# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster torn down (or one machine of it deleted): planned from what was read (:func:`plan_teardown`, pure),
then carried out (:func:`apply_teardown`) exactly: the planned machines deleted (their reservations released
first unless ``force``), the planned reservations released, the cluster's pools notes deleted from each cloudspace
that stays, each planned cloudspace deleted or handed over."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.plan import Price, held, price
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces, pools
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, gone_is_done
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import plandoc, reviewed, sweep
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool
from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import CloudspaceView
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import not_owned

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.world import ClusterWorld
    from ansible_collections.whitesky.capvco.plugins.module_utils.machines.plans import MachinesPlan
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.clusterspec import ClusterSpec
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import DescribedVM, Reservation


class TeardownSpace(CloudspaceView):
    """One cloudspace of a teardown: its view, whether it is deleted (or why it is ``kept``), the machines of the
    cluster in it that go, and the cluster it is handed over to (``cloudspaces.successor``) when it is kept for
    another cluster's machines."""

    delete: bool
    kept: str | None
    machines: list[str]
    handover: str | None
    #: the ids of the cluster's pools notes deleted from it (a whole teardown of a cloudspace that stays)
    pools_notes: list[str]


class TeardownView(TypedDict):
    """A :class:`TeardownPlan` as the ``cluster`` module returns it (``plan``)."""

    cloudspaces: list[TeardownSpace]
    delete: list[str]
    release: list[str]
    price: Price


@dataclass(frozen=True)
class TeardownPlan:
    """What a teardown changes: per cloudspace its plan and its machines' plan (``pools.plan_machines``) with the
    reservations each graceful delete releases first; the reservations released after the deletes."""

    spec: ClusterSpec
    cloudspaces: list[TeardownSpace]
    machines: list[MachinesPlan | None]
    graceful: dict[str, list[Reservation]]
    release: list[Reservation]
    force: bool
    #: every reservation the cluster owns goes (a whole teardown), not only the deleted machines'
    sweep_all: bool
    price: Price
    #: ``{machine: reservations}`` a delete by force of one machine leaves reserved, and billed
    left: dict[str, int] = field(default_factory=dict)
    #: the teardown may delete the cloudspaces it empties (``delete_cloudspace``)
    delete_cloudspace: bool = True

    @property
    def changed(self) -> bool:
        """Whether applying it changes anything: a machine deleted, a reservation released, a cloudspace deleted,
        or the cluster's pools note deleted where a cloudspace stays."""
        return bool(self.release or any(s["machines"] or s["delete"] or s["pools_notes"] for s in self.cloudspaces))

    def view(self) -> TeardownView:
        return {
            "cloudspaces": self.cloudspaces,
            "delete": sorted(n for s in self.cloudspaces for n in s["machines"]),
            "release": sorted(i["vgpu_name"] for i in self.release),
            "price": self.price,
        }


def plan_teardown(
    spec: ClusterSpec,
    world: ClusterWorld,
    machine: str | None = None,
    force: bool = False,
    delete_cloudspace: bool = True,
) -> TeardownPlan:
    """What tearing the cluster down (or deleting ``machine`` of it) changes, from the ``world`` that
    ``world.read`` returned with ``teardown=True`` (pure).  A ``machine`` the cluster does not own is refused."""
    cluster = spec.name
    inventory = world["inventory"]
    spaces: list[TeardownSpace] = []
    machines: list[MachinesPlan | None] = []
    graceful: dict[str, list[Reservation]] = {}
    left: dict[str, int] = {}
    owned: list[DescribedVM] = []  # the cluster's machines in its cloudspaces, and those that go
    gone: list[DescribedVM] = []
    for space in world["spaces"]:
        owned += [v for v in space["vms"] if v["owner"] == cluster]
        going = [v for v in space["vms"] if v["owner"] == cluster]
        if machine is not None:
            going = [v for v in space["vms"] if v["name"] == machine]
            if going and going[0]["owner"] != cluster:
                raise not_owned(machine, cluster, going[0].get("description"))
        why = cloudspaces.keep_reason(space["creator"], space["vms"], cluster, {v["name"] for v in going})
        handover = None
        if machine is not None or not delete_cloudspace:
            why = why or "not asked to delete it"
        elif why is not None and space["creator"] == cluster:  # kept for other clusters' machines: theirs now
            handover = cloudspaces.successor(space["vms"], cluster, space["members"])
            why += "; handed over to cluster %r, whose teardown deletes it" % handover if handover else ""
        names = [v["name"] for v in going]
        gone += going
        # the pools note goes with the cluster: from a cloudspace that stays (one that goes takes its notes along)
        noted = [n["id"] for n in space["pools_notes"]] if machine is None and why is not None else []
        spaces.append(
            {
                **space["cloudspace"],
                "delete": why is None,
                "kept": why,
                "machines": names,
                "handover": handover,
                "pools_notes": noted,
            }
        )
        planned = None
        if names:
            wanted = (Pool(None, tuple(names)),)
            planned = pools.plan_machines(wanted, space["vms"], cluster, present=False, exclusive=False)
            if not force:
                graceful.update((n, inventory.owned(cluster, n)) for n in names)
            elif machine is not None:
                left.update((n, len(inventory.owned(cluster, n))) for n in names if inventory.owned(cluster, n))
        machines.append(planned)
    if machine is None:
        release = inventory.owned(cluster)  # everything it owns, attached or not, recycle bin included
        _refuse_live_elsewhere(spec, release, [s["cloudspace"]["cloudspace_id"] for s in world["spaces"]])
    else:
        release = [i for items in graceful.values() for i in items]
    return TeardownPlan(
        spec=spec,
        cloudspaces=spaces,
        machines=machines,
        graceful=graceful,
        release=release,
        force=force,
        sweep_all=machine is None,
        price=price(
            world,
            held(owned, len(spaces), len(inventory.owned(cluster))),
            held([], 0, 0),
            held(gone, sum(1 for s in spaces if s["delete"]), len(release)),
        ),
        left=left,
        delete_cloudspace=delete_cloudspace,
    )


def _refuse_live_elsewhere(spec: ClusterSpec, release: Iterable[Reservation], torn_down: Collection[str]) -> None:
    """A teardown of the wrong cloudspace (a typo in ``cluster.cloudspace``) would strip the GPUs off the cluster's
    running machines: refuse, before anything, to release a reservation attached to a machine in a cloudspace that
    this teardown does not empty."""
    elsewhere: dict[Any, set[Any]] = {}  # {cloudspace id: VM names}, as the platform gives them
    for item in release:
        vm = item.get("virtual_machine")
        if vm and vm.get("id") is not None and vm.get("cloudspace_id") not in torn_down:
            elsewhere.setdefault(vm.get("cloudspace_id"), set()).add(vm.get("name"))
    if elsewhere:
        raise InputError(
            "cluster %r has vGPUs attached to machines in other cloudspaces than %r (%s), which this teardown does "
            "not delete; give that cloudspace as cluster.cloudspace. Nothing was changed"
            % (
                spec.name,
                spec.cloudspace,
                "; ".join("%s: %s" % (cs, ", ".join(sorted(names))) for cs, names in sorted(elsewhere.items())),
            )
        )


def write_reclaim_plan(client: WhiteskyClient, p: TeardownPlan, path: str) -> dict[str, Any]:
    """The teardown's releases, written as a reclaim plan of scope ``cluster`` (``reviewed.write_plan``)."""
    scope = plandoc.scope_of("cluster", p.spec.location, p.spec.name)
    return reviewed.write_plan(client, path, scope, p.release, "whitesky.capvco.cluster")


def apply_teardown(client: WhiteskyClient, p: TeardownPlan, done: dict[str, list[str]], parallel: int) -> None:
    """Carry out the teardown's plan; ``done`` says what was done, also when a step fails halfway."""
    spec = p.spec
    for space, planned in zip(p.cloudspaces, p.machines, strict=True):
        if planned is None:
            continue
        scope = pools.Scope(
            space["cloudspace_id"], spec.name, spec.location, state="absent", force=p.force, parallel=parallel
        )
        result: dict[str, Any] = {"created": [], "deleted": [], "machines": []}
        pool = (Pool(None, tuple(space["machines"])),)
        try:
            pools.apply_machines(client, scope, pool, planned, {}, p.graceful, result)
        finally:
            done["deleted"] += result["deleted"]
            done["released"] += [i["vgpu_name"] for n in result["deleted"] for i in p.graceful.get(n, ())]
    if p.sweep_all:
        # the planned reservations by id, each as it stands now (the deletes above detached or released some)
        only = {i["vgpu_id"] for i in p.release}
        swept = sweep.release_cluster(client, location=spec.location, cluster=spec.name, parallel=parallel, only=only)
        done["released"] += [r["vgpu_name"] for r in swept["released"]]
    for space in p.cloudspaces:
        if space["pools_notes"]:
            lease.fence(client, "deleting the pools note")
        for note_id in space["pools_notes"]:
            gone_is_done(client.delete_cloudspace_note, space["cloudspace_id"], note_id)
    for space in p.cloudspaces:
        if space["delete"]:
            cloudspaces.delete(client, space)
            done["cloudspaces_deleted"].append(space["cloudspace_id"])
        elif space["handover"] and cloudspaces.hand_over(client, space, spec.name, space["handover"]):
            done["cloudspaces_deleted"].append(space["cloudspace_id"])  # its successor had gone meanwhile
        elif (
            p.sweep_all
            and p.delete_cloudspace
            and space["machines"]
            and cloudspaces.finish_handed_over(client, space, spec.name)
        ):
            done["cloudspaces_deleted"].append(space["cloudspace_id"])  # handed over to it while it tore down
