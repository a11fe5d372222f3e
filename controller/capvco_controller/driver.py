"""A GPU VCOMachine's ``GPUDriverReady``: what its first boot reports of the pinned NVIDIA driver, read through the
platform's guest agent (``firstboot.status.info``), again every driver poll until it is verified."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import conditions as conds
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import status as first_boot
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot.errors import MachineNotFound
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub
from capvco_controller.context import DONE, Context, Result
from capvco_controller.objects import VCOMachine
from capvco_controller.scope import Scope

CONDITION = "GPUDriverReady"
MESSAGE_LIMIT = 4096


def driver(ctx: Context, scope: Scope, m: VCOMachine, cs_id: str, vm_id: int) -> Result:
    """``GPUDriverReady`` from the first boot's report; looked at again after the driver poll until the driver is
    verified (the first boot's verdict is final then).  A machine found gone is looked at again at once: the
    reconcile reads the VM by its id and reports it lost."""
    before = m.condition(CONDITION)
    try:
        cond = conds.given(
            first_boot.info(ctx.client(), cloudspace_id=cs_id, vm_id=vm_id, gpu=True)["gpu_driver_ready"]
        )
    except MachineNotFound as exc:
        cond = conds.false(CONDITION, "MachineNotFound", scrub(str(exc), MESSAGE_LIMIT), "Error")
    if cond.status == "False" and cond.message != before.get("message"):
        scope.event("GPUDriverFailed", cond.message, warning=True)
    scope.condition(cond)
    if cond.reason == "MachineNotFound":
        return Result(requeue_after=0.0)
    if cond.status == "True":
        return DONE
    return Result(requeue_after=ctx.settings.driver_poll)
