# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The platform operations on one vGPU reservation: release, restore, attach, reserve (pure Python).

Each waits out the VM lock (409 while the VM is ``locked``) and transient
statuses, and a reserve whose answer is lost is resolved by looking its slot
up by name before any retry, so a slot is never bought twice.
"""

from __future__ import annotations

import random
import time

from ansible_collections.whitesky.capvco.plugins.module_utils import ownership
from ansible_collections.whitesky.capvco.plugins.module_utils.errors import ApiError, gone_is_done
from ansible_collections.whitesky.capvco.plugins.module_utils.lookups import Inventory, attached_to, deleted

RETRYABLE = frozenset((429, 502, 503, 504))


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
        self.sleep(random.uniform(0, min(5.0, 0.1 * (2**attempt))))

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

        self._retry(
            lambda: gone_is_done(
                self.client.delete_vgpu, self.location, item["vgpu_id"], detach=True, permanently=self.permanently
            ),
            cs,
            vm_id,
        )
        return True

    def restore(self, item):
        self._retry(lambda: self.client.call("restoreVGPU", location=self.location, vgpu_id=item["vgpu_id"]))

    def attach(self, item, vm_id):
        other = attached_to(item)
        if other is not None and other != vm_id:
            other_cs = item["virtual_machine"]["cloudspace_id"]
            self._retry(lambda: self.client.detach_vgpu(other_cs, other, item["vgpu_id"]), other_cs, other)
        self._retry(
            lambda: self.client.attach_vgpu(self.cloudspace_id, vm_id, item["vgpu_id"]), self.cloudspace_id, vm_id
        )

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
                return {
                    "vgpu_id": vgpu_id,
                    "vgpu_name": name,
                    "gpu_id": gpu_id,
                    "status": "ATTACHED",
                    "virtual_machine": {"id": vm_id},
                    "owner": ownership.decode(name),
                }
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
