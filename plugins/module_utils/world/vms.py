# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VMs of a cloudspace: by name or id, and with their owners read from their markers (plain Python, no
Ansible)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers as ownership_markers
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, missing_is_none
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import run_parallel

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import VM, DescribedVM, MarkerView


def marker_view(description: object) -> MarkerView:
    """What a VM's description says of its owner (``owner`` is None for a VM no cluster owns)."""
    marker = ownership_markers.parse_marker(description)
    return {"owner": marker.cluster if marker else None, "pool": marker.pool if marker else None}


def describe(client: WhiteskyClient, cloudspace_id: str, vm: VM) -> DescribedVM | None:
    """The VM's listing entry with its owner, read from its description (None when it is gone); a VM this run has
    described already is not read again (``client.markers``)."""
    key = (cloudspace_id, vm["vm_id"])
    if key in client.markers:
        description = client.markers[key]
    else:
        full = missing_is_none(client.get_vm, cloudspace_id, vm["vm_id"])
        if full is None:
            return None
        description = client.markers[key] = full.get("description")
    return {**vm, "description": description, **marker_view(description)}


def unread(vm: VM) -> DescribedVM:
    """A VM whose description was not read, since its name says it is not the cluster's (``ownership_markers.may_own``):
    owned by no cluster as far as this read goes."""
    return {**vm, "description": None, "owner": None, "pool": None}


def described(client: WhiteskyClient, cloudspace_id: str, cluster: str, parallel: int = 32) -> list[DescribedVM]:
    """Every VM of a cloudspace, with its owner read from its marker when its name may be ``cluster``'s (one
    listing, then those VMs' info in parallel): the calls grow with the cluster, not with its neighbours.  The
    other VMs are listed as owned by no cluster (:func:`unread`)."""
    vms: list[VM] = client.vms(cloudspace_id)
    mine = {
        vm["vm_id"]: partial(describe, client, cloudspace_id, vm)
        for vm in vms
        if ownership_markers.may_own(cluster, vm["name"])
    }
    results, errors = run_parallel(mine, parallel)
    if errors:
        raise next(iter(errors.values()))
    out = (results.get(vm["vm_id"]) if vm["vm_id"] in mine else unread(vm) for vm in vms)
    return [v for v in out if v is not None]


def not_owned(name: str, cluster: str, description: str | None) -> InputError:
    """The refusal of a VM that ``cluster`` does not own (the same words from every module; several such VMs are
    refused together by :func:`refuse_foreign`)."""
    return InputError(
        "machine %r is not owned by cluster %r: its description (%r) carries no marker of that cluster, so it is left "
        "as it is; give the machine another name, or remove it by hand" % (name, cluster, description or "")
    )


def check_owned(
    client: WhiteskyClient, cloudspace_id: str, vms: Iterable[VM], cluster: str, parallel: int = 32
) -> None:
    """Refuse, before anything is changed, when a VM of ``vms`` (``[{vm_id, name}]``) does not carry ``cluster``'s
    marker (each VM's description read in parallel)."""
    results, errors = run_parallel({vm["vm_id"]: partial(describe, client, cloudspace_id, vm) for vm in vms}, parallel)
    if errors:
        raise next(iter(errors.values()))
    refuse_foreign([v for v in results.values() if v is not None], cluster)


def refuse_foreign(vms: Iterable[DescribedVM], cluster: str) -> None:
    """Refuse, before anything is changed, when a VM of ``vms`` (each with the owner its marker names) is not
    ``cluster``'s: one error, naming each such VM in :func:`not_owned`'s words."""
    foreign = [v for v in vms if v["owner"] != cluster]
    if foreign:
        raise InputError(
            "; ".join(str(not_owned(v["name"], cluster, v.get("description"))) for v in foreign)
            + "; nothing was changed"
        )


def resolve_machines(vms: Sequence[VM], wanted: Iterable[str | int], cloudspace_id: str) -> list[tuple[int, str]]:
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


def find_vm(client: WhiteskyClient, cloudspace_id: str, name: str) -> VM | None:
    """The VM of that name in the cloudspace's listing, or None."""
    listing: list[VM] = client.vms(cloudspace_id)
    for vm in listing:
        if vm["name"] == name:
            return vm
    return None


def vgpu_ids_on(client: WhiteskyClient, cloudspace_id: str, vm_id: int) -> set[str]:
    """The ids of the vGPUs attached to a VM now (from its info)."""
    devices = client.get_vm(cloudspace_id, vm_id).get("devices") or []
    return {d.get("reference_id") for d in devices if d.get("type") == "VGPU"}
