# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster's machines, whole pools per call (plain Python, no Ansible): planned from the cloudspace's VMs
(:func:`plan_machines`, pure), then created and deleted concurrently (:func:`apply_machines`).  The ``cluster``
core calls these two with what it read and planned; :func:`converge_machines` (``machine_pool``'s machines,
``machine_pool.ensure_pool``) reads, plans and applies on the one runner (``ownership.converge``), and plans again
from fresh reads once it took the cluster's lease."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.ops import Ops
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.catalog import (
    check_images,
    images_of,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.machine import (
    create,
    delete,
    need_graceful,
    need_size,
    size_warning,
    vm_view,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.plans import MachinesPlan
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.userdata import Boot, pool_user_data
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.converge import Concern, Where, converge
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, PartialFailure, known
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import run_parallel
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool
from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import names_diff
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import Inventory
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import described, refuse_foreign

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import DescribedVM, Reservation


@dataclass(frozen=True)
class Scope:
    """The machines a converge may touch, and how: the cloudspace and the cluster that must own them, the location
    of their vGPUs, ``present`` or ``absent``, whether the cluster's machines named in no pool go too
    (``exclusive``), whether deletes skip the graceful release (``force``), and how many machines at once."""

    cloudspace_id: str
    cluster: str
    location: str | None = None
    state: str = "present"
    exclusive: bool = False
    force: bool = False
    parallel: int = 32


def unique_names(pools: Sequence[Pool]) -> list[str]:
    """Every pool's machine names, in order; a name in two places fails, naming it."""
    names = [n for pool in pools for n in pool.names]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError("machine names must be unique across the pools; repeated: %s" % ", ".join(dupes))
    return names


def converge_machines(
    client: WhiteskyClient,
    pools: Sequence[Pool],
    scope: Scope,
    boot: Boot | None = None,
    check_mode: bool = False,
) -> dict[str, Any]:
    """A cluster's machines, whole pools per call, within ``scope`` (:class:`Scope`); new ones boot with ``boot``.

    One listing, each VM's description read in parallel; every VM of one of the names must carry the cluster's
    marker, checked for all of them before anything is changed (:func:`plan_machines`, pure).  Then the missing
    machines are created and the ones to go deleted, concurrently (:func:`apply_machines`).  With ``exclusive``, the
    cluster's machines named in no pool go too (a scale-down; with ``state=absent``, every machine the cluster
    owns).
    """
    names = unique_names(pools)
    if not names and not scope.exclusive:
        return {"changed": False, "machines": [], "created": [], "deleted": [], "diff": names_diff("machine", [], [])}
    return converge(client, _Machines(client, tuple(pools), scope, boot or Boot()), check_mode)


@dataclass(frozen=True)
class Listed:
    """What a converge of pools reads: the cloudspace's VMs with their owners, the location's images (None: not
    read, nothing to create or no location) and its reservations (None: not read, no graceful delete)."""

    listing: list[DescribedVM]
    images: list[Any] | None
    inventory: Inventory | None


@dataclass(frozen=True)
class PoolsPlan:
    """What a converge of pools changes: the machines' plan (:func:`plan_machines`), the user data of each pool
    with machines to create (by index) and the reservations each graceful delete releases first."""

    scope: Scope
    pools: tuple[Pool, ...]
    machines: MachinesPlan
    user_data: dict[int, str]
    graceful: dict[str, list[Reservation]]

    @property
    def changed(self) -> bool:
        return bool(self.machines.creates or self.machines.deletes)

    def view(self) -> dict[str, Any]:
        """The result of the plan (``machine_pool``'s, check mode): the machines listed, those it creates and
        deletes, the diff, the size warnings, and the vGPUs the graceful deletes release."""
        planned = self.machines
        out: dict[str, Any] = {
            "changed": self.changed,
            "machines": [vm_view(v) for v in planned.listed],
            "created": [n for _p, n in planned.creates],
            "deleted": [v["name"] for v in planned.deletes],
            "diff": planned.diff,
        }
        if planned.warnings:
            out["warnings"] = planned.warnings
        if planned.deletes and not self.scope.force:
            out["released_vgpus"] = sorted(i["vgpu_name"] for items in self.graceful.values() for i in items)
        return out


class _Machines(Concern[Listed, PoolsPlan]):
    """``machine_pool``'s concern: the pools' machines in one cloudspace, under the cluster's lease."""

    def __init__(self, client: WhiteskyClient, pools: tuple[Pool, ...], scope: Scope, boot: Boot) -> None:
        self.client, self.pools, self.scope, self.boot = client, pools, scope, boot

    def read(self) -> Listed:
        """The listing, each VM's description read in parallel; then what the plan of it needs: the images when it
        creates machines, the reservations when it deletes some gracefully."""
        scope = self.scope
        listing = described(self.client, scope.cloudspace_id, scope.cluster, scope.parallel)
        planned = plan_machines(self.pools, listing, scope.cluster, scope.state == "present", scope.exclusive)
        images = self.client.images(scope.location) if scope.location and planned.creates else None
        inventory = None
        if scope.location and planned.deletes and not scope.force:
            inventory = Inventory(self.client, scope.location)
        return Listed(listing, images, inventory)

    def plan(self, world: Listed) -> PoolsPlan:
        """:func:`plan_machines`, then the checks of what it creates (sizes, user data, images) and deletes."""
        scope, pools, cluster = self.scope, self.pools, self.scope.cluster
        planned = plan_machines(pools, world.listing, cluster, scope.state == "present", scope.exclusive)
        creates, deletes = planned.creates, planned.deletes
        data: dict[int, str] = {}
        if creates:
            for pool in pools:
                missing = [n for q, n in creates if q is pool]
                if missing:
                    need_size(pool, missing)
            to_create = [pool.only(n for q, n in creates if q is pool) for pool in pools]
            data = pool_user_data(self.boot, to_create)
            if world.images is not None:  # an image the location does not have is refused before anything is made
                check_images(world.images, images_of(to_create), known(scope.location, "location"))
        if deletes:
            need_graceful(scope.force, cluster, scope.location, [v["name"] for v in deletes])
        inventory = world.inventory
        graceful = {v["name"]: inventory.owned(cluster, v["name"]) for v in deletes} if inventory is not None else {}
        return PoolsPlan(scope, pools, planned, data, graceful)

    def lease(self, plan: PoolsPlan) -> Where:
        return Where(self.scope.cloudspace_id, self.scope.cluster)

    def nothing_done(self) -> dict[str, Any]:
        return {"created": [], "deleted": [], "machines": []}

    def apply(self, plan: PoolsPlan, done: dict[str, Any]) -> None:
        apply_machines(self.client, self.scope, plan.pools, plan.machines, plan.user_data, plan.graceful, done)

    def result(self, plan: PoolsPlan, done: dict[str, Any] | None, check_mode: bool) -> dict[str, Any]:
        out = plan.view()
        if done is not None:
            out.update(created=done["created"], deleted=done["deleted"], machines=out["machines"] + done["machines"])
        return out


def plan_machines(
    pools: Sequence[Pool], listing: Sequence[DescribedVM], cluster: str, present: bool, exclusive: bool
) -> MachinesPlan:
    """What converging the pools changes, from the cloudspace's VMs with their owners (pure): a
    :class:`~machines.plans.MachinesPlan` of ``creates`` (pool, name), ``deletes`` and ``listed`` (VMs), the
    ``diff`` of the cluster's machine names and size ``warnings``.  A planned name that a VM the cluster does not
    own holds is refused."""
    names = [n for pool in pools for n in pool.names]
    by_name = {v["name"]: v for v in listing}
    refuse_foreign([by_name[n] for n in names if n in by_name], cluster)
    owned = sorted((v for v in by_name.values() if v["owner"] == cluster), key=lambda v: v["name"])
    creates: list[tuple[Pool, str]] = []
    listed = [by_name[n] for n in names if n in by_name]
    if present:
        creates = [(pool, n) for pool in pools for n in pool.names if n not in by_name]
        deletes = [v for v in owned if v["name"] not in names] if exclusive else []
    else:
        deletes = owned if exclusive else listed
        listed = deletes
    before = [v["name"] for v in owned]
    gone = {v["name"] for v in deletes}
    after = sorted({n for n in before if n not in gone} | {n for _p, n in creates})
    warnings: list[str | None] = []
    if present:
        warnings = [w for pool in pools for w in (size_warning(by_name[n], pool) for n in pool.names if n in by_name)]
    return MachinesPlan(
        creates=creates,
        deletes=deletes,
        listed=listed,
        diff=names_diff("machine", before, after),
        warnings=[w for w in warnings if w],
        owned=before,
    )


def check_dropped(planned: MachinesPlan, named: Iterable[str], removed: Iterable[str]) -> None:
    """Refuse a plan that deletes machines of a pool the spec no longer names (by the pool their marker names)
    unless the spec asks for it (``removed``, its ``remove_pools``), naming every such pool and its machines: a
    spec that leaves a pool out (a list given on the command line for one pool) never deletes the others by
    accident.  A machine whose marker names no pool is no pool's (pure)."""
    keep, gone = set(named), set(removed)
    dropped: dict[str, list[str]] = {}
    for vm in planned.deletes:
        pool = vm.get("pool")
        if pool is not None and pool not in keep and pool not in gone:
            dropped.setdefault(pool, []).append(vm["name"])
    if dropped:
        listed = "; ".join("%s (%s)" % (p, ", ".join(sorted(ns))) for p, ns in sorted(dropped.items()))
        raise InputError(
            "the spec no longer names pool(s) %s, whose machines this run would delete: %s; nothing was changed. "
            "List the pool in pools to keep it (the pool_scale playbook changes one pool's count and keeps the "
            "others), set its replicas to 0, or name it in remove_pools to delete its machines"
            % (", ".join(sorted(dropped)), listed),
            {"dropped_pools": {p: sorted(ns) for p, ns in sorted(dropped.items())}},
        )


def outside_pool(planned: MachinesPlan, pool: str) -> list[str]:
    """The machines a plan creates or deletes that are not of ``pool`` (created for another pool, or deleted while
    their marker names another pool or none): what a scale of one pool must not touch (pure)."""
    out = [n for q, n in planned.creates if q.name != pool]
    return sorted(out + [v["name"] for v in planned.deletes if v.get("pool") != pool])


def apply_machines(
    client: WhiteskyClient,
    scope: Scope,
    pools: Sequence[Pool],
    planned: MachinesPlan,
    data: Mapping[int, str],
    reservations: Mapping[str, list[Reservation]],
    result: dict[str, Any],
) -> None:
    """Create and delete the planned machines, concurrently; ``result`` says what was done, also on failure."""
    cs, cluster, force = scope.cloudspace_id, scope.cluster, scope.force
    creates, deletes = planned.creates, planned.deletes
    ops = None if force or scope.location is None else Ops(client, scope.location, cs, permanently=True)
    jobs: dict[tuple[str, str], Callable[[], Any]] = {}
    for i, pool in enumerate(pools):  # each pool's user data: a GPU pool's first boot has its driver step
        for name in [n for q, n in creates if q is pool]:
            jobs[("create", name)] = partial(create, client, cs, name, pool, data[i], cluster)
    for vm in deletes:
        jobs[("delete", vm["name"])] = partial(delete, client, cs, vm, force, ops, reservations.get(vm["name"], ()))
    done, errors = run_parallel(jobs, scope.parallel)
    result["created"] = [n for _p, n in creates if ("create", n) in done]
    result["deleted"] = [v["name"] for v in deletes if ("delete", v["name"]) in done]
    if scope.state == "present":
        result["machines"] += [done[("create", n)] for _p, n in creates if ("create", n) in done]
    if errors:
        raise PartialFailure(
            "%d machine(s) did not converge: %s"
            % (len(errors), "; ".join("%s %s: %s" % (what, n, e) for (what, n), e in sorted(errors.items()))),
            {
                "created": result["created"],
                "deleted": result["deleted"],
                "failed_machines": sorted(n for _what, n in errors),
            },
        )
