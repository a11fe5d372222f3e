# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A machine's vGPUs by type (plain Python, no Ansible): the slot planner (:func:`plan_machine`; :func:`plan_groups`,
groups of machines with one allocation of profiles per type, which ``vgpu``'s :func:`plan` and the cluster's plan
call: pure), the applier (:func:`apply`) and ``ensure``, the core of ``vgpu`` (its concern on the one runner,
``ownership.converge``).

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
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.plans import Capacity, MachinePlan, VgpuPlan
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.profiles import (
    Profile,
    allocate,
    choose,
    least_memory,
    normalise_type,
    profiles_of_type,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.converge import Concern, Where, converge
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
    concern = _Slots(client, target, machines, count, gpu_type if present else None, profile if present else None)
    return converge(client, concern, check_mode)


@dataclass(frozen=True)
class Slots:
    """What ``vgpu`` converges: the machines (VM id, name), their :class:`~gpu.plans.VgpuPlan`, each one's slots as
    they are (its diff's ``before``), and whether a release deletes permanently."""

    machines: tuple[tuple[int, str], ...]
    plan: VgpuPlan
    before: dict[str, list[str]]
    permanently: bool

    @property
    def changed(self) -> bool:
        """Whether carrying it out calls the platform to change anything."""
        return self.plan.changed

    def view(self) -> dict[str, Any]:
        """The module's result of the plan (check mode): ``changed`` (a release of what is in the recycle bin
        already, without ``permanently``, changes nothing), the ``diff``, the reservations it keeps, and each
        machine's counts."""
        planned = self.plan
        plans = planned.machines.values()
        releases_billed = any(not deleted(i) or self.permanently for pl in plans for i in pl.releases)
        return {
            "changed": any(pl.fixes or pl.missing for pl in plans) or releases_billed,
            "diff": {"before": self.before, "after": _after(planned)},
            "reservations": [dict(view(i), status="ATTACHED") for pl in plans for i in pl.kept],
            "planned": planned.view(),
        }


class _Slots(Concern[tuple[dict[str, Any], list[tuple[int, str]]], "Slots"]):
    """The ``vgpu`` module's concern: the machines' slots, under the cluster's lease."""

    def __init__(
        self,
        client: WhiteskyClient,
        target: Target,
        machines: Sequence[str | int],
        count: int,
        gpu_type: str | None,
        profile: str | None,
    ) -> None:
        self.client, self.target, self.wanted = client, target, machines
        self.count, self.gpu_type, self.profile = count, gpu_type, profile

    def read(self) -> tuple[dict[str, Any], list[tuple[int, str]]]:
        """The reads (:func:`_read`, at once), and the machines they name."""
        got = _read(self.client, self.target, self.wanted, self.gpu_type is not None)
        return got, resolve_machines(got["vms"], self.wanted, self.target.cloudspace_id)

    def plan(self, world: tuple[dict[str, Any], list[tuple[int, str]]]) -> Slots:
        """:func:`plan` (pure), with each machine's slots as they are."""
        got, resolved = world
        t = self.target
        planned = plan(got, resolved, t.cluster, self.count, self.gpu_type, t.location, self.profile)
        before = {
            name: sorted(slot_line(i) for i in got["inventory"].owned(t.cluster, name) if not deleted(i))
            for name in planned.machines
        }
        return Slots(tuple(resolved), planned, before, t.permanently)

    def lease(self, plan: Slots) -> Where:
        return Where(self.target.cloudspace_id, self.target.cluster)

    def apply(self, plan: Slots, done: dict[str, Any]) -> None:
        done["reservations"] = apply(self.client, self.target, plan.machines, plan.plan)

    def result(self, plan: Slots, done: dict[str, Any] | None, check_mode: bool) -> dict[str, Any]:
        out = plan.view()
        if check_mode:
            return out
        del out["planned"]
        reservations = (done or {}).get("reservations")
        if reservations is None:  # nothing written: the kept, viewed as the applier views them (no platform call)
            reservations = apply(self.client, self.target, plan.machines, plan.plan)
        out["reservations"] = reservations
        return out


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
    :class:`~gpu.plans.VgpuPlan` (``machines: {name: plan}``, ``alloc: {name: profile id}``), of one group of
    machines (:func:`plan_groups`).  ``profile`` narrows the type's profiles (``profiles.choose``): a reservation of
    another is replaced.  An unknown type or profile, or too little capacity, raises here."""
    machines = list(machines)
    for _vm_id, name in machines:
        naming.machine_part(cluster, name)
    wanted = Group(tuple(machines), count, gpu_type, profile)
    return plan_groups(got.get("profiles") or [], got["inventory"], cluster, location, [wanted]).plans[0]


@dataclass(frozen=True)
class Group:
    """Machines that hold alike vGPUs (a pool's, or those of one ``vgpu`` call): each machine (its VM id, None when
    it is still to be made; its name), how many vGPUs each holds, of which type (None: none, every reservation it
    owns goes) and of which of the type's profiles (``gpu.profile``, ``profiles.choose``)."""

    machines: tuple[tuple[int | None, str], ...]
    count: int
    gpu_type: str | None
    profile: str | None = None


@dataclass(frozen=True)
class Groups:
    """:func:`plan_groups`'s plan: each group's :class:`~gpu.plans.VgpuPlan` and the GPU memory of each of its
    vGPUs (GB, at least: None when not known, or without vGPUs), in the groups' order; and by type (as the first
    group of it writes it) the slots the plans reserve and the instances of the profiles they may take."""

    plans: tuple[VgpuPlan, ...]
    memory: tuple[int | None, ...]
    capacity: dict[str, Capacity]


def plan_groups(
    listed: Iterable[Profile], inventory: Inventory, cluster: str, location: str, groups: Sequence[Group]
) -> Groups:
    """Every group's machines planned (:func:`plan_machine`) and their new slots' profiles allocated at once, one
    allocation per GPU type for all the groups of that type, whatever profile each asks for (pure): two pools of a
    type share its free instances.  ``listed`` are the location's profiles (``gpu_profiles``), ``inventory`` its
    reservations.  An unknown type or profile raises here, and too little capacity (``InsufficientCapacity``),
    before anything is reserved."""
    listed = list(listed)
    #: by normalised type: (the type as the first group writes it, its profiles, {machine: slots to reserve},
    #: {machine: the profile ids its group allows})
    needs: dict[str, tuple[str, list[Profile], dict[str, int], dict[str, set[str]]]] = {}
    plans: list[dict[str, MachinePlan]] = []
    memory: list[int | None] = []
    for group in groups:
        type_ids: set[str] = set()
        gpu_type = group.gpu_type
        if gpu_type is not None:
            profiles = profiles_of_type(listed, gpu_type, location)
            # the profiles the group asks for (whole cards without a profile): a reservation of another is replaced,
            # and a profile the type does not have is refused here, before anything is written
            chosen = choose(profiles, group.profile, gpu_type, location)
            type_ids = {p["id"] for p in chosen}
            needs.setdefault(normalise_type(gpu_type), (gpu_type, profiles, {}, {}))
        memory.append(least_memory(chosen) if gpu_type is not None else None)
        machine_plans: dict[str, MachinePlan] = {}
        for vm_id, name in group.machines:
            mp = plan_machine(inventory.owned(cluster, name), vm_id, group.count, type_ids, gpu_type is not None)
            machine_plans[name] = mp
            if gpu_type is not None and mp.missing:
                _label, _profiles, slots, allowed = needs[normalise_type(gpu_type)]
                slots[name], allowed[name] = len(mp.missing), type_ids
        plans.append(machine_plans)
    capacity: dict[str, Capacity] = {}
    alloc: dict[str, str] = {}
    for label, profiles, slots, allowed in needs.values():
        alloc.update(allocate(profiles, slots, label, allowed))
        usable = set().union(*allowed.values()) if allowed else {p["id"] for p in profiles}
        capacity[label] = {
            "needed": sum(slots.values()),
            "available": sum(int(p.get("available_instances") or 0) for p in profiles if p["id"] in usable),
        }
    return Groups(
        plans=tuple(
            VgpuPlan(machines=mps, alloc={n: alloc[n] for n, mp in mps.items() if mp.missing}) for mps in plans
        ),
        memory=tuple(memory),
        capacity=capacity,
    )


def _after(planned: VgpuPlan) -> dict[str, list[str]]:
    """Each machine's slots once the plan is carried out, a line per slot."""
    return {
        name: sorted(
            ["%02d %s ATTACHED" % (owner_of(i).slot, i["gpu_id"]) for i in pl.kept]
            + ["%02d %s ATTACHED" % (s, planned.alloc.get(name)) for s in pl.missing]
        )
        for name, pl in planned.machines.items()
    }


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
