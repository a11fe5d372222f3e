# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The platform's VM lock, as a retry policy (pure Python).

One VM takes one mutating operation at a time; a second one is refused with 409 while the VM shows ``locked``.
"""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils.errors import ApiError, missing_is_none


def vm_locked(client, cloudspace_id, vm_id):
    """A ``retry_if`` hook for the client: a 409 while the VM is ``locked`` was refused before anything changed.

    One VM takes one mutating operation at a time; a call that meets another
    one's lock is sent again, within the client's deadline.  :meth:`WhiteskyClient.call`
    adds it to every mutating call on a VM's path that brings no hook of its own.
    """

    def hook(exc):
        if exc.status != 409 or vm_id is None:
            return False
        if "locked" in (exc.message or ""):
            return True
        try:
            return bool(client.get_vm(cloudspace_id, vm_id).get("locked"))
        except ApiError:
            return False

    return hook


def wait_unlocked(client, cloudspace_id, vm_id):
    """Wait (within a call's deadline) until no operation holds the VM: what was sent to it has settled."""

    def unlocked():
        vm = missing_is_none(client.get_vm, cloudspace_id, vm_id)
        return vm is None or not vm.get("locked")

    client.wait_until(unlocked, "VM %s to be unlocked" % vm_id)
