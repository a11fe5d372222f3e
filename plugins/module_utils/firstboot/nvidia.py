# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver on a node: run the driver fragment the first boot embeds, and report it (plain Python, no
Ansible).

The install and the verification are shell, in ``script.GPU_DRIVER``: one implementation, which the first boot of a
new machine embeds and the ``gpu_driver`` role's modules (``gpu_driver_install``, ``gpu_driver_verify``) run here,
as a script of its own with the same status file (``gpu-driver.status``).  This module only runs it and reads
what it says.
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import status as firstboot_status
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot.errors import DriverError, InvalidStatus

_LINE = re.compile(r"^(\d+(?:\.\d+)*), (.+)$")


def parse_query(text: str | None) -> list[dict[str, str]]:
    """``[{"driver_version", "name"}]`` from the lines of ``nvidia-smi --query-gpu=driver_version,name
    --format=csv,noheader`` (lines that are not GPUs are left out: the script has judged them)."""
    gpus = []
    for raw in (text or "").splitlines():
        found = _LINE.match(raw.strip())
        if found:
            gpus.append({"driver_version": found.group(1), "name": found.group(2).strip()})
    return gpus


_R = render.RETRIES


def run(
    state_dir: str,
    *,
    install: bool,
    verify: bool,
    version: str | None = "",
    count: int = 0,
    wait: int = 0,
    nvidia_smi: str | None = "nvidia-smi",
    attempts: int = _R["attempts"],
    delay: int = _R["delay"],
    lock_timeout: int = _R["lock_timeout"],
    check_mode: bool = False,
) -> dict[str, Any]:
    """Run the driver script; the status it wrote in ``state_dir``, or :class:`DriverError`."""
    script = render.render_gpu_driver(
        version=version or "",
        count=count,
        install=install,
        verify=verify,
        check=check_mode,
        attempts=attempts,
        delay=delay,
        lock_timeout=lock_timeout,
        wait=wait,
        nvidia_smi=nvidia_smi or "nvidia-smi",
        state_dir=state_dir,
    )
    status_file = os.path.join(state_dir, "gpu-driver.status")
    try:
        proc = subprocess.run(["/bin/sh", "-s"], input=script, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise DriverError("cannot run /bin/sh for the GPU driver: %s" % exc, {}) from None
    try:
        with open(status_file, encoding="utf-8", errors="replace") as fh:
            status = firstboot_status.parse(fh.read(firstboot_status.STATUS_LIMIT + 1))
    except (OSError, InvalidStatus) as exc:
        raise DriverError(
            "the GPU driver script left no status in %s (exit %d): %s %s"
            % (status_file, proc.returncode, exc, (proc.stdout + proc.stderr).strip()[-800:]),
            {"rc": proc.returncode},
        ) from None
    if proc.returncode != 0 or status.state != "ready":
        raise DriverError(
            "the GPU driver is not usable, failed at %s: %s" % (status.step, status.reason),
            {"step": status.step, "reason": status.reason, "log_tail": status.log_tail},
        )
    return dict(status.as_dict(), status_file=status_file)


def install(
    *,
    version: str,
    state_dir: str,
    attempts: int = _R["attempts"],
    delay: int = _R["delay"],
    lock_timeout: int = _R["lock_timeout"],
    check_mode: bool = False,
) -> dict[str, Any]:
    """Core of ``gpu_driver_install``: the pinned driver installed and held, nouveau blacklisted; in check mode,
    whether that would change anything."""
    status = run(
        state_dir,
        install=True,
        verify=False,
        version=version,
        check_mode=check_mode,
        attempts=attempts,
        delay=delay,
        lock_timeout=lock_timeout,
    )
    return {"changed": bool(status.get("changed")), "status_file": status["status_file"]}


def verify(
    *,
    state_dir: str,
    expected_version: str | None = "",
    expected_count: int = 1,
    nvidia_smi: str = "nvidia-smi",
    wait: int = 0,
) -> dict[str, Any]:
    """Core of ``gpu_driver_verify``: the driver fragment's verification (it changes nothing, in check mode too)."""
    status = run(
        state_dir,
        install=False,
        verify=True,
        version=expected_version or "",
        count=expected_count,
        wait=wait,
        nvidia_smi=nvidia_smi,
    )
    gpus = parse_query(status.get("nvidia_smi"))
    return {
        "changed": False,
        "gpus": gpus,
        "count": len(gpus),
        "driver_version": status.get("gpu_driver_version") or None,
        "status_file": status["status_file"],
    }
