# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Machines (VMs in a cloudspace): create with the first boot, delete gracefully or by force (pure Python).

With a ``cluster``, a machine is that cluster's only when its description
carries the cluster's marker (``ownership.machine_marker``): it is written at
creation, and read before anything is changed or deleted.  A VM of the same
name without it (a neighbour cluster's, or one made by hand) is refused.
"""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils import firstboot, ownership
from ansible_collections.whitesky.capvco.plugins.module_utils.errors import (
    ApiError,
    InputError,
    PartialFailure,
    gone_is_done,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.lookups import Inventory, find_vm
from ansible_collections.whitesky.capvco.plugins.module_utils.parallel import run_parallel
from ansible_collections.whitesky.capvco.plugins.module_utils.vgpu_ops import Ops


def vm_view(vm):
    return {
        "vm_id": vm.get("vm_id"),
        "name": vm.get("name"),
        "status": vm.get("status"),
        "vcpus": vm.get("vcpus"),
        "memory": vm.get("memory"),
        "image_id": vm.get("image_id"),
        "vgpus": [d.get("reference_id") for d in vm.get("devices") or [] if d.get("type") == "VGPU"],
        "nics": [
            {"ip_address": n.get("ip_address"), "mac_address": n.get("mac_address"), "network_id": n.get("network_id")}
            for n in vm.get("network_interfaces") or []
        ],
    }


def marker_view(description):
    """What a VM's description says of its owner (``owner`` is None for a VM no cluster owns)."""
    marker = ownership.parse_marker(description)
    return {
        "owner": marker.cluster if marker else None,
        "pool": marker.pool if marker else None,
        "cloudspace_created": bool(marker and marker.cloudspace_created),
    }


def describe(client, cloudspace_id, vm):
    """The VM's listing entry with its owner, read from its description (None when it is gone)."""
    try:
        full = client.get_vm(cloudspace_id, vm["vm_id"])
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return dict(vm, description=full.get("description"), **marker_view(full.get("description")))


def described(client, cloudspace_id, parallel=32):
    """Every VM of a cloudspace with its owner (one listing, then each VM's info in parallel)."""
    vms = client.vms(cloudspace_id)
    results, errors = run_parallel(
        {vm["vm_id"]: (lambda vm=vm: describe(client, cloudspace_id, vm)) for vm in vms}, parallel
    )
    if errors:
        raise next(iter(errors.values()))
    return [results[vm["vm_id"]] for vm in vms if results.get(vm["vm_id"]) is not None]


def not_owned(name, cluster, description):
    return InputError(
        "machine %r is not owned by cluster %r: its description (%r) carries no marker of that cluster, so it is left "
        "as it is; give the machine another name, or remove it by hand" % (name, cluster, description or "")
    )


def user_data(p):
    """The VM's user data: the first-boot script for the options (or the raw ``user_data``)."""
    fb = p.get("first_boot") or {}
    return p.get("user_data") or firstboot.render(
        fb.get("packages") or [],
        p.get("bootstrap_data"),
        attempts=fb.get("attempts") or 5,
        delay=fb.get("delay") if fb.get("delay") is not None else 5,
        lock_timeout=fb.get("lock_timeout") if fb.get("lock_timeout") is not None else 600,
        provider_id=p.get("provider_id"),
    )


def size_warning(vm, p):
    """A warning when an existing machine's size differs from the one asked for (it is never resized)."""
    wanted = {k: p[k] for k in ("vcpus", "memory") if p.get(k) is not None}
    differs = {k: (vm.get(k), v) for k, v in wanted.items() if vm.get(k) != v}
    if not differs:
        return None
    return "machine %r exists with %s; it is not resized" % (
        vm["name"],
        ", ".join("%s=%s (wanted %s)" % (k, a, b) for k, (a, b) in differs.items()),
    )


def need_size(p, names):
    if not p.get("vcpus") or not p.get("memory"):
        raise InputError("creating machine(s) %s needs vcpus and memory" % ", ".join(repr(n) for n in names))


def create(client, cs, name, p, data):
    """Create one VM with the cluster's marker (or the given description); a lost answer is resolved by name, and a
    VM found there must carry the marker.  Returns its view."""
    cluster = p.get("cluster")
    if cluster:
        description = ownership.machine_marker(cluster, p.get("pool"), p.get("cloudspace_created"))
    else:
        description = p.get("description") or "capvco machine"

    def resolve(_exc):  # the answer was lost: created after all?
        found = find_vm(client, cs, name)
        if found is None:
            return None
        if cluster and describe(client, cs, found).get("owner") != cluster:
            raise not_owned(name, cluster, found.get("description"))
        return {"vm_id": found["vm_id"]}

    vm_id = client.create_vm(
        cs,
        name=name,
        description=description,
        vcpus=p["vcpus"],
        memory=p["memory"],
        image_id=p.get("image_id"),
        disk_size=p.get("disk_size"),
        user_data=data,
        resolve=resolve,
    )
    return vm_view(client.get_vm(cs, vm_id))


def need_graceful(p, names):
    if not p.get("force") and not (p.get("cluster") and p.get("location")):
        raise InputError(
            "a graceful delete of %s needs cluster and location, to release its vGPUs first "
            "(or force: true, which leaves them to the teardown and orphan sweeps)" % ", ".join(repr(n) for n in names)
        )


def delete(client, cs, vm, force, ops=None, owned=()):
    """Delete one VM: gracefully (``owned``, its cluster's reservations for it, released first through ``ops``) or
    by force (with ``detach_gpu``, releasing nothing)."""
    for item in owned:
        ops.release(item)
    try:
        gone_is_done(client.delete_vm, cs, vm["vm_id"], permanently=True, detach_gpu=bool(force))
    except ApiError as exc:
        if exc.status == 409 and not force:
            raise InputError(
                "machine %r still has vGPUs this cluster does not own (%s); release them, or delete "
                "with force: true" % (vm["name"], exc.message)
            ) from None
        raise


def ensure(req):
    """Core of ``machine``: a VM exists (created with first-boot user data), or is gone."""
    p = req.params
    client = req.client
    cs, name = p["cloudspace_id"], p["name"]
    cluster = p.get("cluster")
    vm = find_vm(client, cs, name)
    if vm is not None and cluster:
        vm = describe(client, cs, vm)
        if vm is not None and vm["owner"] != cluster:
            raise not_owned(name, cluster, vm.get("description"))
    before = vm_view(vm) if vm else {}
    result = {"changed": False, "machine": before}
    if p["state"] == "present":
        if vm is not None:
            warning = size_warning(vm, p)
            if warning:
                result["warnings"] = [warning]
            result["diff"] = {"before": before, "after": before}
            return result
        need_size(p, [name])
        data = user_data(p)
        after = {"name": name, "vcpus": p["vcpus"], "memory": p["memory"], "image_id": p.get("image_id")}
        result.update(changed=True, diff={"before": {}, "after": after})
        if req.check_mode:
            return result
        result["machine"] = create(client, cs, name, p, data)
        return result
    if vm is None:
        result["diff"] = {"before": {}, "after": {}}
        return result
    result.update(changed=True, diff={"before": before, "after": {}})
    force = p.get("force")
    need_graceful(p, [name])
    owned = []
    if not force:
        owned = Inventory(client, p["location"]).owned(p["cluster"], name)
        result["released_vgpus"] = [i["vgpu_name"] for i in owned]
    if req.check_mode:
        return result
    ops = None if force else Ops(client, p["location"], cs, permanently=True)
    delete(client, cs, vm, force, ops, owned)
    return result


def ensure_pool(req):
    """Core of ``machine_pool``: the named machines of a cluster exist (the missing ones created concurrently), or
    are gone (deleted concurrently, gracefully or by force), in one module call.

    One listing, each VM's description read in parallel: every VM of one of the names must carry the cluster's
    marker, checked for all of them before anything is changed.
    """
    p = req.params
    client, cs, cluster = req.client, p["cloudspace_id"], p["cluster"]
    names = list(p["names"])
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError("names must be unique; repeated: %s" % ", ".join(dupes))
    if not names:
        return {"changed": False, "machines": [], "created": [], "deleted": [], "diff": {"before": [], "after": []}}
    by_name = {v["name"]: v for v in described(client, cs, p["parallel"])}
    foreign = [by_name[n] for n in names if n in by_name and by_name[n]["owner"] != cluster]
    if foreign:
        raise InputError(
            "; ".join(str(not_owned(v["name"], cluster, v.get("description"))) for v in foreign)
            + "; nothing was changed"
        )
    before = sorted(n for n in names if n in by_name)
    result = {"changed": False, "created": [], "deleted": []}
    if p["state"] == "present":
        missing = [n for n in names if n not in by_name]
        warnings = [w for w in (size_warning(by_name[n], p) for n in before) if w]
        if warnings:
            result["warnings"] = warnings
        result["machines"] = [vm_view(by_name[n]) for n in names if n in by_name]
        result["diff"] = {"before": before, "after": sorted(names)}
        if not missing:
            return result
        need_size(p, missing)
        result.update(changed=True, created=missing)
        if req.check_mode:
            return result
        data = user_data(p)
        made, errors = run_parallel({n: (lambda n=n: create(client, cs, n, p, data)) for n in missing}, p["parallel"])
        result["machines"] += [made[n] for n in missing if n in made]
        result["created"] = [n for n in missing if n in made]
        if errors:
            raise PartialFailure(
                "%d of %d machine(s) were not created: %s"
                % (len(errors), len(missing), "; ".join("%s: %s" % (n, e) for n, e in sorted(errors.items()))),
                {"created": result["created"], "failed_machines": sorted(errors)},
            )
        return result
    gone = [by_name[n] for n in names if n in by_name]
    result["machines"] = [vm_view(v) for v in gone]
    result["diff"] = {"before": before, "after": []}
    if not gone:
        return result
    force = p.get("force")
    need_graceful(p, [v["name"] for v in gone])
    owned = {}
    if not force:
        inventory = Inventory(client, p["location"])
        owned = {v["name"]: inventory.owned(cluster, v["name"]) for v in gone}
        result["released_vgpus"] = sorted(i["vgpu_name"] for items in owned.values() for i in items)
    result.update(changed=True, deleted=[v["name"] for v in gone])
    if req.check_mode:
        return result
    ops = None if force else Ops(client, p["location"], cs, permanently=True)
    done, errors = run_parallel(
        {v["name"]: (lambda v=v: delete(client, cs, v, force, ops, owned.get(v["name"], ()))) for v in gone},
        p["parallel"],
    )
    result["deleted"] = [v["name"] for v in gone if v["name"] in done]
    if errors:
        raise PartialFailure(
            "%d of %d machine(s) were not deleted: %s"
            % (len(errors), len(gone), "; ".join("%s: %s" % (n, e) for n, e in sorted(errors.items()))),
            {"deleted": result["deleted"], "failed_machines": sorted(errors)},
        )
    return result


def info(req):
    """Core of ``machine_info``."""
    p = req.params
    if p.get("cluster"):
        vms = [v for v in described(req.client, p["cloudspace_id"], p["parallel"]) if v["owner"] == p["cluster"]]
        if p.get("name"):
            vms = [v for v in vms if v["name"] == p["name"]]
        return {"machines": [dict(vm_view(v), **marker_view(v["description"])) for v in vms]}
    vms = req.client.vms(p["cloudspace_id"])
    if p.get("name"):
        vms = [v for v in vms if v["name"] == p["name"]]
    if p.get("name_prefix"):
        vms = [v for v in vms if v["name"].startswith(p["name_prefix"])]
    return {"machines": [vm_view(v) for v in vms]}
