# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The first-boot user data of a machine: retried package installs that fail loudly (pure Python).

This module puts the scripts together and checks what goes in (``script`` holds their shell,
``status`` reads what they report).

The script waits for the apt/dpkg lock, retries transient failures with
exponential backoff, then runs the wrapped bootstrap data (for example a
Cluster API bootstrap Secret). It always ends in one of two states, recorded
in ``/var/lib/capvco/first-boot.status`` (JSON: ``state``, ``step``,
``reason``, ``log_tail``) plus ``first-boot.ready`` or ``first-boot.failed``,
and a ``CAPVCO-FIRST-BOOT:`` line on the console. The lifecycle playbooks
read that status, with a deadline.
"""

from __future__ import annotations

import base64
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from typing import Any
from urllib.parse import quote

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot.script import (
    BOOTSTRAP,
    FINISH,
    GPU_DRIVER,
    GPU_STEP,
    PRELUDE,
    PROVIDER,
    STATE_DIR,
    TEMPLATE,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError

#: A Debian package, optionally pinned (``name=1.2*``); the first boot passes it to apt as written.
PACKAGE = r"[a-z0-9][a-z0-9+.:=~*-]*"
#: An NVIDIA driver branch (550) or version (550.127.05); empty: the image has the driver.
DRIVER_VERSION = r"([0-9]+(\.[0-9]+)*)?"
#: The first boot's retry settings when none are given: written here once (the cluster
#: spec's schema, the modules' options and the script's renderer all take them from here).
RETRIES = {"attempts": 5, "delay": 5, "lock_timeout": 600}
#: The retry options of the scripts (``first_boot``'s, and ``gpu_driver_install``'s), with the schema's defaults.
RETRY_OPTIONS = {key: dict(type="int", default=value) for key, value in RETRIES.items()}
#: The ``first_boot`` option of the modules that create machines (``machine``, ``machine_pool``).
OPTIONS = dict(
    type="dict",
    options=dict(
        packages=dict(type="list", elements="str", default=[]),
        **RETRY_OPTIONS,
        gpu_driver=dict(
            type="dict",
            options=dict(
                version=dict(type="str", default=""),
                count=dict(type="int", default=1),
                wait=dict(type="int", default=900),
            ),
        ),
    ),
)
_PACKAGE = re.compile(PACKAGE)

_PROVIDER_ID = re.compile(r"[a-z][a-z0-9+.-]*://[A-Za-z0-9._~/-]+")


_DRIVER_VERSION = re.compile(DRIVER_VERSION)


#: The platform takes user data in ``createVirtualMachine``'s query string, and an HTTP client takes at most 64 KiB
#: of query (httpx: 65,536 characters); the other parameters of that call keep to the last KiB.
USER_DATA_LIMIT = 65536 - 1024


def check_user_data(data: str, what: str) -> str:
    """Refuse user data that cannot reach the platform, before anything is created: its size and the limit."""
    size = len(quote(data or "", safe=""))  # at least what the client sends (it leaves a few more characters as is)
    if size > USER_DATA_LIMIT:
        raise InputError(
            "the user data of %s is %d bytes once URL-encoded (%d as text); the platform takes user data in the query "
            "string, which holds at most %d bytes of it: make bootstrap_data or the package list smaller"
            % (what, size, len(data), USER_DATA_LIMIT)
        )
    return data


def _common(attempts: int, delay: int, lock_timeout: int) -> None:
    if attempts < 1 or delay < 0 or lock_timeout < 0:
        raise InputError("the scripts need attempts >= 1, delay >= 0 and lock_timeout >= 0")


def gpu_driver_vars(
    version: object = "", count: int = 1, wait: int = 900, nvidia_smi: str = "nvidia-smi"
) -> dict[str, Any]:
    """The driver fragment's settings, checked: ``{version, count, wait, nvidia_smi}`` shell-quoted."""
    version = "" if version is None else str(version).strip()
    if not _DRIVER_VERSION.fullmatch(version):
        raise InputError(
            "invalid GPU driver version %r: a driver branch or version such as 550 or 550.127.05, or empty for a"
            " driver the image has" % version
        )
    if count < 0 or wait < 0:
        raise InputError("the GPU driver check needs count >= 0 and wait >= 0, got count=%r wait=%r" % (count, wait))
    return {"version": shlex.quote(version), "count": count, "wait": wait, "nvidia_smi": shlex.quote(nvidia_smi)}


