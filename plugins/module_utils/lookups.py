# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookups on the platform's listings, shared by every part of the core (pure Python).

This module sits below ``machines``, ``cloudspaces``, ``nics``, ``gpu`` and ``sweep``: a cloudspace by name,
the VMs of a cloudspace by name or id, or with their owners (from their descriptions), and one decoded listing
of a location's vGPU reservations.
"""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils import ownership
from ansible_collections.whitesky.capvco.plugins.module_utils.errors import InputError, missing_is_none
from ansible_collections.whitesky.capvco.plugins.module_utils.parallel import run_parallel


def cloudspaces_named(client, name, location):
    """The cloudspaces called ``name`` in ``location``, the earliest first (creation time, then id): two runs that
    each created one agree on which is the cluster's."""
    found = [cs for cs in client.cloudspaces() if cs["name"] == name and cs.get("location") == location]
    return sorted(found, key=lambda cs: (cs.get("creation_time") or 0, str(cs.get("cloudspace_id"))))


def cloudspace_by_name(client, name, location):
    """The cloudspace called ``name`` in ``location`` (the earliest of several), or None."""
    found = cloudspaces_named(client, name, location)
    return found[0] if found else None


def marker_view(description):
    """What a VM's description says of its owner (``owner`` is None for a VM no cluster owns)."""
    marker = ownership.parse_marker(description)
    return {"owner": marker.cluster if marker else None, "pool": marker.pool if marker else None}


def describe(client, cloudspace_id, vm):
    """The VM's listing entry with its owner, read from its description (None when it is gone)."""
    full = missing_is_none(client.get_vm, cloudspace_id, vm["vm_id"])
    if full is None:
        return None
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
    """The refusal of a VM that ``cluster`` does not own (the same words from every module)."""
    return InputError(
        "machine %r is not owned by cluster %r: its description (%r) carries no marker of that cluster, so it is left "
        "as it is; give the machine another name, or remove it by hand" % (name, cluster, description or "")
    )


def check_owned(client, cloudspace_id, vms, cluster, parallel=32):
    """Refuse, before anything is changed, when a VM of ``vms`` (``[{vm_id, name}]``) does not carry ``cluster``'s
    marker (each VM's description read in parallel)."""
    results, errors = run_parallel(
        {vm["vm_id"]: (lambda vm=vm: describe(client, cloudspace_id, vm)) for vm in vms}, parallel
    )
    if errors:
        raise next(iter(errors.values()))
    foreign = [v for v in results.values() if v is not None and v["owner"] != cluster]
    if foreign:
        raise InputError(
            "; ".join(str(not_owned(v["name"], cluster, v.get("description"))) for v in foreign)
            + "; nothing was changed"
        )


def resolve_machines(vms, wanted, cloudspace_id):
    """``[(vm_id, name)]`` for machine names or ids; an unknown one fails naming what exists."""
    by_name = {v["name"]: v for v in vms}
    by_id = {str(v["vm_id"]): v for v in vms}
    out = []
    for machine in wanted:
        vm = by_name.get(str(machine)) or by_id.get(str(machine))
        if vm is None:
            raise InputError(
                "machine %r not found in cloudspace %r; it has: %s"
                % (machine, cloudspace_id, ", ".join(sorted(by_name)) or "no VMs")
            )
        out.append((vm["vm_id"], vm["name"]))
    return out


def wait_unlocked(client, cloudspace_id, vm_id):
    """Wait (within a call's deadline) until no operation holds the VM: what was sent to it has settled."""

    def unlocked():
        vm = missing_is_none(client.get_vm, cloudspace_id, vm_id)
        return vm is None or not vm.get("locked")

    client.wait_until(unlocked, "VM %s to be unlocked" % vm_id)


def vgpu_ids_on(client, cloudspace_id, vm_id):
    """The ids of the vGPUs attached to a VM now (from its info)."""
    devices = client.get_vm(cloudspace_id, vm_id).get("devices") or []
    return {d.get("reference_id") for d in devices if d.get("type") == "VGPU"}


def find_vm(client, cloudspace_id, name):
    for vm in client.vms(cloudspace_id):
        if vm["name"] == name:
            return vm
    return None


def view(item):
    """A reservation as the modules return it, with its owner decoded."""
    vm = item.get("virtual_machine") or {}
    owner = item.get("owner")
    out = {
        "vgpu_id": item["vgpu_id"],
        "vgpu_name": item["vgpu_name"],
        "gpu_id": item["gpu_id"],
        "status": item.get("status"),
        "vm_id": vm.get("id"),
        "vm_name": vm.get("name"),
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
