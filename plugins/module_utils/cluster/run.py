# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``cluster`` module's core: a whole cluster from its spec, checked, read, planned, then applied, on the one
runner of a converge (``ownership.converge``).

1. The spec is checked whole (``speccheck.check``): a bad one fails before anything is read.
2. The world is read (``world.read``).
3. One plan is made (``plan.plan`` for a converge; a teardown's is ``teardown``'s), pure.
4. Check mode returns the plan's view.  The real run holds the cluster's lease (on the cloudspace it claims first,
   when there is none), reads and plans again once it took it (what was read before may be stale), applies that
   plan (``apply.apply``) and reports what it did, also when it fails halfway; a run whose cloudspace a teardown
   deleted meanwhile starts again (``teardown.RESTARTS``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import progress, summary
from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import world as cluster_world
from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.apply import apply
from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.plan import ClusterPlan, PlanView, plan
from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.price import claimed
from ansible_collections.whitesky.capvco.plugins.module_utils.cluster.teardown import RESTARTS, gone_again, teardown
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces, pools
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import converge as converge_runner
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes as ownership_notes
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import poolsread
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.errors import CloudspaceGone
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    InputError,
    WhiteskyError,
    known,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import clusterspec, speccheck, specnote
from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import diff_lines

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.typed import ClusterSpec
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import CloudspaceView


def _result(p: ClusterPlan, done: Mapping[str, Any] | None = None, check_mode: bool = False) -> dict[str, Any]:
    """The module's result: the plan's view, and what was done (in check mode: what the plan would do), with the
    lines a person reads (``summary``)."""
    view: PlanView = p.view()
    if done is None:
        done = converge_runner.done_sorted(
            {
                "cloudspace_created": view["cloudspace"]["create"],
                "created": [c["name"] for c in view["create"]],
                "deleted": list(view["delete"]),
                "reserved": sorted("%s/%02d" % (r["machine"], r["slot"]) for r in view["reserve"]),
                "released": list(view["release"]),
            }
        )
    if done.get("cloudspace_created") and not view["cloudspace"]["create"]:
        # this run made the cloudspace under the lease, then planned again from fresh reads: the plan it returns
        # says it created it, as its check mode did
        view["cloudspace"] = dict(view["cloudspace"], create=True)  # type: ignore[typeddict-item]
        view["price"] = claimed(view["price"])
    space = diff_lines("cloudspace", [view["cloudspace"]["name"]])
    diff = {
        "before": ([] if view["cloudspace"]["create"] else space)
        + diff_lines("machine", sorted(view["keep"] + view["delete"]))
        + diff_lines("vgpus", [view["price"]["vgpus_before"]]),
        "after": space
        + diff_lines("machine", sorted(view["keep"] + [c["name"] for c in view["create"]]))
        + diff_lines("vgpus", [view["price"]["vgpus_after"]]),
    }
    diff["before"] += diff_lines("price", summary.price_lines(view["price"], "before"))
    diff["after"] += diff_lines("price", summary.price_lines(view["price"], "after"))
    out = dict(done, changed=p.changed, plan=view, spec=p.spec.as_dict(), diff=diff)
    out["summary"] = summary.converge_lines(view, check_mode)
    out["machines"] = [
        {
            "name": n,
            "pool": pool.name,
            "gpu": dict(type=pool.gpu.type, count=pool.gpu.count, driverVersion=pool.gpu.driver_version)
            if pool.gpu
            else {},
        }
        for pool in p.spec.pools
        for n in pool.names
    ]
    return out


def converge(
    client: WhiteskyClient,
    raw_spec: Mapping[str, Any] | None,
    check_mode: bool = False,
    max_hourly_cost: float | None = None,
    parallel: int = 32,
    variables: Iterable[str] = (),
    scale: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Core of ``cluster`` with ``state=present``; with ``scale`` (``{pool, replicas}``), the spec is the cluster
    alone and its pools are those it recorded (its pools note), the one pool's count changed (:func:`scaled`)."""
    base = speccheck.check(raw_spec, variables)
    if max_hourly_cost is not None and not 0 <= max_hourly_cost < math.inf:
        raise InputError("max_hourly_cost must be a number of 0 or more, got %r" % max_hourly_cost)
    target: tuple[str, int] | None = None
    if scale is not None:
        extra = sorted(k for k in raw_spec or {} if k != "cluster")
        if extra:
            raise InputError(
                "with scale, the spec is the cluster alone (its pools are those it recorded), got also %s; nothing "
                "was changed" % ", ".join(extra)
            )
        pool, replicas = str(scale.get("pool") or ""), scale.get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or not 0 <= replicas <= clusterspec.MAX_REPLICAS:
            raise InputError(
                "scale.replicas must be an integer from 0 to %d, got %r" % (clusterspec.MAX_REPLICAS, replicas)
            )
        target = (pool, replicas)
    return converge_runner.converge(
        client, _Converge(client, base, target, parallel, max_hourly_cost, scale), check_mode
    )


class _Converge(converge_runner.Concern[tuple["ClusterSpec", cluster_world.ClusterWorld], ClusterPlan]):
    """A cluster converged to its spec (a scale's: the spec its record gives, read again with the world)."""

    restarts = RESTARTS

    def __init__(
        self,
        client: WhiteskyClient,
        base: ClusterSpec,
        target: tuple[str, int] | None,
        parallel: int,
        max_hourly_cost: float | None,
        scale: Mapping[str, Any] | None,
    ) -> None:
        self.client, self.base, self.target, self.parallel = client, base, target, parallel
        self.max_hourly_cost, self.scale = max_hourly_cost, scale
        self.made: str | None = None  # the cloudspace this run claimed

    def read(self) -> tuple[ClusterSpec, cluster_world.ClusterWorld]:
        spec = self.base if self.target is None else scaled(self.client, self.base, *self.target)
        return spec, cluster_world.read(self.client, spec, parallel=self.parallel)

    def plan(self, world: tuple[ClusterSpec, cluster_world.ClusterWorld]) -> ClusterPlan:
        return _plan(*world, self.max_hourly_cost, self.scale)

    def lease(self, plan: ClusterPlan) -> converge_runner.Where:
        return converge_runner.Where(plan.cloudspace["cloudspace_id"], plan.spec.name)

    def make(self, plan: ClusterPlan, done: dict[str, Any]) -> str:
        self.made = _claim(self.client, plan.spec, done)["cloudspace_id"]
        return self.made

    def nothing_done(self) -> dict[str, Any]:
        self.made = None
        return {"cloudspace_created": False, "created": [], "deleted": [], "reserved": [], "released": []}

    def apply(self, plan: ClusterPlan, done: dict[str, Any]) -> None:
        apply(self.client, plan, known(self._space(plan), "the cluster's cloudspace"), done, self.parallel)

    def result(self, plan: ClusterPlan, done: dict[str, Any] | None, check_mode: bool) -> dict[str, Any]:
        out = _result(plan, None if done is None else converge_runner.done_sorted(done), check_mode)
        return dict(out, cloudspace_id=self._space(plan))

    def _space(self, plan: ClusterPlan) -> str | None:
        """The cloudspace of the plan, or the one this run claimed for it."""
        return plan.cloudspace["cloudspace_id"] or self.made

    def failed(self, exc: WhiteskyError, done: dict[str, Any]) -> WhiteskyError:
        return converge_runner.halfway(exc, done)

    def gone(self, exc: CloudspaceGone) -> WhiteskyError:
        return gone_again(self.base)


def scaled(client: WhiteskyClient, base: ClusterSpec, pool: str, replicas: int) -> ClusterSpec:
    """The spec of ``base``'s cluster as it recorded it on its cloudspace (its pools note: every pool with what its
    machines are made from, and its first boot), with ``pool`` at ``replicas``, checked; refused, before anything
    is changed, when the cluster has no cloudspace, no pools note that parses, or no such pool."""
    where = "cluster %r in cloudspace %r of location %r" % (base.name, base.cloudspace, base.location)
    found = cluster_world.recorded(client, base)
    if found is None:
        raise InputError("%s: there is no such cloudspace, so no pool to scale; nothing was changed" % where)
    _space, noted = found
    record = poolsread.note_record(ownership_notes.NOTE_TITLE, noted[0]["content"]) if noted else None
    if record is None:
        raise InputError(
            "%s: %s, so its pools are not known; nothing was changed. Converge it once with its whole spec "
            "(cluster_create), which records them"
            % (where, "the cluster's pools note there does not parse" if noted else "it has recorded no pools there")
        )
    names = [p.name for p in record.pools]
    if pool not in names:
        raise InputError(
            "%s: pool %r is not one of the pools it recorded (%s); nothing was changed. A new pool is added with "
            "the cluster's whole spec (cluster_create)" % (where, pool, ", ".join(names))
        )
    record = record._replace(pools=tuple(p._replace(replicas=replicas) if p.name == pool else p for p in record.pools))
    try:
        return speccheck.check(specnote.from_record(base.document["cluster"], record))
    except InputError as exc:
        raise InputError(
            "%s: what it recorded of its pools cannot make pool %r's machines: %s. Converge it once with its whole "
            "spec (cluster_create), which records what its machines are made from" % (where, pool, exc),
            exc.details,
        ) from None


def _plan(
    spec: ClusterSpec,
    w: cluster_world.ClusterWorld,
    max_hourly_cost: float | None,
    scale: Mapping[str, Any] | None,
) -> ClusterPlan:
    """The converge's plan; a scale's must change the machines of its one pool only."""
    p = plan(spec, w, max_hourly_cost)
    if scale is not None:
        other = pools.outside_pool(p.machines, str(scale["pool"]))
        if other:
            raise InputError(
                "a scale of pool %r changes that pool only, but the cluster's other machines are not what it "
                "recorded: this run would also create or delete %s; nothing was changed. Converge the whole cluster "
                "with its spec (cluster_create)" % (scale["pool"], ", ".join(other)),
                {"other_machines": other},
            )
    return p


def _claim(client: WhiteskyClient, spec: ClusterSpec, done: dict[str, Any]) -> CloudspaceView:
    """A new cloudspace for the cluster, its creator note on it (or the one another run made first)."""
    try:
        space, done["cloudspace_created"] = cloudspaces.claim(client, spec.cloudspace, spec.location, spec.name)
    except WhiteskyError as exc:  # created, but neither claimed nor taken back
        done["cloudspace_created"] = bool(exc.details.get("cloudspace_created"))
        raise
    return space


def run(
    client: WhiteskyClient,
    *,
    spec: Mapping[str, Any] | None,
    variables: Iterable[str] | None = None,
    state: str = "present",
    machine: str | None = None,
    force: bool = False,
    delete_cloudspace: bool = True,
    max_hourly_cost: float | None = None,
    parallel: int = 32,
    plan_file: str | None = None,
    progress_file: str | None = None,
    scale: Mapping[str, Any] | None = None,
    look_elsewhere: bool = True,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Core of the ``cluster`` module: :func:`converge` or :func:`teardown`; with ``progress_file``, a line there
    for each machine and vGPU written, as it is (``progress``; never in check mode, which writes nothing)."""
    if state == "present" and machine is not None:
        raise InputError("machine is for state=absent (delete one machine of the cluster)")
    if state == "present" and plan_file is not None:
        raise InputError("plan_file is for state=absent (a teardown's reclaim plan, written in check mode)")
    if state != "present" and scale is not None:
        raise InputError("scale is for state=present (one pool's count changed)")
    client = progress.observe(client, progress_file, check_mode)
    try:
        if state == "present":
            return converge(client, spec, check_mode, max_hourly_cost, parallel, variables or (), scale)
        return teardown(
            client,
            spec,
            check_mode,
            machine=machine,
            force=force,
            delete_cloudspace=delete_cloudspace,
            parallel=parallel,
            variables=variables or (),
            plan_file=plan_file,
            look_elsewhere=look_elsewhere,
        )
    finally:
        progress.finish(client)
