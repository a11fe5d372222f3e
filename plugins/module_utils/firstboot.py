# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The first-boot user data of a machine: retried package installs that fail loudly (pure Python).

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
import json
import re
import shlex
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from urllib.parse import quote

from ansible_collections.whitesky.capvco.plugins.module_utils import clusterspec
from ansible_collections.whitesky.capvco.plugins.module_utils.errors import ApiError, InputError

#: The retry options of the scripts (``first_boot``'s, and ``gpu_driver_install``'s), with the schema's defaults.
RETRY_OPTIONS = {key: dict(type="int", default=value) for key, value in clusterspec.RETRIES.items()}
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
STATE_DIR = "/var/lib/capvco"
STATUS_FILE = STATE_DIR + "/first-boot.status"
_PACKAGE = re.compile(clusterspec.PACKAGE)

#: What every script of the collection starts with (the first boot, and roles/gpu_driver's run of the driver
#: fragment): a log, a JSON status file that says ready or failed with the step and reason, the retry with
#: backoff and the loud failure.  ``name`` names the files under the state directory, ``tag`` the console line.
PRELUDE = r"""#!/bin/sh
# whitesky.capvco %(what)s: retried installs that fail loudly.
set -u
set -f  # no pathname expansion: a package list or a pin (550.127.05*) goes to apt as written
STATE_DIR=%(state_dir)s
NAME=%(name)s
TAG=%(tag)s
ATTEMPTS=%(attempts)d
DELAY=%(delay)d
LOCK_TIMEOUT=%(lock_timeout)d
mkdir -p "$STATE_DIR"
LOG="$STATE_DIR/$NAME.log"
rm -f "$STATE_DIR/$NAME.ready" "$STATE_DIR/$NAME.failed" "$STATE_DIR/$NAME.status"
exec 3>&1
exec >>"$LOG" 2>&1
STEP=start
GPU_DRIVER_SEEN=""
GPU_SMI_OUT=""
CHANGED=false

json_escape() {  # drop control characters, escape, and fold lines into literal \n
  tr -d '\000-\010\013-\037\177' | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/ /g' \
    | awk 'NR > 1 {printf "\\n"} {printf "%%s", $0}'
}

status() {  # state reason
  tail_text=$(tail -n 30 "$LOG" | json_escape)
  reason=$(printf '%%s' "$2" | json_escape)
  smi=$(printf '%%s' "$GPU_SMI_OUT" | json_escape)
  printf '{"state": "%%s", "step": "%%s", "reason": "%%s", "gpu_driver_version": "%%s", ' "$1" "$STEP" "$reason" \
    "$GPU_DRIVER_SEEN" > "$STATE_DIR/$NAME.status.tmp"
  printf '"nvidia_smi": "%%s", "changed": %%s, "log_tail": "%%s"}\n' "$smi" "$CHANGED" "$tail_text" \
    >> "$STATE_DIR/$NAME.status.tmp"
  mv "$STATE_DIR/$NAME.status.tmp" "$STATE_DIR/$NAME.status"
}

fail() {
  echo "$NAME failed at $STEP: $1"
  tail -n 30 "$LOG" > "$STATE_DIR/$NAME.failed"
  status failed "$1"
  echo "$TAG: FAILED at $STEP: $1" >&3
  [ -w /dev/console ] && echo "$TAG: FAILED at $STEP: $1" > /dev/console
  exit 1
}

retry() {  # retry with exponential backoff: retry CMD...
  n=1; d=$DELAY
  while :; do
    "$@" && return 0
    [ "$n" -ge "$ATTEMPTS" ] && { echo "giving up after $n attempt(s): $*"; return 1; }
    echo "attempt $n of $ATTEMPTS failed; retrying in ${d}s: $*"
    sleep "$d"; n=$((n + 1)); d=$((d * 2))
  done
}

apt_says() {  # apt's own error lines, from the log, for a failure's reason
  grep -E '^(E|Err|W):' "$LOG" | tail -n 4 | tr '\n' ' '
}

APT="apt-get -q -o DPkg::Lock::Timeout=$LOCK_TIMEOUT -o Acquire::Retries=0"
export DEBIAN_FRONTEND=noninteractive
status running "started"
"""

