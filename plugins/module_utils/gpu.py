# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPUs by type: profile resolution, reservations, teardown and orphans (pure Python).

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

import random
import re
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.whitesky.capvco.plugins.module_utils import ownership
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import resolve_machines
from ansible_collections.whitesky.capvco.plugins.module_utils.client import (
    ApiError,
    InputError,
    InsufficientCapacity,
    WhiteskyError,
)

RETRYABLE = frozenset((429, 502, 503, 504))
HOURS_PER_MONTH = 730.0
SECONDS_PER_VGU = 3600.0


class PartialFailure(WhiteskyError):
    """Some machines converged and some did not; ``details`` says which."""

    def __init__(self, message, details):
        super().__init__(message)
        self.details = details


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
        raise InputError("GPU type %r is not offered in location %r; it offers: %s"
                         % (gpu_type, location, ", ".join(offered) or "no GPUs"))
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
            raise InsufficientCapacity("not enough %s: need %d more vGPU(s) (%d for machine %r in one profile), "
                                       "available: %s" % (gpu_type, total, need, machine, available))
        left[best] -= need
        chosen[machine] = best
    return chosen


def view(item):
    """A reservation as the modules return it, with its owner decoded."""
    vm = item.get("virtual_machine") or {}
    owner = item.get("owner")
    out = {
        "vgpu_id": item["vgpu_id"], "vgpu_name": item["vgpu_name"], "gpu_id": item["gpu_id"],
        "status": item.get("status"), "vm_id": vm.get("id"), "vm_name": vm.get("name"),
        "owned": owner is not None,
    }
    if owner is not None:
        out.update(cluster=owner.cluster, machine=owner.machine, slot=owner.slot, created=owner.created)
    return out


class Inventory:
    """One paginated listing of a location's reservations (soft-deleted included), decoded."""

    def __init__(self, client, location):
        self.items = list(client.vgpus(location, include_deleted=True))
        for item in self.items:
            item["owner"] = ownership.decode(item.get("vgpu_name"))

    def owned(self, cluster=None, machine=None):
        out = []
        for item in self.items:
            owner = item["owner"]
            if owner is None:
                continue
            if cluster is None or ownership.owned_by(owner, cluster, machine):
                out.append(item)
        return out


def deleted(item):
    return item.get("status") == "DELETED"


def attached_to(item):
    return (item.get("virtual_machine") or {}).get("id")


class Ops:
    """Platform mutations with the retry rules of this module."""

    def __init__(self, client, location, cloudspace_id=None, permanently=True, attempts=8, sleep=time.sleep):
        self.client = client
        self.location = location
        self.cloudspace_id = cloudspace_id
        self.permanently = permanently
        self.attempts = attempts
        self.sleep = sleep

    def _wait(self, attempt):
        self.sleep(random.uniform(0, min(5.0, 0.1 * (2 ** attempt))))

    def _vm_locked(self, cloudspace_id, vm_id):
        try:
            return bool(self.client.get_vm(cloudspace_id, vm_id).get("locked"))
        except ApiError:
            return False

    def _retry(self, func, cloudspace_id=None, vm_id=None):
        """Run an idempotent mutation; wait out VM locks and transient statuses."""
        for attempt in range(1, self.attempts + 1):
            try:
                return func()
            except ApiError as exc:
                transient = exc.status in RETRYABLE or exc.status is None
                locked = exc.status == 409 and vm_id is not None and self._vm_locked(cloudspace_id, vm_id)
                if attempt == self.attempts or not (transient or locked):
                    raise
                self._wait(attempt)
        return None  # pragma: no cover

    def release(self, item):
        """Detach and delete (permanently unless told otherwise); gone already counts as done."""
        if deleted(item) and not self.permanently:
            return False
        vm_id = attached_to(item)
        cs = (item.get("virtual_machine") or {}).get("cloudspace_id")

        def call():
            try:
                self.client.delete_vgpu(self.location, item["vgpu_id"], detach=True, permanently=self.permanently)
            except ApiError as exc:
                if exc.status != 404:
                    raise
        self._retry(call, cs, vm_id)
        return True

    def restore(self, item):
        self._retry(lambda: self.client.call("restoreVGPU", location=self.location, vgpu_id=item["vgpu_id"]))

    def attach(self, item, vm_id):
        other = attached_to(item)
        if other is not None and other != vm_id:
            other_cs = item["virtual_machine"]["cloudspace_id"]
            self._retry(lambda: self.client.detach_vgpu(other_cs, other, item["vgpu_id"]), other_cs, other)
        self._retry(lambda: self.client.attach_vgpu(self.cloudspace_id, vm_id, item["vgpu_id"]),
                    self.cloudspace_id, vm_id)

    def lookup(self, cluster, machine, slot):
        for item in Inventory(self.client, self.location).owned(cluster, machine):
            if item["owner"].slot == slot and not deleted(item):
                return item
        return None

    def reserve(self, cluster, machine, vm_id, slot, gpu_id):
        """Reserve-and-attach slot ``slot``; never twice, even when an answer is lost."""
        name = ownership.encode(cluster, machine, slot)
        for attempt in range(1, self.attempts + 1):
            try:
                vgpu_id = self.client.reserve_attach_vgpu(self.cloudspace_id, vm_id, gpu_id, name)
                return {"vgpu_id": vgpu_id, "vgpu_name": name, "gpu_id": gpu_id, "status": "ATTACHED",
                        "virtual_machine": {"id": vm_id}, "owner": ownership.decode(name)}
            except ApiError as exc:
                if exc.status == 409 and self._vm_locked(self.cloudspace_id, vm_id):
                    pass  # refused before commit: try again
                elif exc.status is None or exc.status in RETRYABLE:
                    found = self.lookup(cluster, machine, slot)  # committed after all?
                    if found is not None:
                        if attached_to(found) != vm_id:
                            self.attach(found, vm_id)
                            found["virtual_machine"] = {"id": vm_id}
                            found["status"] = "ATTACHED"
                        return found
                else:
                    raise
                if attempt == self.attempts:
                    raise
                self._wait(attempt)
        return None  # pragma: no cover


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


