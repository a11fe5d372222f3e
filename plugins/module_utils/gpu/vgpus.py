# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A machine's vGPUs by type (plain Python, no Ansible): the slot planner (:func:`plan_machine`, :func:`plan`: pure),
the applier (:func:`apply`) and ``ensure``, the core of ``vgpu`` (reads, plans, applies).

A vGPU bills from reservation until permanent deletion, so every path here is
built to never reserve twice and never leave one behind:

- one listing of the location's reservations serves a whole pool;
- a reservation is made with the single reserve-and-attach call, under a name
  that encodes its owner (``ownership.naming``);
- a reserve whose answer is lost is resolved by looking its slot up by name
  before any retry;
- releases detach and delete permanently, and treat 404 as already done.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.ops import Ops
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.plans import MachinePlan, VgpuPlan
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.profiles import Profile, allocate, type_profiles
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease, naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    InputError,
    PartialFailure,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import run_parallel
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import (
    Inventory,
    attached_to,
    deleted,
    owner_of,
    view,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import check_owned, resolve_machines

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import VM, Reservation


def slot_line(item: Reservation) -> str:
    """One slot of a machine as the diff shows it."""
    return "%02d %s %s" % (owner_of(item).slot, item["gpu_id"], item.get("status"))


def plan_machine(
    items: Iterable[Reservation], vm_id: int | None, count: int, type_ids: Collection[str], present: bool
) -> MachinePlan:
    """What one machine needs (pure): ``releases``, ``fixes`` (restore/attach), ``missing`` slots, ``kept``.

    ``items`` are the reservations the machine owns (``Inventory.owned``); with ``present`` false, all of them go.
    """
    releases: list[Reservation] = []
    fixes: list[Reservation] = []
    kept: list[Reservation] = []
    if not present:
        return MachinePlan(releases=list(items), fixes=fixes, missing=[], kept=kept)
    by_slot: dict[int, list[Reservation]] = {}
    for item in items:
        by_slot.setdefault(owner_of(item).slot, []).append(item)
    for slot, group in by_slot.items():
        if slot >= count:
            releases.extend(group)
            continue
        usable = [i for i in group if i["gpu_id"] in type_ids]
        usable.sort(key=lambda i: (attached_to(i) != vm_id, deleted(i), attached_to(i) is not None))
        keep = usable[0] if usable else None
        releases.extend(i for i in group if i is not keep)
        if keep is None:
            continue
        kept.append(keep)
        if deleted(keep) or attached_to(keep) != vm_id:
            fixes.append(keep)
    kept_slots = {owner_of(i).slot for i in kept}
    missing = [s for s in range(count) if s not in kept_slots]
    return MachinePlan(releases=releases, fixes=fixes, missing=missing, kept=kept)


def ensure(
    client: WhiteskyClient,
    *,
    location: str,
    cloudspace_id: str,
    cluster: str,
    machines: Sequence[str | int],
    gpu_type: str | None = None,
    count: int | None = 1,
    profile: str | None = None,
    state: str = "present",
    permanently: bool = True,
    parallel: int = 32,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Core of ``vgpu``: each of ``machines`` (names) holds exactly ``count`` vGPUs of ``gpu_type`` (or none), of
    the type's profiles that ``profile`` allows (``profiles.choose``: ``full``, a whole card, what None gets; a
    profile id; or ``any`` of the type's).

    Every machine must carry ``cluster``'s marker (checked before anything is changed).  The reads, then
    :func:`plan` (pure), then check mode returns the plan, or :func:`apply` carries it out (planned again from fresh
    reads when this run had to wait for the cluster's lease).
    """
    present = state == "present"
    count = count if present else 0
    if count is None or count < 0:
        raise InputError("count must be an integer of 0 or more, got %r" % (count,))
    if count > naming.MAX_SLOT + 1:
        raise InputError("count %d is above the %d slots a machine can hold" % (count, naming.MAX_SLOT + 1))
    naming.cluster_part(cluster)
    target = Target(location, cloudspace_id, cluster, permanently, parallel)
    wanted = gpu_type if present else None

    def read_and_plan() -> tuple[dict[str, Any], list[tuple[int, str]], VgpuPlan]:
        got = _read(client, target, machines, present)
        resolved = resolve_machines(got["vms"], machines, cloudspace_id)
        return got, resolved, plan(got, resolved, cluster, count, wanted, location, profile if present else None)

    got, resolved, planned = read_and_plan()
    if not check_mode and _writes(planned):
        # one run at a time per cluster; what was read before this run held the cluster may be stale
        with lease.held(client, cloudspace_id, cluster) as fresh:
            if fresh is not None:
                got, resolved, planned = read_and_plan()
            result = _result(got, planned, cluster, permanently)
            result["reservations"] = apply(client, target, resolved, planned)
            return result
    result = _result(got, planned, cluster, permanently)
    if check_mode:
        kept = [dict(view(i), status="ATTACHED") for pl in planned.machines.values() for i in pl.kept]
        result["reservations"] = kept
        result["planned"] = {
            name: {"reserve": len(pl.missing), "release": len(pl.releases), "fix": len(pl.fixes)}
            for name, pl in planned.machines.items()
        }
        return result
    result["reservations"] = apply(client, target, resolved, planned)  # nothing to write: the kept, viewed
    return result


def _result(got: Mapping[str, Any], planned: VgpuPlan, cluster: str, permanently: bool) -> dict[str, Any]:
    return {"changed": _changes(planned, permanently), "diff": _diff(got["inventory"], cluster, planned)}


def _writes(planned: VgpuPlan) -> bool:
    """Whether carrying out the plan calls the platform to change anything."""
    return any(pl.releases or pl.fixes or pl.missing for pl in planned.machines.values())


@dataclass(frozen=True)
class Target:
    """Where a vGPU plan is carried out: the location, the cloudspace and the cluster, how releases delete, and how
    many machines at once."""

    location: str
    cloudspace_id: str
    cluster: str
    permanently: bool = True
    parallel: int = 32


def _read(client: WhiteskyClient, target: Target, wanted: Sequence[str | int], present: bool) -> dict[str, Any]:
    """What a plan needs, read at once (one round trip): the VMs (with the targets' markers checked), the
    location's reservations, and its profiles."""
    cs = target.cloudspace_id

    def owned_vms() -> list[VM]:  # the listing, then the targets' markers (beside the inventory's pages)
        vms: list[VM] = client.vms(cs)
        targets = resolve_machines(vms, wanted, cs)
        check_owned(client, cs, [{"vm_id": v, "name": n} for v, n in targets], target.cluster, target.parallel)
        return vms

    reads: dict[str, Callable[[], Any]] = {"vms": owned_vms, "inventory": lambda: Inventory(client, target.location)}
    if present:
        reads["profiles"] = lambda: client.gpu_profiles(target.location)
    got, failed = run_parallel(reads, len(reads))
    if failed:
        raise next(iter(failed.values()))
    return got


def plan(
    got: Mapping[str, Any],
    machines: Iterable[tuple[int, str]],
    cluster: str,
    count: int,
    gpu_type: str | None,
    location: str,
    profile: str | None = None,
) -> VgpuPlan:
    """Each machine's plan (:func:`plan_machine`) and the profile its new slots come from (pure): a
    :class:`~gpu.plans.VgpuPlan` (``machines: {name: plan}``, ``alloc: {name: profile id}``).  ``profile`` narrows
    the type's profiles (``profiles.choose``): a reservation of another is replaced.  An unknown type or profile, or
    too little capacity, raises here."""
    type_ids: set[str] = set()
    profiles: list[Profile] = []
    if gpu_type is not None:
        profiles = type_profiles(got["profiles"], gpu_type, location, profile)
        type_ids = {pr["id"] for pr in profiles}
    plans: dict[str, MachinePlan] = {}
    for vm_id, name in machines:
        naming.machine_part(cluster, name)
        plans[name] = plan_machine(got["inventory"].owned(cluster, name), vm_id, count, type_ids, gpu_type is not None)
    alloc: dict[str, str] = {}
    if gpu_type is not None:
        needs = {n: len(pl.missing) for n, pl in plans.items()}
        alloc = allocate(profiles, needs, gpu_type)
    return VgpuPlan(machines=plans, alloc=alloc)


def _changes(planned: VgpuPlan, permanently: bool) -> bool:
    plans = planned.machines.values()
    releases_billed = any(not deleted(i) or permanently for pl in plans for i in pl.releases)
    return any(pl.fixes or pl.missing for pl in plans) or releases_billed


def _diff(inventory: Inventory, cluster: str, planned: VgpuPlan) -> dict[str, dict[str, list[str]]]:
    """Each machine's slots before and after, a line per slot."""
    before: dict[str, list[str]] = {}
    after: dict[str, list[str]] = {}
    for name, pl in planned.machines.items():
        before[name] = sorted(slot_line(i) for i in inventory.owned(cluster, name) if not deleted(i))
        after[name] = sorted(
            ["%02d %s ATTACHED" % (owner_of(i).slot, i["gpu_id"]) for i in pl.kept]
            + ["%02d %s ATTACHED" % (s, planned.alloc.get(name)) for s in pl.missing]
        )
    return {"before": before, "after": after}


def apply(
    client: WhiteskyClient, target: Target, machines: Iterable[tuple[int, str]], planned: VgpuPlan
) -> list[dict[str, Any]]:
    """Carry out the plan: per machine in turn (its lock), machines at once; the reservations after, viewed."""
    ops = Ops(client, target.location, target.cloudspace_id, permanently=target.permanently)

    def converge(vm_id: int, name: str) -> list[Reservation]:
        pl = planned.machines[name]
        done: list[Reservation] = []
        for item in pl.releases:
            ops.release(item)
        for item in pl.fixes:
            if deleted(item):
                ops.restore(item)
            ops.attach(item, vm_id)
            item["status"], item["virtual_machine"] = "ATTACHED", {"id": vm_id, "name": name}
        done.extend(pl.kept)
        for slot in pl.missing:
            done.append(ops.reserve(target.cluster, name, vm_id, slot, planned.alloc[name]))
        for item in done:
            vm = item.get("virtual_machine")
            if vm is None:  # never: each is attached to the machine by now
                vm = item["virtual_machine"] = {"id": vm_id}
            vm["name"] = name
        return done

    results, errors = run_parallel({name: partial(converge, vm_id, name) for vm_id, name in machines}, target.parallel)
    reservations = [view(i) for name in sorted(results) for i in results[name]]
    if errors:
        raise PartialFailure(
            "vGPUs of %d machine(s) did not converge: %s"
            % (len(errors), "; ".join("%s: %s" % (n, e) for n, e in sorted(errors.items()))),
            {"reservations": reservations, "failed_machines": sorted(errors)},
        )
    return reservations
