# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPUs by type: profile resolution, the slot planner and ``ensure`` (pure Python).

A vGPU bills from reservation until permanent deletion, so every path here is
built to never reserve twice and never leave one behind:

- one listing of the location's reservations serves a whole pool;
- a reservation is made with the single reserve-and-attach call, under a name
  that encodes its owner (see ``ownership``);
- a reserve whose answer is lost is resolved by looking its slot up by name
  before any retry;
- releases detach and delete permanently, and treat 404 as already done.
"""

from __future__ import annotations

import re

from ansible_collections.whitesky.capvco.plugins.module_utils import ownership
from ansible_collections.whitesky.capvco.plugins.module_utils.errors import (
    InputError,
    InsufficientCapacity,
    PartialFailure,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.lookups import (
    Inventory,
    attached_to,
    check_owned,
    deleted,
    resolve_machines,
    view,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.parallel import run_parallel
from ansible_collections.whitesky.capvco.plugins.module_utils.vgpu_ops import Ops


def normalise_type(text):
    """``"nvidia  a100"`` and ``"NVIDIA A100"`` are the same type."""
    return re.sub(r"\s+", " ", str(text or "")).strip().lower()


def profile_type(profile):
    return normalise_type("%s %s" % (profile.get("vendor", ""), profile.get("model", "")))


def display_type(profile):
    return "%s %s" % (profile.get("vendor", ""), profile.get("model", ""))


def profile_info(req):
    """Core of ``gpu_profile_info``: a location's per-card profiles, optionally of one type."""
    profiles = req.client.gpu_profiles(req.params["location"])
    wanted = req.params.get("type")
    if wanted:
        profiles = [p for p in profiles if profile_type(p) == normalise_type(wanted)]
    out = [dict(p, type=display_type(p)) for p in profiles]
    return {"profiles": out, "types": sorted({p["type"] for p in out})}


def profiles_of_type(profiles, gpu_type, location):
    """The profiles of ``gpu_type``; an unknown type names the types the location offers."""
    wanted = normalise_type(gpu_type)
    if not wanted:
        raise InputError("type is required with state=present, e.g. 'NVIDIA A100'")
    matching = [p for p in profiles if profile_type(p) == wanted]
    if not matching:
        offered = sorted({display_type(p) for p in profiles})
        raise InputError(
            "GPU type %r is not offered in location %r; it offers: %s"
            % (gpu_type, location, ", ".join(offered) or "no GPUs")
        )
    return matching


def allocate(profiles, needs, gpu_type):
    """Pick one profile per machine with enough instances for all its missing slots.

    ``needs`` is ``{machine: slots to reserve}``.  Fails before anything is
    reserved when the location cannot hold them all.
    """
    left = {p["id"]: int(p.get("available_instances") or 0) for p in profiles}
    chosen = {}
    for machine, need in sorted(needs.items(), key=lambda kv: -kv[1]):
        if need <= 0:
            continue
        best = max(left, key=lambda pid: left[pid])
        if left[best] < need:
            total = sum(needs.values())
            available = ", ".join("%s: %d" % (p["id"], p.get("available_instances") or 0) for p in profiles)
            raise InsufficientCapacity(
                "not enough %s: need %d more vGPU(s) (%d for machine %r in one profile), "
                "available: %s" % (gpu_type, total, need, machine, available)
            )
        left[best] -= need
        chosen[machine] = best
    return chosen


def slot_line(item):
    return "%02d %s %s" % (item["owner"].slot, item["gpu_id"], item.get("status"))


def plan_machine(items, vm_id, count, type_ids, present):
    """What one machine needs: ``releases``, ``fixes`` (restore/attach), ``missing`` slots, ``kept``."""
    plan = {"releases": [], "fixes": [], "missing": [], "kept": []}
    if not present:
        plan["releases"] = list(items)
        return plan
    by_slot = {}
    for item in items:
        by_slot.setdefault(item["owner"].slot, []).append(item)
    for slot, group in by_slot.items():
        if slot >= count:
            plan["releases"].extend(group)
            continue
        usable = [i for i in group if i["gpu_id"] in type_ids]
        usable.sort(key=lambda i: (attached_to(i) != vm_id, deleted(i), attached_to(i) is not None))
        keep = usable[0] if usable else None
        plan["releases"].extend(i for i in group if i is not keep)
        if keep is None:
            continue
        plan["kept"].append(keep)
        if deleted(keep) or attached_to(keep) != vm_id:
            plan["fixes"].append(keep)
    kept_slots = {i["owner"].slot for i in plan["kept"]}
    plan["missing"] = [s for s in range(count) if s not in kept_slots]
    return plan


