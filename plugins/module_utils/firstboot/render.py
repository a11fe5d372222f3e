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
    KUBELET,
    PRELUDE,
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
#: The node label that says which accelerator a node brings: the cluster autoscaler's Cluster API provider names it
#: (``cluster-api/accelerator``), and a pod selects a GPU type with it.
GPU_LABEL = "cluster-api/accelerator"
#: A Kubernetes label value (63 characters at most) and a label key (an optional DNS-subdomain prefix and a name).
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)


def label_value(text: str) -> str:
    """A GPU type as a label value: each run of characters a label value cannot hold becomes one ``-``
    (``NVIDIA A100`` -> ``NVIDIA-A100``); refused when nothing fits in 63 characters."""
    value = re.sub(r"[^-A-Za-z0-9_.]+", "-", str(text)).strip("-_.")
    if not value or not _LABEL_VALUE.fullmatch(value):
        raise InputError(
            "GPU type %r cannot be a node label value: at most 63 letters, digits, '-', '_' or '.' once spaces"
            " become '-'" % text
        )
    return value


def gpu_node_labels(gpu_type: str | None) -> dict[str, str]:
    """The node labels a machine with GPUs of ``gpu_type`` gets at its first boot (none without a type)."""
    return {GPU_LABEL: label_value(gpu_type)} if gpu_type else {}


def kubelet_args(provider_id: str | None, node_labels: Mapping[str, str] | None) -> str:
    """The kubelet's extra arguments for the first boot (``--provider-id``, ``--node-labels``), checked."""
    args = []
    if provider_id:
        if not _PROVIDER_ID.fullmatch(provider_id):
            raise InputError(
                "invalid provider_id %r; expected SCHEME://PATH (letters, digits, . _ ~ / -)" % provider_id
            )
        args.append("--provider-id=" + provider_id)
    labels = dict(node_labels or {})
    for key, value in labels.items():
        if not isinstance(key, str) or not _LABEL_KEY.fullmatch(key) or len(key.rpartition("/")[2]) > 63:
            raise InputError("invalid node label key %r: [PREFIX/]NAME, a DNS subdomain and 63 characters" % (key,))
        if not isinstance(value, str) or not _LABEL_VALUE.fullmatch(value):
            raise InputError(
                "invalid value %r of node label %r: at most 63 letters, digits, '-', '_', '.'" % (value, key)
            )
    if labels:
        args.append("--node-labels=" + ",".join("%s=%s" % kv for kv in sorted(labels.items())))
    return " ".join(args)


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
    node_labels: Mapping[str, str] | None = None,
) -> str:
    """The user data for a new machine.

    A ``bootstrap`` script runs after the packages (and the GPU driver), inside the first boot, and
    its failure is the first boot's. A ``#cloud-config`` bootstrap (what Cluster
    API bootstrap providers emit) is sent beside the script in a MIME multipart
    document, which cloud-init runs in its own order.  ``gpu_driver`` (``{version, count, wait}``) adds the
    ``gpu-driver`` step: the pinned driver installed when ``version`` is set, and verified in any case.
    ``provider_id`` and ``node_labels`` reach the kubelet (``KUBELET_EXTRA_ARGS`` in ``/etc/default/kubelet``)
    before the bootstrap data runs.
    """
    if bootstrap and bootstrap.lstrip().startswith("#cloud-config"):
        script = render(packages, None, attempts, delay, lock_timeout, state_dir, provider_id, gpu_driver, node_labels)
        return multipart([("text/cloud-config", bootstrap), ("text/x-shellscript", script)])
    for name in packages:
        if not isinstance(name, str) or not _PACKAGE.fullmatch(name):
            raise InputError("invalid package name %r in first_boot packages" % name)
    _common(attempts, delay, lock_timeout)
    kubelet = kubelet_args(provider_id, node_labels)
    provider = KUBELET % {"arg": shlex.quote("KUBELET_EXTRA_ARGS=" + kubelet)} if kubelet else ""
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
