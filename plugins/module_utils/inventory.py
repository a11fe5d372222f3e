# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A location's vGPU reservations: one paginated listing, each name decoded into its owner (pure Python)."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils import ownership


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
