"""A VCOMachine whose VM was lost behind the controller's back (deleted on the portal, by another tool, with its
cloudspace): reported, its vGPUs released, never made again."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import conditions as conds
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import release
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.orphans import OrphanCheck, machines_in_location
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import Inventory, attached_to, owner_of
from capvco_controller.context import DONE, Context, Result
from capvco_controller.objects import VCOMachine
from capvco_controller.scope import Scope

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

MESSAGE_LIMIT = 4096
#: The condition reason of a lost VM (terminal: ``objects.TERMINAL``), and the v1beta1 ``failureReason``: Cluster
#: API's ``UpdateError`` (capierrors.UpdateMachineError, what other providers report for an instance deleted behind
#: their back).
VM_DELETED = "VMDeleted"
VM_DELETED_FAILURE = "UpdateError"


def lost(ctx: Context, scope: Scope, m: VCOMachine, location: str, seen: list[dict[str, Any]]) -> Result:
    """The VM the status records is gone (or its id is now another VM's): it is not made again (a VM made again
    would boot without its bootstrap data, which was for one boot, and never become a Node), as Cluster API expects
    of an infrastructure provider: its conditions, and so ``Ready``, False with the terminal reason ``VMDeleted``
    (and, while v1beta1 is served, its ``failureReason``), so that the Machine's owner replaces it (a
    MachineHealthCheck).  The vGPU reservations it held are released at once (a reservation without its VM still
    bills): those the orphan rule finds without their machine and attached to no VM.  A failure to release is the
    platform's error, raised (the caller records it, and the key is retried with backoff)."""
    what = "VM %s (%s)" % (m.vm_name, m.vm_id)
    why = (
        "is gone from the platform"
        if not seen
        else "is now %r of %s, not this machine" % (seen[0].get("name"), seen[0].get("owner") or "no cluster")
    )
    released, kept = release_lost(ctx.client(), location, m.cluster, m.vm_name)
    message = (
        "%s %s (deleted behind the controller's back); a lost VM is not made again: delete the Machine or let a "
        "MachineHealthCheck replace it" % (what, why)
    )
    if released:
        message += "; its %d vGPU reservation(s) were released: %s" % (
            len(released),
            ", ".join(sorted(str(i["vgpu_name"]) for i in released)),
        )
    if kept:
        message += "; %d reservation(s) attached to another VM are left: %s" % (
            len(kept),
            ", ".join(sorted(str(i["vgpu_name"]) for i in kept)),
        )
    message = scrub(message, MESSAGE_LIMIT)
    scope.condition(conds.false("VMProvisioned", VM_DELETED, message, "Error"))
    if m.gpu_count > 0:
        scope.condition(conds.false("GPUsReserved", VM_DELETED, message, "Error"))
    scope.provisioned(False)
    scope.terminal(VM_DELETED_FAILURE, message)
    scope.reserved(kept)
    scope.event(VM_DELETED, message, warning=True)
    return DONE


def release_lost(client: WhiteskyClient, location: str, cluster: str, vm_name: str) -> tuple[list[Any], list[Any]]:
    """``(released, kept)`` of the reservations a lost machine owns: those whose machine the orphan rule finds gone
    from the location (listed before its VMs, so that one made meanwhile is never taken for an orphan) and that are
    attached to no VM are released, permanently; the others are kept."""
    owned = Inventory(client, location).owned(cluster, vm_name)
    if not owned:
        return [], []
    orphan = OrphanCheck(machines_in_location(client, location))
    going = [i for i in owned if orphan(owner_of(i)) and attached_to(i) is None]
    if going:
        release.release(client, location, going, permanently=True, parallel=4)
    return going, [i for i in owned if i not in going]