def _run_parallel(jobs, parallel):
    """Run ``{key: thunk}`` with at most ``parallel`` at once; return ({key: result}, {key: error})."""
    results, errors = {}, {}
    if not jobs:
        return results, errors
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(jobs)))) as pool:
        futures = {key: pool.submit(job) for key, job in jobs.items()}
        for key, fut in futures.items():
            try:
                results[key] = fut.result()
            except Exception as exc:  # collected and reported together
                errors[key] = exc
    return results, errors


def ensure(req):
    """Core of ``vgpu``: each machine holds exactly ``count`` vGPUs of ``type`` (or none)."""
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
    machines = resolve_machines(client.vms(cs), wanted, cs)
    for _vm_id, name in machines:
        ownership.machine_part(cluster, name)
    type_ids, alloc = set(), {}
    inventory = Inventory(client, location)
    plans = {}
    if present:
        profiles = profiles_of_type(client.gpu_profiles(location), p["type"], location)
        type_ids = {pr["id"] for pr in profiles}
    for vm_id, name in machines:
        plans[name] = plan_machine(inventory.owned(cluster, name), vm_id, count, type_ids, present)
    if present:
        alloc = allocate(profiles, {n: len(pl["missing"]) for n, pl in plans.items()}, p["type"])

    before = {name: sorted(slot_line(i) for i in inventory.owned(cluster, name) if not deleted(i))
              for _vm, name in machines}
    after = {name: sorted(["%02d %s ATTACHED" % (i["owner"].slot, i["gpu_id"]) for i in plans[name]["kept"]] +
                          ["%02d %s ATTACHED" % (s, alloc.get(name)) for s in plans[name]["missing"]])
             for _vm, name in machines}
    releases_billed = any(not deleted(i) or p["permanently"] for pl in plans.values() for i in pl["releases"])
    changed = any(pl["fixes"] or pl["missing"] for pl in plans.values()) or releases_billed
    result = {"changed": changed, "diff": {"before": before, "after": after}}
    if req.check_mode:
        result["reservations"] = [dict(view(i), status="ATTACHED") for pl in plans.values() for i in pl["kept"]]
        result["planned"] = {name: {"reserve": len(pl["missing"]), "release": len(pl["releases"]),
                                    "fix": len(pl["fixes"])} for name, pl in plans.items()}
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

    results, errors = _run_parallel({name: (lambda v=vm_id, n=name: converge(v, n)) for vm_id, name in machines},
                                    p["parallel"])
    result["reservations"] = [view(i) for name in sorted(results) for i in results[name]]
    if errors:
        raise PartialFailure("vGPUs of %d machine(s) did not converge: %s" % (
            len(errors), "; ".join("%s: %s" % (n, e) for n, e in sorted(errors.items()))),
            {"reservations": result["reservations"], "failed_machines": sorted(errors)})
    return result


