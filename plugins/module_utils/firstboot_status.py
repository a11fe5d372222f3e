# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a machine's first boot reports: its status file read through the platform's guest agent, and a GPU
machine's ``GPUDriverReady`` condition (pure Python)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.errors import ApiError
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot_sh import STATUS_FILE

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.client import WhiteskyClient


def read_status(
    client: WhiteskyClient, cloudspace_id: str, vm_id: int, path: str = STATUS_FILE
) -> tuple[dict[str, Any] | None, str | None]:
    """What the first boot reports, read through the platform's guest agent (``readFile``): ``(status, why)``:
    the status document, or None and why there is none yet (no file, no agent, a file that is not JSON)."""
    try:
        text = client.read_file(cloudspace_id, vm_id, path)
    except ApiError as exc:
        if exc.status in (401, 403):
            raise
        return None, "the platform cannot read %s on VM %s yet: %s" % (path, vm_id, exc.message)
    try:
        status = json.loads(text)
    except ValueError:
        return None, "%s on VM %s is not a status document yet" % (path, vm_id)
    if not isinstance(status, dict) or status.get("state") not in ("running", "ready", "failed"):
        return None, "%s on VM %s is not a status document: %r" % (path, vm_id, text[:200])
    return status, None


def gpu_driver_condition(status: dict[str, Any] | None, why: str | None = None) -> dict[str, str]:
    """The ``GPUDriverReady`` condition of a GPU machine from what its first boot reports.

    Unknown while there is no verdict (no report, or the first boot still running); False with the step and
    the reason when the first boot failed (or reported ready without having verified a driver); True with the
    driver version seen.  None of these sets a failure reason: a first boot can be run again on the machine,
    and a machine whose first boot failed never becomes a Node (Cluster API's health checks replace it).
    """
    cond = {"type": "GPUDriverReady"}
    if status is None:
        return dict(cond, status="Unknown", reason="WaitingForFirstBoot", message=why or "no report yet")
    if status["state"] == "running":
        msg = "the first boot is at step %s" % status.get("step")
        return dict(cond, status="Unknown", reason="FirstBootRunning", message=msg)
    if status["state"] == "failed":
        msg = "the first boot failed at %s: %s" % (status.get("step"), (status.get("reason") or "").strip())
        return dict(cond, status="False", severity="Error", reason="FirstBootFailed", message=msg)
    seen = status.get("gpu_driver_version") or ""
    if not seen:
        msg = "the first boot reported ready without a gpu-driver step (created before it had one?)"
        return dict(cond, status="False", severity="Warning", reason="DriverNotVerified", message=msg)
    gpus = len([line for line in (status.get("nvidia_smi") or "").splitlines() if line.strip()])
    return dict(cond, status="True", reason="DriverVerified", message="NVIDIA driver %s, %d GPU(s)" % (seen, gpus))


def info(
    client: WhiteskyClient,
    *,
    cloudspace_id: str,
    vm_id: int,
    path: str = STATUS_FILE,
    gpu: bool = False,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Core of ``first_boot_info``: a machine's first-boot status, through the platform; with ``gpu``, its
    ``GPUDriverReady`` condition."""
    status, why = read_status(client, cloudspace_id, vm_id, path)
    result: dict[str, Any] = {"reported": status is not None, "status": status or {}, "message": why or ""}
    if gpu:
        result["gpu_driver_ready"] = gpu_driver_condition(status, why)
    return result