def ensure(req, world=None):
    """Core of ``vgpu``: each machine holds exactly ``count`` vGPUs of ``type`` (or none).

    Every machine must carry ``cluster``'s marker (checked before anything is changed).  ``world`` holds what a
    caller read and checked already (the ``cluster`` core): ``vms``, ``inventory`` and ``profiles``.
    """
    world = world or {}
    p = req.params
    client = req.client
    present = p["state"] == "present"
    count = p["count"] if present else 0
    if count is None or count < 0:
        raise InputError("count must be an integer of 0 or more, got %r" % (p["count"],))
    if count > ownership.MAX_SLOT + 1:
        raise InputError("count %d is above the %d slots a machine can hold" % (count, ownership.MAX_SLOT + 1))
    cluster, location, cs = p["cluster"], p["location"], p["cloudspace_id"]
    ownership.cluster_part(cluster)
    wanted = p.get("machines") or [p["machine"]]

    def owned_vms():  # the listing, then the targets' markers (beside the inventory's pages)
        vms = client.vms(cs)
        targets = resolve_machines(vms, wanted, cs)
        check_owned(client, cs, [{"vm_id": v, "name": n} for v, n in targets], cluster, p["parallel"])
        return vms

    reads = {"vms": owned_vms, "inventory": lambda: Inventory(client, location)}
    if present:
        reads["profiles"] = lambda: client.gpu_profiles(location)
    reads = {k: v for k, v in reads.items() if k not in world}
    got, failed = run_parallel(reads, len(reads))  # independent reads: one round trip, not three
    if failed:
        raise next(iter(failed.values()))
    got.update(world)
    machines = resolve_machines(got["vms"], wanted, cs)
    for _vm_id, name in machines:
        ownership.machine_part(cluster, name)
    type_ids, alloc = set(), {}
    inventory = got["inventory"]
    plans = {}
    if present:
        profiles = profiles_of_type(got["profiles"], p["type"], location)
        type_ids = {pr["id"] for pr in profiles}
    for vm_id, name in machines:
        plans[name] = plan_machine(inventory.owned(cluster, name), vm_id, count, type_ids, present)
    if present:
        alloc = allocate(profiles, {n: len(pl["missing"]) for n, pl in plans.items()}, p["type"])

    before = {
        name: sorted(slot_line(i) for i in inventory.owned(cluster, name) if not deleted(i)) for _vm, name in machines
    }
    after = {
        name: sorted(
            ["%02d %s ATTACHED" % (i["owner"].slot, i["gpu_id"]) for i in plans[name]["kept"]]
            + ["%02d %s ATTACHED" % (s, alloc.get(name)) for s in plans[name]["missing"]]
        )
        for _vm, name in machines
    }
    releases_billed = any(not deleted(i) or p["permanently"] for pl in plans.values() for i in pl["releases"])
    changed = any(pl["fixes"] or pl["missing"] for pl in plans.values()) or releases_billed
    result = {"changed": changed, "diff": {"before": before, "after": after}}
    if req.check_mode:
        result["reservations"] = [dict(view(i), status="ATTACHED") for pl in plans.values() for i in pl["kept"]]
        result["planned"] = {
            name: {"reserve": len(pl["missing"]), "release": len(pl["releases"]), "fix": len(pl["fixes"])}
            for name, pl in plans.items()
        }
        return result

    ops = Ops(client, location, cs, permanently=p["permanently"])

    def converge(vm_id, name):
        plan = plans[name]
        done = []
        for item in plan["releases"]:
            ops.release(item)
        for item in plan["fixes"]:
            if deleted(item):
                ops.restore(item)
            ops.attach(item, vm_id)
            item["status"], item["virtual_machine"] = "ATTACHED", {"id": vm_id, "name": name}
        done.extend(plan["kept"])
        for slot in plan["missing"]:
            done.append(ops.reserve(cluster, name, vm_id, slot, alloc[name]))
        for item in done:
            item.setdefault("virtual_machine", {})["name"] = name
        return done

    results, errors = run_parallel(
        {name: (lambda v=vm_id, n=name: converge(v, n)) for vm_id, name in machines}, p["parallel"]
    )
    result["reservations"] = [view(i) for name in sorted(results) for i in results[name]]
    if errors:
        raise PartialFailure(
            "vGPUs of %d machine(s) did not converge: %s"
            % (len(errors), "; ".join("%s: %s" % (n, e) for n, e in sorted(errors.items()))),
            {"reservations": result["reservations"], "failed_machines": sorted(errors)},
        )
    return result
