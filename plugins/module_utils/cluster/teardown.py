# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster torn down (or one machine of it deleted): planned from what was read (:func:`plan_teardown`, pure),
then carried out (:func:`apply_teardown`) exactly: the planned machines deleted (their reservations released
first unless ``force``), the planned reservations released, the cluster's pools notes deleted from each cloudspace
that stays, each planned cloudspace deleted or handed over.  :func:`teardown` (the ``cluster`` module's
``state=absent``) runs it on the one runner of a converge (``ownership.converge``), holding the cluster's lease
on its cloudspace (none when only reservations are left), and says what it did, or, when it found nothing, where
it looked."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import summary
from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import world as cluster_world
from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.price import Price, held, price
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces, pools
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import converge as converge_runner
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.errors import CloudspaceGone
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    InputError,
    WhiteskyError,
    gone_is_done,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import plandoc, planfile, reviewed, sweep
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import speccheck
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool
from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import diff_lines
from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import CloudspaceView
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import not_owned

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.machines.plans import MachinesPlan
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.typed import ClusterSpec
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
    world: cluster_world.ClusterWorld,
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


#: How often a run starts again from its reads when a teardown deletes the cloudspace it waited on.
RESTARTS = 3


def gone_again(spec: ClusterSpec) -> WhiteskyError:
    """The failure of a run whose cloudspace another run deleted :data:`RESTARTS` times while it waited."""
    return WhiteskyError(
        "cluster %r: its cloudspace was deleted by another run %d times while this run waited for the cluster; "
        "run it again" % (spec.name, RESTARTS)
    )


def _teardown_result(p: TeardownPlan, check_mode: bool = False) -> dict[str, Any]:
    """What a teardown would do (check mode), or the frame of what it did, with the lines a person reads
    (``summary``) and a warning for each machine deleted by force with vGPUs it leaves billed."""
    view = p.view()
    planned = {
        "deleted": view["delete"],
        "released": view["release"],
        "cloudspaces_deleted": [c["cloudspace_id"] for c in view["cloudspaces"] if c["delete"]],
    }
    out = dict(planned, changed=p.changed, plan=view, spec=p.spec.as_dict())
    currency = view["price"]["currency"]
    out["diff"] = {
        "before": diff_lines("cloudspace", [c["name"] for c in view["cloudspaces"] if c["delete"]])
        + diff_lines("machine", view["delete"])
        + diff_lines("vgpus", [view["price"]["vgpus_before"]])
        + diff_lines("price", summary.price_lines(view["price"], "before")),
        "after": diff_lines("vgpus", [view["price"]["vgpus_after"]])
        + diff_lines("price", summary.price_lines(view["price"], "after")),
    }
    out["summary"] = summary.teardown_lines(view, check_mode)
    warnings = [
        summary.left_billed(name, count, view["price"]["per_vgpu_hour"], currency, p.spec.location)
        for name, count in sorted(p.left.items())
    ]
    if warnings:
        out["warnings"] = warnings
    return out


def _say_found_nothing(
    client: WhiteskyClient,
    p: TeardownPlan,
    machine: str | None,
    parallel: int,
    out: dict[str, Any],
    look_elsewhere: bool,
) -> None:
    """A teardown that changes nothing found nothing of that name: a warning says where it looked and, with
    ``look_elsewhere``, where the customer has a cluster (or machine) of that name elsewhere (read only then:
    ``world.elsewhere``; the controller's finalizers, which act on what they recorded, do not look)."""
    if out["changed"]:
        return
    spec = p.spec
    found = dict(cluster_world.elsewhere(client, spec, machine, parallel)) if look_elsewhere else None
    looked = [s["cloudspace_id"] for s in p.cloudspaces]
    text = summary.found_nothing(spec.name, spec.cloudspace, spec.location, machine, looked, found)
    out.setdefault("warnings", []).append(text)


def teardown(
    client: WhiteskyClient,
    raw_spec: Mapping[str, Any] | None,
    check_mode: bool = False,
    machine: str | None = None,
    force: bool = False,
    delete_cloudspace: bool = True,
    parallel: int = 32,
    variables: Iterable[str] = (),
    plan_file: str | None = None,
    look_elsewhere: bool = True,
) -> dict[str, Any]:
    """Core of ``cluster`` with ``state=absent``: every machine the cluster owns (or only ``machine``) deleted, every
    reservation it owns released, and each cloudspace of the name that the cluster created and that holds nothing
    else deleted.  In check mode, ``plan_file`` also writes the reservations it would release to that file, a
    reclaim plan (``reclaim.planfile``) that ``vgpu_reclaim plan=FILE`` applies after review."""
    spec = speccheck.check(raw_spec, variables)
    if plan_file is not None:
        if machine is not None:
            raise InputError("plan_file is for a whole cluster's teardown, not for deleting one machine")
        planfile.check_new(plan_file, check_mode)

    down = _Teardown(client, spec, machine, force, delete_cloudspace, parallel, plan_file, look_elsewhere)
    return converge_runner.converge(client, down, check_mode)


class _Teardown(converge_runner.Concern[cluster_world.ClusterWorld, TeardownPlan]):
    """A cluster torn down, or one machine of it deleted."""

    restarts = RESTARTS

    def __init__(
        self,
        client: WhiteskyClient,
        spec: ClusterSpec,
        machine: str | None,
        force: bool,
        delete_cloudspace: bool,
        parallel: int,
        plan_file: str | None,
        look_elsewhere: bool,
    ) -> None:
        self.client, self.spec, self.machine, self.force = client, spec, machine, force
        self.delete_cloudspace, self.parallel, self.plan_file, self.look_elsewhere = (
            delete_cloudspace,
            parallel,
            plan_file,
            look_elsewhere,
        )

    def read(self) -> cluster_world.ClusterWorld:
        return cluster_world.read(self.client, self.spec, teardown=True, parallel=self.parallel)

    def plan(self, world: cluster_world.ClusterWorld) -> TeardownPlan:
        return plan_teardown(self.spec, world, self.machine, self.force, self.delete_cloudspace)

    def lease(self, plan: TeardownPlan) -> converge_runner.Where | None:
        # nothing but reservations left, in no cloudspace to hold a lease on: none
        return converge_runner.Where(plan.cloudspaces[0]["cloudspace_id"], self.spec.name) if plan.cloudspaces else None

    def nothing_done(self) -> dict[str, Any]:
        return {"deleted": [], "released": [], "cloudspaces_deleted": []}

    def apply(self, plan: TeardownPlan, done: dict[str, Any]) -> None:
        apply_teardown(self.client, plan, done, self.parallel)

    def result(self, plan: TeardownPlan, done: dict[str, Any] | None, check_mode: bool) -> dict[str, Any]:
        out = _teardown_result(plan, check_mode)
        if done is not None:
            return dict(out, **converge_runner.done_sorted(done))
        if self.plan_file is not None:  # check mode (planfile.check_new refused it otherwise)
            return dict(out, **write_reclaim_plan(self.client, plan, self.plan_file))
        _say_found_nothing(self.client, plan, self.machine, self.parallel, out, self.look_elsewhere)
        return out

    def failed(self, exc: WhiteskyError, done: dict[str, Any]) -> WhiteskyError:
        return converge_runner.halfway(exc, done)

    def gone(self, exc: CloudspaceGone) -> WhiteskyError:
        return gone_again(self.spec)
