# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A location's vGPU reservations: one paginated listing, each name decoded into its owner (plain Python, no
Ansible)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import known

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.naming import Owner
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import BilledVgpu, Reservation


def view(item: Reservation) -> dict[str, Any]:
    """A reservation as the modules return it, with its owner decoded."""
    vm = item.get("virtual_machine")
    owner = item.get("owner")
    out: dict[str, Any] = {
        "vgpu_id": item["vgpu_id"],
        "vgpu_name": item["vgpu_name"],
        "gpu_id": item["gpu_id"],
        "status": item.get("status"),
        "vm_id": vm.get("id") if vm else None,
        "vm_name": vm.get("name") if vm else None,
        "owned": owner is not None,
    }
    if owner is not None:
        out.update(cluster=owner.cluster, machine=owner.machine, slot=owner.slot, created=owner.created)
    return out


def listing(client: WhiteskyClient, location: str) -> Iterator[Reservation]:
    """The location's reservations (soft-deleted included), each with its ``owner`` decoded from its name (None for a
    name that is not ours), as the pages come: a scan that keeps none of them holds one page at a time."""
    for item in client.vgpus(location, include_deleted=True):
        item["owner"] = naming.decode(item.get("vgpu_name"))
        yield item


class Inventory:
    """One paginated listing of a location's reservations (soft-deleted included), decoded (:func:`listing`)."""

    def __init__(self, client: WhiteskyClient, location: str) -> None:
        self.items: list[Reservation] = list(listing(client, location))

    def owned(self, cluster: str | None = None, machine: str | None = None) -> list[Reservation]:
        """The reservations whose names decode: all of them, or ``cluster``'s (and ``machine``'s, when given)."""
        out = []
        for item in self.items:
            owner = item["owner"]
            if owner is None:
                continue
            if cluster is None or naming.owned_by(owner, cluster, machine):
                out.append(item)
        return out


def owner_of(item: Reservation) -> Owner:
    """The owner of a reservation that :meth:`Inventory.owned` returned (decoded: never None there)."""
    return known(item["owner"], "the owner of reservation %r" % item.get("vgpu_name"))


def deleted(item: Reservation) -> bool:
    """True when the reservation is in the recycle bin (soft-deleted: it still bills)."""
    return item.get("status") == "DELETED"


def attached_to(item: BilledVgpu) -> int | None:
    """The id of the VM the reservation is attached to, or None."""
    vm = item.get("virtual_machine")
    return vm.get("id") if vm else None
