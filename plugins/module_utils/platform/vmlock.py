# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The platform's VM lock, as a retry policy (pure Python).

One VM takes one mutating operation at a time; a second one is refused with 409 while the VM shows ``locked``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError, missing_is_none

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.transport import Transport


class VmClient(Protocol):
    """What the lock's policy needs of ``caller.Caller`` (which imports this module): a VM's info, and the
    transport whose deadlines a wait keeps."""

    @property
    def transport(self) -> Transport: ...

    def get_vm(self, cloudspace_id: str, vm_id: int) -> Any: ...


def vm_locked(client: VmClient, cloudspace_id: str | None, vm_id: int | None) -> Callable[[ApiError], bool]:
    """A ``retry_if`` hook for the client: a 409 while the VM is ``locked`` was refused before anything changed.

    One VM takes one mutating operation at a time; a call that meets another
    one's lock is sent again, within the client's deadline.  :meth:`WhiteskyClient.call`
    adds it to every mutating call on a VM's path that brings no hook of its own.
    """

    def hook(exc: ApiError) -> bool:
        if exc.status != 409 or vm_id is None:
            return False
        if "locked" in (exc.message or ""):
            return True
        if cloudspace_id is None:  # no VM to look at: not its lock
            return False
        try:
            return bool(client.get_vm(cloudspace_id, vm_id).get("locked"))
        except ApiError:
            return False

    return hook


def wait_unlocked(client: VmClient, cloudspace_id: str, vm_id: int) -> None:
    """Wait (within a call's deadline, or the operation's it runs in when that is earlier: ``Deadlines.operation``,
    ``client.transport.deadlines``) until no operation holds the VM: what was sent to it has settled."""

    def unlocked() -> bool:
        vm = missing_is_none(client.get_vm, cloudspace_id, vm_id)
        return vm is None or not vm.get("locked")

    client.transport.deadlines.wait_until(unlocked, "VM %s to be unlocked" % vm_id)
