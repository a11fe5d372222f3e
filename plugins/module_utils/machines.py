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
from ansible_collections.whitesky.capvco.plugins.module_utils.client import vm_locked
from ansible_collections.whitesky.capvco.plugins.module_utils.errors import ApiError, InputError, gone_is_done
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


def described(client, cloudspace_id, parallel=8):
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
            wanted = {k: p[k] for k in ("vcpus", "memory") if p.get(k) is not None}
            differs = {k: (vm.get(k), v) for k, v in wanted.items() if vm.get(k) != v}
            if differs:
                result["warnings"] = [
                    "machine %r exists with %s; it is not resized"
                    % (name, ", ".join("%s=%s (wanted %s)" % (k, a, b) for k, (a, b) in differs.items()))
                ]
            result["diff"] = {"before": before, "after": before}
            return result
        if not p.get("vcpus") or not p.get("memory"):
            raise InputError("creating machine %r needs vcpus and memory" % name)
        fb = p.get("first_boot") or {}
        user_data = p.get("user_data") or firstboot.render(
            fb.get("packages") or [],
            p.get("bootstrap_data"),
            attempts=fb.get("attempts") or 5,
            delay=fb.get("delay") if fb.get("delay") is not None else 5,
            lock_timeout=fb.get("lock_timeout") if fb.get("lock_timeout") is not None else 600,
            provider_id=p.get("provider_id"),
        )
        after = {"name": name, "vcpus": p["vcpus"], "memory": p["memory"], "image_id": p.get("image_id")}
        result.update(changed=True, diff={"before": {}, "after": after})
        if req.check_mode:
            return result

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
            user_data=user_data,
            resolve=resolve,
        )
        result["machine"] = vm_view(client.get_vm(cs, vm_id))
        return result
    if vm is None:
        result["diff"] = {"before": {}, "after": {}}
        return result
    result.update(changed=True, diff={"before": before, "after": {}})
    force = p.get("force")
    if not force and not (p.get("cluster") and p.get("location")):
        raise InputError(
            "a graceful delete of %r needs cluster and location, to release its vGPUs first "
            "(or force: true, which leaves them to the teardown and orphan sweeps)" % name
        )
    released = []
    if not force:
        owned = Inventory(client, p["location"]).owned(p["cluster"], name)
        released = [i["vgpu_name"] for i in owned]
        result["released_vgpus"] = released
    if req.check_mode:
        return result
    if not force:
        ops = Ops(client, p["location"], cs, permanently=True)
        for item in owned:
            ops.release(item)
    try:
        gone_is_done(
            client.delete_vm,
            cs,
            vm["vm_id"],
            permanently=True,
            detach_gpu=bool(force),
            retry_if=vm_locked(client, cs, vm["vm_id"]),
        )
    except ApiError as exc:
        if exc.status == 409 and not force:
            raise InputError(
                "machine %r still has vGPUs this cluster does not own (%s); release them, or delete "
                "with force: true" % (name, exc.message)
            ) from None
        raise
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
