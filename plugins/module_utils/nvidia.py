# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU driver verification: parse ``nvidia-smi`` and check it against the pin (pure Python)."""

from __future__ import annotations

import re
import shutil
import subprocess

from ansible_collections.whitesky.capvco.plugins.module_utils.errors import WhiteskyError

QUERY = ["--query-gpu=driver_version,name", "--format=csv,noheader"]
_VERSION = re.compile(r"^\d+(\.\d+)*$")


class VerifyError(WhiteskyError):
    """Verification failed; ``details`` carries what nvidia-smi printed."""


def parse_query(text):
    """``[{"driver_version", "name"}]`` from ``nvidia-smi --query-gpu=driver_version,name --format=csv,noheader``."""
    gpus = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        version, sep, name = line.partition(",")
        version, name = version.strip(), name.strip()
        if not sep or not _VERSION.match(version) or not name:
            raise ValueError("not an nvidia-smi CSV line (driver_version, name): %r" % line)
        gpus.append({"driver_version": version, "name": name})
    return gpus


def version_matches(reported, pin):
    """``550.127.05`` satisfies the pins ``550``, ``550.127`` and ``550.127.05``."""
    return reported == pin or reported.startswith(pin + ".")


def check(gpus, expected_version, expected_count):
    """The problems with what was seen (empty when all is well)."""
    problems = []
    if len(gpus) < expected_count:
        problems.append("nvidia-smi sees %d GPU(s), at least %d expected" % (len(gpus), expected_count))
    if expected_version:
        wrong = sorted(
            {g["driver_version"] for g in gpus if not version_matches(g["driver_version"], expected_version)}
        )
        if wrong:
            problems.append("driver version %s does not match the pin %s" % (", ".join(wrong), expected_version))
    return problems


def verify(req):
    """Core of ``gpu_driver_verify``: run nvidia-smi, parse it, check it, or fail loudly with its output."""
    p = req.params
    pin = (p.get("expected_version") or "").strip()
    if pin and not _VERSION.match(pin):
        raise VerifyError("invalid expected_version %r: a driver branch or version such as 550 or 550.127.05" % pin, {})
    if p["expected_count"] < 0:
        raise VerifyError("expected_count must be 0 or more, got %d" % p["expected_count"], {})
    binary = shutil.which(p["nvidia_smi"]) or p["nvidia_smi"]
    try:
        proc = subprocess.run([binary] + QUERY, capture_output=True, text=True, timeout=p["timeout"], check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise VerifyError(
            "GPU driver verification failed: cannot run %s: %s" % (p["nvidia_smi"], exc),
            {"rc": None, "stdout": "", "stderr": str(exc)},
        ) from None
    output = {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
    if proc.returncode != 0:
        raise VerifyError(
            "GPU driver verification failed: nvidia-smi exited %d: %s"
            % (proc.returncode, (proc.stdout + proc.stderr).strip()[-800:]),
            output,
        )
    try:
        gpus = parse_query(proc.stdout)
    except ValueError as exc:
        raise VerifyError("GPU driver verification failed: %s" % exc, output) from None
    problems = check(gpus, pin, p["expected_count"])
    if problems:
        raise VerifyError(
            "GPU driver verification failed: %s. nvidia-smi printed: %s" % ("; ".join(problems), proc.stdout.strip()),
            output,
        )
    versions = sorted({g["driver_version"] for g in gpus})
    return {"changed": False, "gpus": gpus, "count": len(gpus), "driver_version": versions[0] if versions else None}
