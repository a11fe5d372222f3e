# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shell of the scripts the collection runs on a machine (pure Python: AnsiballZ ships only the Python files of
``module_utils``, so the shell lives in these strings).  ``firstboot.render`` puts them together; ``make lint``
runs shellcheck over every rendered variant (``hack/shellcheck.py``).

What a script does on the machine changes here; how the parts are chosen and filled in, in ``firstboot``.
"""

from __future__ import annotations

STATE_DIR = "/var/lib/capvco"
STATUS_FILE = STATE_DIR + "/first-boot.status"

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


KUBELET = r"""STEP=kubelet-args
{ mkdir -p /etc/default && echo %(arg)s >> /etc/default/kubelet; } || fail "could not write /etc/default/kubelet"
"""