# -- reporting and sweeping --------------------------------------------------------
def machines_in_location(client, location):
    """Names of the VMs that exist in the location (all the customer's cloudspaces there)."""
    names = set()
    for cs in client.cloudspaces():
        if cs.get("location") == location:
            names.update(v["name"] for v in client.vms(cs["cloudspace_id"]))
    return names


def is_orphan(item, vm_names):
    owner = item["owner"]
    keys = set()
    for name in vm_names:
        try:
            keys.add(ownership.machine_key(owner.cluster, name))
        except InputError:
            continue
    return owner.machine not in keys


def costs(client, location, items, now):
    """``{vgpu_id: (vgpu_seconds, cost)}`` from the platform's consumption and prices.

    A vGPU's own figure comes from ``unassigned_vgpus`` while it was detached;
    while attached it is a share of its VM's ``vgu`` (split evenly between the
    VM's current vGPUs).
    """
    if not items:
        return {}, None, 0.0
    start = min((i["owner"].created for i in items if i.get("owner")), default=int(now) - 86400)
    report = client.consumption(location, start - 1, int(now) + 1) or {}
    price = (client.prices(location) or {})
    per_hour = float((price.get("resources") or {}).get("vgu") or 0.0) / HOURS_PER_MONTH
    unassigned = {u["vgpu_id"]: float((u.get("consumption") or {}).get("vgu") or 0.0)
                  for u in report.get("unassigned_vgpus") or []}
    vm_vgu = {}
    for space in report.get("cloudspaces") or []:
        for vm in space.get("vms") or []:
            vm_vgu[vm["vm_id"]] = float((vm.get("consumption") or {}).get("vgu") or 0.0)
    sharing = {}
    for item in items:
        if attached_to(item) is not None:
            sharing[attached_to(item)] = sharing.get(attached_to(item), 0) + 1
    out = {}
    for item in items:
        vgu = unassigned.get(item["vgpu_id"], 0.0)
        vm_id = attached_to(item)
        if vm_id is not None:
            vgu += vm_vgu.get(vm_id, 0.0) / sharing[vm_id]
        out[item["vgpu_id"]] = (round(vgu * SECONDS_PER_VGU, 1), round(vgu * per_hour, 4))
    return out, price.get("currency"), per_hour


def info(req):
    """Core of ``vgpu_info``: reservations, decoded, optionally only orphans, optionally with cost."""
    p = req.params
    client = req.client
    location = p["location"]
    if p.get("machine") and not p.get("cluster"):
        raise InputError("machine needs cluster: names encode the machine per cluster")
    inventory = Inventory(client, location)
    items = inventory.owned(p.get("cluster"), p.get("machine")) if p.get("cluster") else list(inventory.items)
    now = time.time()
    vm_names = machines_in_location(client, location) if (p["orphans_only"] or p.get("cluster")) else None
    rows = []
    for item in items:
        row = view(item)
        if item["owner"] is not None:
            row["age"] = int(now - item["owner"].created)
            if vm_names is not None:
                row["orphan"] = is_orphan(item, vm_names)
        if p["orphans_only"] and not row.get("orphan"):
            continue
        rows.append((item, row))
    result = {"reservations": [r for _i, r in rows]}
    if p["with_cost"]:
        figures, currency, per_hour = costs(client, location, [i for i, _r in rows], now)
        for item, row in rows:
            row["vgpu_seconds"], row["cost"] = figures.get(item["vgpu_id"], (0.0, 0.0))
        result["currency"] = currency
        result["cost_per_hour"] = round(per_hour * len(rows), 4)
        result["total_cost"] = round(sum(r["cost"] for _i, r in rows), 4)
    result["report"] = report_lines([r for _i, r in rows], result)
    return result


REPORT_ROW = "%-36s %-12s %-18s %4s %9s %-16s %12s"