#: The NVIDIA driver, one implementation: the first boot embeds it, and roles/gpu_driver runs it (through the
#: ``gpu_driver`` module).  GPU_DRIVER_VERSION is a branch (550) or a version (550.127.05): the branch's packages
#: are installed, pinned to the version when one is given, held, with nouveau blacklisted; empty means the image
#: has the driver.  The verification waits up to GPU_WAIT seconds for nvidia-smi to list GPU_COUNT GPUs (vGPUs
#: are attached to a running machine), then checks every GPU's driver against the pin.  CHECK=1 changes
#: nothing and says, in CHANGED, whether the install would.
GPU_DRIVER = r"""
GPU_BLACKLIST=/etc/modprobe.d/blacklist-nouveau.conf
GPU_BLACKLIST_TEXT='# written by whitesky.capvco: the NVIDIA driver owns the GPUs
blacklist nouveau
options nouveau modeset=0'
gpu_driver_branch() { echo "${GPU_DRIVER_VERSION%%%%.*}"; }
gpu_driver_held() { b=$(gpu_driver_branch); echo "nvidia-headless-$b-server nvidia-utils-$b-server"; }
# the branch's packages, pinned to the version when there is one, and the kernel's headers
gpu_driver_packages() {
  pin=""
  [ "$(gpu_driver_branch)" = "$GPU_DRIVER_VERSION" ] || pin="=$GPU_DRIVER_VERSION*"
  for p in $(gpu_driver_held); do printf '%%s%%s ' "$p" "$pin"; done
  echo "linux-headers-$(uname -r)"
}
# shellcheck disable=SC2046 # (here and below) a package list is split on purpose; globbing is off (set -f)
gpu_driver_installed() { dpkg-query -W -f '${Package}=${Version} ' $(gpu_driver_held) 2>/dev/null; }
# shellcheck disable=SC2046
gpu_driver_apt() {
  $APT update --error-on=any \
    && $APT install -y --no-install-recommends --allow-change-held-packages $(gpu_driver_packages)
}

# shellcheck disable=SC2046
gpu_driver_install() {
  STEP=gpu-driver
  if [ "${CHECK:-0}" = 1 ]; then
    [ "$(cat "$GPU_BLACKLIST" 2>/dev/null)" = "$GPU_BLACKLIST_TEXT" ] || CHANGED=true
    $APT install -s --no-install-recommends --allow-change-held-packages $(gpu_driver_packages) \
      | grep -q '^Inst ' && CHANGED=true
    for p in $(gpu_driver_held); do apt-mark showhold | grep -qx "$p" || CHANGED=true; done
    return 0
  fi
  if [ "$(cat "$GPU_BLACKLIST" 2>/dev/null)" != "$GPU_BLACKLIST_TEXT" ]; then
    { mkdir -p /etc/modprobe.d && printf '%%s\n' "$GPU_BLACKLIST_TEXT" > "$GPU_BLACKLIST.tmp" \
      && mv "$GPU_BLACKLIST.tmp" "$GPU_BLACKLIST"; } || fail "could not blacklist nouveau in $GPU_BLACKLIST"
    CHANGED=true
  fi
  before=$(gpu_driver_installed)
  retry gpu_driver_apt || fail "installing the NVIDIA driver $GPU_DRIVER_VERSION ($(gpu_driver_packages)) failed \
after $ATTEMPTS attempt(s); apt said: $(apt_says)"
  apt-mark hold $(gpu_driver_held) >/dev/null || fail "could not hold $(gpu_driver_held)"
  [ "$(gpu_driver_installed)" = "$before" ] || CHANGED=true
}

gpu_driver_load() {  # the installed kernel module, without a reboot when nouveau does not hold the GPUs
  $NVIDIA_SMI >/dev/null 2>&1 && return 0
  command -v modprobe >/dev/null || return 0
  [ -d /sys/module/nouveau ] && modprobe -r nouveau
  modprobe nvidia || true
}

gpu_driver_verify() {
  STEP=gpu-driver
  deadline=$(($(date +%%s) + GPU_WAIT))
  while :; do
    GPU_SMI_OUT=$($NVIDIA_SMI --query-gpu=driver_version,name --format=csv,noheader 2>&1)
    rc=$?
    count=$(printf '%%s\n' "$GPU_SMI_OUT" | grep -cE '^[0-9]+(\.[0-9]+)*, .')
    [ "$rc" = 0 ] && [ "$count" -ge "$GPU_COUNT" ] && break
    [ "$rc" = 127 ] && fail "cannot run $NVIDIA_SMI: no NVIDIA driver is installed"
    [ "$(date +%%s)" -ge "$deadline" ] && break
    echo "nvidia-smi: exit $rc, $count GPU(s) of $GPU_COUNT; waiting for the driver and the GPUs"
    sleep 5
  done
  said=$(printf '%%s' "$GPU_SMI_OUT" | tail -n 8 | tr '\n' ';')
  [ "$rc" = 0 ] || fail "nvidia-smi exited $rc after ${GPU_WAIT}s: $said"
  wrong=""
  for v in $(printf '%%s\n' "$GPU_SMI_OUT" | sed -n 's/^\([0-9][0-9.]*\), .*/\1/p' | sort -u); do
    GPU_DRIVER_SEEN=${GPU_DRIVER_SEEN:-$v}
    [ -z "$GPU_DRIVER_VERSION" ] && continue
    case "$v" in "$GPU_DRIVER_VERSION" | "$GPU_DRIVER_VERSION".*) ;; *) wrong="$wrong $v" ;; esac
  done
  [ -z "$wrong" ] || fail "driver version$wrong does not match the pin $GPU_DRIVER_VERSION; nvidia-smi printed: $said"
  [ "$count" -ge "$GPU_COUNT" ] \
    || fail "nvidia-smi sees $count GPU(s), at least $GPU_COUNT expected (waited ${GPU_WAIT}s); it printed: $said"
}
"""

