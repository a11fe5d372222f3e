# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VMs of a cloudspace: by name or id, and with their owners read from their markers (pure Python)."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils import ownership
from ansible_collections.whitesky.capvco.plugins.module_utils.errors import InputError, missing_is_none
from ansible_collections.whitesky.capvco.plugins.module_utils.parallel import run_parallel


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


def find_vm(client, cloudspace_id, name):
    for vm in client.vms(cloudspace_id):
        if vm["name"] == name:
            return vm
    return None


def vgpu_ids_on(client, cloudspace_id, vm_id):
    """The ids of the vGPUs attached to a VM now (from its info)."""
    devices = client.get_vm(cloudspace_id, vm_id).get("devices") or []
    return {d.get("reference_id") for d in devices if d.get("type") == "VGPU"}