def render(
    packages: Sequence[str] = (),
    bootstrap: str | None = None,
    attempts: int = RETRIES["attempts"],
    delay: int = RETRIES["delay"],
    lock_timeout: int = RETRIES["lock_timeout"],
    state_dir: str = STATE_DIR,
    provider_id: str | None = None,
    gpu_driver: Mapping[str, Any] | None = None,
) -> str:
    """The user data for a new machine.

    A ``bootstrap`` script runs after the packages (and the GPU driver), inside the first boot, and
    its failure is the first boot's. A ``#cloud-config`` bootstrap (what Cluster
    API bootstrap providers emit) is sent beside the script in a MIME multipart
    document, which cloud-init runs in its own order.  ``gpu_driver`` (``{version, count, wait}``) adds the
    ``gpu-driver`` step: the pinned driver installed when ``version`` is set, and verified in any case.
    """
    if bootstrap and bootstrap.lstrip().startswith("#cloud-config"):
        script = render(packages, None, attempts, delay, lock_timeout, state_dir, provider_id, gpu_driver)
        return multipart([("text/cloud-config", bootstrap), ("text/x-shellscript", script)])
    for name in packages:
        if not isinstance(name, str) or not _PACKAGE.fullmatch(name):
            raise InputError("invalid package name %r in first_boot packages" % name)
    _common(attempts, delay, lock_timeout)
    if provider_id and not _PROVIDER_ID.fullmatch(provider_id):
        raise InputError("invalid provider_id %r; expected SCHEME://PATH (letters, digits, . _ ~ / -)" % provider_id)
    provider = PROVIDER % {"arg": shlex.quote("KUBELET_EXTRA_ARGS=--provider-id=" + provider_id)} if provider_id else ""
    gpu = ""
    if gpu_driver is not None:
        settings = gpu_driver_vars(gpu_driver.get("version"), gpu_driver.get("count", 1), gpu_driver.get("wait", 900))
        gpu = GPU_STEP % dict(settings, fragment=GPU_DRIVER % {})
    block = ""
    if bootstrap:
        data = base64.b64encode(bootstrap.encode("utf-8")).decode("ascii")
        block = BOOTSTRAP % {"data": shlex.quote(data)}
    return (
        TEMPLATE
        % {
            "what": "first boot",
            "name": "first-boot",
            "tag": "CAPVCO-FIRST-BOOT",
            "state_dir": shlex.quote(state_dir),
            "packages": shlex.quote(" ".join(packages)),
            "attempts": attempts,
            "delay": delay,
            "lock_timeout": lock_timeout,
            "gpu": gpu,
            "bootstrap": block,
            "provider": provider,
        }
        + FINISH
    )


def render_gpu_driver(
    version: str = "",
    count: int = 1,
    install: bool = True,
    verify: bool = True,
    check: bool = False,
    attempts: int = RETRIES["attempts"],
    delay: int = RETRIES["delay"],
    lock_timeout: int = RETRIES["lock_timeout"],
    wait: int = 60,
    nvidia_smi: str = "nvidia-smi",
    state_dir: str = STATE_DIR,
) -> str:
    """The driver fragment as a script of its own (``roles/gpu_driver`` runs it through the ``gpu_driver``
    module): the same prelude and status file as the first boot, under the name ``gpu-driver``."""
    _common(attempts, delay, lock_timeout)
    settings = gpu_driver_vars(version, count, wait, nvidia_smi)
    steps = ["CHECK=%d" % bool(check)]
    if install and str(version or "").strip():
        steps.append("gpu_driver_install")
    if verify:
        steps += ["gpu_driver_load", "gpu_driver_verify"]
    head = PRELUDE % {
        "what": "GPU driver",
        "name": "gpu-driver",
        "tag": "CAPVCO-GPU-DRIVER",
        "state_dir": shlex.quote(state_dir),
        "attempts": attempts,
        "delay": delay,
        "lock_timeout": lock_timeout,
    }
    body = (
        "GPU_DRIVER_VERSION=%(version)s\nGPU_COUNT=%(count)d\nGPU_WAIT=%(wait)d\nNVIDIA_SMI=%(nvidia_smi)s\n" % settings
    )
    return head + body + GPU_DRIVER % {} + "\n".join(steps) + "\n" + FINISH


def multipart(parts: Iterable[tuple[str, str]]) -> str:
    """A cloud-init MIME multipart user data document of ``[(content type, text)]``."""
    doc = MIMEMultipart(boundary="capvco-first-boot")
    for ctype, text in parts:
        subtype = ctype.split("/", 1)[1]
        doc.attach(MIMEText(text, _subtype=subtype, _charset="utf-8"))
    return doc.as_string()