def report_lines(rows, totals):
    """A plain-text table of reservations (for the orphan check and the summaries)."""
    lines = [REPORT_ROW % ("vgpu_name", "cluster", "machine", "slot", "age(s)", "attached VM", "cost so far")]
    for r in rows:
        lines.append(REPORT_ROW % (r["vgpu_name"], r.get("cluster", "-"), r.get("machine", "-"), r.get("slot", "-"),
                                   r.get("age", "-"), r.get("vm_name") or "-",
                                   "%s" % r["cost"] if "cost" in r else "-"))
    summary = "%d reservation(s)" % len(rows)
    if "cost_per_hour" in totals:
        summary += ", costing %s %s per hour, %s %s so far" % (
            totals["cost_per_hour"], totals["currency"], totals["total_cost"], totals["currency"])
    return lines + [summary]


def reclaim(req):
    """Core of ``vgpu_reclaim``: release what a cluster owns, or what escaped (orphans)."""
    p = req.params
    client = req.client
    location, scope, cluster = p["location"], p["scope"], p.get("cluster")
    if scope == "cluster" and not cluster:
        raise InputError("scope=cluster needs cluster (the cluster whose reservations to release)")
    if p["grace_period"] < 0:
        raise InputError("grace_period must be 0 or more seconds, got %r" % p["grace_period"])
    if cluster:
        ownership.cluster_part(cluster)
    inventory = Inventory(client, location)
    candidates = inventory.owned(cluster)
    ignored = len(inventory.items) - len(candidates)
    now = time.time()
    vm_names = machines_in_location(client, location) if scope == "orphans" else set()
    release, kept = [], []
    for item in candidates:
        row = view(item)
        if deleted(item) and not p["permanently"]:
            kept.append(dict(row, reason="already in the recycle bin"))
        elif scope == "cluster":
            release.append(item)
        elif not is_orphan(item, vm_names):
            kept.append(dict(row, reason="machine %r exists" % item["owner"].machine))
        elif now - item["owner"].created < p["grace_period"]:
            kept.append(dict(row, reason="within the grace period (age %ds < %ds)"
                             % (now - item["owner"].created, p["grace_period"])))
        else:
            release.append(item)
    price = client.prices(location) if release else {}
    per_hour = float((price.get("resources") or {}).get("vgu") or 0.0) / HOURS_PER_MONTH
    result = {
        "changed": bool(release), "released": [view(i) for i in release], "kept": kept, "ignored": ignored,
        "saved_per_hour": round(per_hour * sum(1 for i in release if not deleted(i) or p["permanently"]), 4),
        "currency": price.get("currency"),
        "diff": {"before": sorted(i["vgpu_name"] for i in candidates),
                 "after": sorted(i["vgpu_name"] for i in candidates if i not in release)},
    }
    if req.check_mode or not release:
        return result
    ops = Ops(client, location, permanently=p["permanently"])
    groups = {}
    for item in release:  # one VM's vGPUs in turn (the VM lock); different VMs in parallel
        groups.setdefault(attached_to(item) or item["vgpu_id"], []).append(item)
    _done, errors = _run_parallel({k: (lambda g=g: [ops.release(i) for i in g]) for k, g in groups.items()},
                                  p["parallel"])
    if errors:
        failed = {i["vgpu_id"] for k in errors for i in groups[k]}
        raise PartialFailure("%d of %d release(s) failed: %s" % (
            len(failed), len(release), "; ".join(str(e) for e in errors.values())),
            {"released": [view(i) for i in release if i["vgpu_id"] not in failed],
             "not_released": sorted(failed)})
    return result


def billing(req):
    """Core of ``vgpu_billing_info``: vGPU consumption and its cost over a window, from the platform."""
    p = req.params
    end = int(time.time()) + 1
    start = int(p["since"]) if p.get("since") is not None else end - 86400
    if start > end:
        raise InputError("since %r is in the future" % p["since"])
    report = req.client.consumption(p["location"], start, end) or {}
    vgu = float((report.get("consumption") or {}).get("vgu") or 0.0)
    price = req.client.prices(p["location"]) or {}
    per_hour = float((price.get("resources") or {}).get("vgu") or 0.0) / HOURS_PER_MONTH
    return {"start": start, "end": end, "vgpu_seconds": round(vgu * SECONDS_PER_VGU, 1),
            "cost": round(vgu * per_hour, 4), "currency": price.get("currency"),
            "unassigned_vgpus": len(report.get("unassigned_vgpus") or [])}
