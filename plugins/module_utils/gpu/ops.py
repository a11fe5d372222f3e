# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The platform operations on one vGPU reservation: release, restore, attach, reserve (plain Python, no Ansible).

The client retries (``client.transport.retry``: one layer, with a deadline); what
these add is theirs: a VM that is ``locked`` by another operation is waited
out (the ``vm_locked`` hook), and a reserve or attach whose outcome is
unknown (a lost answer, a timeout, a 5xx after sending) is resolved before
anything else touches that slot: wait until the VM is no longer locked (the
request may still be running on the platform), then look the slot up by
name; it is sent again only when the platform shows it absent.  "Already
attached to this VM" is success.  An attach or a reserve is one operation with
one deadline (``client.transport.deadlines.operation()``): its waits for the VM lock, its lookups
and its retries all end by it, however deeply they nest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    Resolved,
    WhiteskyError,
    gone_is_done,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.vmlock import vm_locked, wait_unlocked
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import (
    Inventory,
    attached_to,
    deleted,
    owner_of,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import vgpu_ids_on

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import Reservation


class Ops:
    """The platform mutations of reservations in one location (and cloudspace)."""

    def __init__(
        self, client: WhiteskyClient, location: str, cloudspace_id: str | None = None, permanently: bool = True
    ) -> None:
        self.client = client
        self.location = location
        self.cloudspace_id = cloudspace_id
        self.permanently = permanently

    def release(self, item: Reservation) -> bool:
        """Detach and delete (permanently unless told otherwise); gone already counts as done."""
        if deleted(item) and not self.permanently:
            return False
        vm: Mapping[str, Any] = item.get("virtual_machine") or {}
        gone_is_done(
            self.client.delete_vgpu,
            self.location,
            item["vgpu_id"],
            detach=True,
            permanently=self.permanently,
            retry_if=vm_locked(self.client, vm.get("cloudspace_id"), vm.get("id")),
        )
        return True

    def restore(self, item: Reservation) -> None:
        self.client.restore_vgpu(self.location, item["vgpu_id"])

    def attach(self, item: Reservation, vm_id: int) -> None:
        """Detach from another VM if need be, then attach: within one deadline, the lock's waits included."""
        with self.client.transport.deadlines.operation():
            self._attach(item, vm_id)

    def _attach(self, item: Reservation, vm_id: int) -> None:
        other = attached_to(item)
        if other is not None and other != vm_id:
            on: Mapping[str, Any] = item.get("virtual_machine") or {}
            other_cs = on["cloudspace_id"]
            self.client.detach_vgpu(other_cs, other, item["vgpu_id"], retry_if=vm_locked(self.client, other_cs, other))
        cs = self._cloudspace()

        def attached_here(_exc: Exception | None = None) -> Resolved | None:
            wait_unlocked(self.client, cs, vm_id)
            return Resolved(item["vgpu_id"]) if item["vgpu_id"] in vgpu_ids_on(self.client, cs, vm_id) else None

        try:
            self.client.attach_vgpu(
                cs, vm_id, item["vgpu_id"], retry_if=vm_locked(self.client, cs, vm_id), resolve=attached_here
            )
        except ApiError as exc:
            if exc.status != 409 or attached_here() is None:
                raise

    def _cloudspace(self) -> str:
        """The cloudspace of the VMs that an attach or a reserve targets (the Ops of a sweep have none)."""
        if self.cloudspace_id is None:
            raise WhiteskyError("an attach or a reserve needs the VM's cloudspace")
        return self.cloudspace_id

    def lookup(self, cluster: str, machine: str, slot: int) -> Reservation | None:
        """The live reservation of the slot, from a fresh listing, or None."""
        for item in Inventory(self.client, self.location).owned(cluster, machine):
            if owner_of(item).slot == slot and not deleted(item):
                return item
        return None

    def reserve(self, cluster: str, machine: str, vm_id: int, slot: int, gpu_id: str) -> Reservation:
        """Reserve-and-attach slot ``slot``; never twice, even when an answer is lost; within one deadline."""
        with self.client.transport.deadlines.operation():
            return self._reserve(cluster, machine, vm_id, slot, gpu_id)

    def _reserve(self, cluster: str, machine: str, vm_id: int, slot: int, gpu_id: str) -> Reservation:
        name = naming.encode(cluster, machine, slot)
        cs = self._cloudspace()

        def resolve(_exc: Exception) -> Resolved | None:
            """The outcome is unknown: once the VM is settled, the slot's reservation exists or it never will."""
            wait_unlocked(self.client, cs, vm_id)
            item = self.lookup(cluster, machine, slot)
            return None if item is None else Resolved(item)

        answer = self.client.reserve_attach_vgpu(
            cs,
            vm_id,
            gpu_id,
            name,
            retry_if=vm_locked(self.client, cs, vm_id),
            resolve=resolve,
        )
        if isinstance(answer, Resolved):
            item = answer.value
            if attached_to(item) != vm_id:
                self.attach(item, vm_id)
                item["virtual_machine"] = {"id": vm_id}
                item["status"] = "ATTACHED"
            return item
        return {
            "vgpu_id": answer,
            "vgpu_name": name,
            "gpu_id": gpu_id,
            "status": "ATTACHED",
            "virtual_machine": {"id": vm_id},
            "owner": naming.decode(name),
        }