#: The first boot's driver step: install when pinned, load, verify (the step is ``gpu-driver``).
GPU_STEP = r"""GPU_DRIVER_VERSION=%(version)s
GPU_COUNT=%(count)d
GPU_WAIT=%(wait)d
NVIDIA_SMI=%(nvidia_smi)s
%(fragment)s
[ -n "$GPU_DRIVER_VERSION" ] && gpu_driver_install
gpu_driver_load
gpu_driver_verify
"""

TEMPLATE = (
    PRELUDE
    + r"""apt_update() { $APT update --error-on=any; }  # a repository that failed is an error, not a warning
# shellcheck disable=SC2086 # the package list is split on purpose; globbing is off (set -f)
apt_install() { $APT update --error-on=any && $APT install -y --no-install-recommends $PACKAGES; }
PACKAGES=%(packages)s
if [ -n "$PACKAGES" ]; then
  STEP=apt-update
  retry apt_update || fail "apt-get update failed $ATTEMPTS time(s)"
  STEP=apt-install
  retry apt_install || fail "installing $PACKAGES failed $ATTEMPTS time(s)"
fi
%(gpu)s%(provider)s%(bootstrap)s"""
)

FINISH = r"""STEP="done"
touch "$STATE_DIR/$NAME.ready"
status ready "all steps done"
echo "$TAG: READY" >&3
"""

BOOTSTRAP = r"""STEP=bootstrap
echo %(data)s | base64 -d > "$STATE_DIR/bootstrap.sh"
chmod 0700 "$STATE_DIR/bootstrap.sh"
"$STATE_DIR/bootstrap.sh" || fail "the bootstrap data exited $?"
"""


PROVIDER = r"""STEP=kubelet-provider-id
{ mkdir -p /etc/default && echo %(arg)s >> /etc/default/kubelet; } || fail "could not write /etc/default/kubelet"
"""
_PROVIDER_ID = re.compile(r"[a-z][a-z0-9+.-]*://[A-Za-z0-9._~/-]+")


_DRIVER_VERSION = re.compile(clusterspec.DRIVER_VERSION)


#: The platform takes user data in ``createVirtualMachine``'s query string, and an HTTP client takes at most 64 KiB
#: of query (httpx: 65,536 characters); the other parameters of that call keep to the last KiB.
USER_DATA_LIMIT = 65536 - 1024


def check_user_data(data, what):
    """Refuse user data that cannot reach the platform, before anything is created: its size and the limit."""
    size = len(quote(data or "", safe=""))  # at least what the client sends (it leaves a few more characters as is)
    if size > USER_DATA_LIMIT:
        raise InputError(
            "the user data of %s is %d bytes once URL-encoded (%d as text); the platform takes user data in the query "
            "string, which holds at most %d bytes of it: make bootstrap_data or the package list smaller"
            % (what, size, len(data), USER_DATA_LIMIT)
        )
    return data


def _common(attempts, delay, lock_timeout):
    if attempts < 1 or delay < 0 or lock_timeout < 0:
        raise InputError("the scripts need attempts >= 1, delay >= 0 and lock_timeout >= 0")


def gpu_driver_vars(version="", count=1, wait=900, nvidia_smi="nvidia-smi"):
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
    packages=(),
    bootstrap=None,
    attempts=clusterspec.RETRIES["attempts"],
    delay=clusterspec.RETRIES["delay"],
    lock_timeout=clusterspec.RETRIES["lock_timeout"],
    state_dir=STATE_DIR,
    provider_id=None,
    gpu_driver=None,
):
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
    version="",
    count=1,
    install=True,
    verify=True,
    check=False,
    attempts=clusterspec.RETRIES["attempts"],
    delay=clusterspec.RETRIES["delay"],
    lock_timeout=clusterspec.RETRIES["lock_timeout"],
    wait=60,
    nvidia_smi="nvidia-smi",
    state_dir=STATE_DIR,
):
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


def multipart(parts):
    """A cloud-init MIME multipart user data document of ``[(content type, text)]``."""
    doc = MIMEMultipart(boundary="capvco-first-boot")
    for ctype, text in parts:
        subtype = ctype.split("/", 1)[1]
        doc.attach(MIMEText(text, _subtype=subtype, _charset="utf-8"))
    return doc.as_string()


def read_status(client, cloudspace_id, vm_id, path=STATUS_FILE):
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


def gpu_driver_condition(status, why=None):
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


def info(req):
    """Core of ``first_boot_info``: a machine's first-boot status, through the platform; with ``gpu``, its
    ``GPUDriverReady`` condition."""
    p = req.params
    status, why = read_status(req.client, p["cloudspace_id"], p["vm_id"], p["path"])
    result = {"reported": status is not None, "status": status or {}, "message": why or ""}
    if p.get("gpu"):
        result["gpu_driver_ready"] = gpu_driver_condition(status, why)
    return result
