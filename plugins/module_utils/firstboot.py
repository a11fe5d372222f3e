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
import re
import shlex
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

from ansible_collections.whitesky.capvco.plugins.module_utils.errors import InputError

#: The ``first_boot`` option of the modules that create machines (``machine``, ``machine_pool``).
OPTIONS = dict(
    type="dict",
    options=dict(
        packages=dict(type="list", elements="str", default=[]),
        attempts=dict(type="int", default=5),
        delay=dict(type="int", default=5),
        lock_timeout=dict(type="int", default=600),
    ),
)
STATE_DIR = "/var/lib/capvco"
STATUS_FILE = STATE_DIR + "/first-boot.status"
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.:=~*-]*$")

TEMPLATE = r"""#!/bin/sh
# whitesky.capvco first boot: retried installs that fail loudly.
set -u
STATE_DIR=%(state_dir)s
PACKAGES=%(packages)s
ATTEMPTS=%(attempts)d
DELAY=%(delay)d
LOCK_TIMEOUT=%(lock_timeout)d
mkdir -p "$STATE_DIR"
LOG="$STATE_DIR/first-boot.log"
rm -f "$STATE_DIR/first-boot.ready" "$STATE_DIR/first-boot.failed" "$STATE_DIR/first-boot.status"
exec 3>&1
exec >>"$LOG" 2>&1
STEP=start

json_escape() {  # drop control characters, escape, and fold lines into literal \n
  tr -d '\000-\010\013-\037\177' | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/ /g' | awk 'BEGIN{ORS="\\n"} {print}'
}

status() {  # state reason
  tail_text=$(tail -n 30 "$LOG" | json_escape)
  printf '{"state": "%%s", "step": "%%s", "reason": "%%s", "log_tail": "%%s"}\n' \
    "$1" "$STEP" "$(printf '%%s' "$2" | json_escape)" "$tail_text" > "$STATE_DIR/first-boot.status.tmp"
  mv "$STATE_DIR/first-boot.status.tmp" "$STATE_DIR/first-boot.status"
}

fail() {
  echo "first boot failed at $STEP: $1"
  tail -n 30 "$LOG" > "$STATE_DIR/first-boot.failed"
  status failed "$1"
  echo "CAPVCO-FIRST-BOOT: FAILED at $STEP: $1" >&3
  [ -w /dev/console ] && echo "CAPVCO-FIRST-BOOT: FAILED at $STEP: $1" > /dev/console
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

APT="apt-get -q -o DPkg::Lock::Timeout=$LOCK_TIMEOUT -o Acquire::Retries=0"
export DEBIAN_FRONTEND=noninteractive
status running "started"
apt_update() { $APT update --error-on=any; }  # a repository that failed is an error, not a warning
apt_install() { $APT update --error-on=any && $APT install -y --no-install-recommends $PACKAGES; }
if [ -n "$PACKAGES" ]; then
  STEP=apt-update
  retry apt_update || fail "apt-get update failed $ATTEMPTS time(s)"
  STEP=apt-install
  retry apt_install || fail "installing $PACKAGES failed $ATTEMPTS time(s)"
fi
%(provider)s%(bootstrap)s
STEP=done
touch "$STATE_DIR/first-boot.ready"
status ready "all steps done"
echo "CAPVCO-FIRST-BOOT: READY" >&3
"""

BOOTSTRAP = r"""STEP=bootstrap
echo %(data)s | base64 -d > "$STATE_DIR/bootstrap.sh"
chmod 0700 "$STATE_DIR/bootstrap.sh"
"$STATE_DIR/bootstrap.sh" || fail "the bootstrap data exited $?"
"""


PROVIDER = r"""STEP=kubelet-provider-id
mkdir -p /etc/default && echo %(arg)s >> /etc/default/kubelet || fail "could not write /etc/default/kubelet"
"""
_PROVIDER_ID = re.compile(r"^[a-z][a-z0-9+.-]*://[A-Za-z0-9._~/-]+$")


def render(packages=(), bootstrap=None, attempts=5, delay=5, lock_timeout=600, state_dir=STATE_DIR, provider_id=None):
    """The user data for a new machine.

    A ``bootstrap`` script runs after the packages, inside the first boot, and
    its failure is the first boot's. A ``#cloud-config`` bootstrap (what Cluster
    API bootstrap providers emit) is sent beside the script in a MIME multipart
    document, which cloud-init runs in its own order.
    """
    if bootstrap and bootstrap.lstrip().startswith("#cloud-config"):
        script = render(packages, None, attempts, delay, lock_timeout, state_dir, provider_id)
        return multipart([("text/cloud-config", bootstrap), ("text/x-shellscript", script)])
    for name in packages:
        if not _PACKAGE.match(name):
            raise InputError("invalid package name %r in first_boot packages" % name)
    if attempts < 1 or delay < 0 or lock_timeout < 0:
        raise InputError("first boot needs attempts >= 1, delay >= 0 and lock_timeout >= 0")
    if provider_id and not _PROVIDER_ID.match(provider_id):
        raise InputError("invalid provider_id %r; expected SCHEME://PATH (letters, digits, . _ ~ / -)" % provider_id)
    provider = PROVIDER % {"arg": shlex.quote("KUBELET_EXTRA_ARGS=--provider-id=" + provider_id)} if provider_id else ""
    block = ""
    if bootstrap:
        data = base64.b64encode(bootstrap.encode("utf-8")).decode("ascii")
        block = BOOTSTRAP % {"data": shlex.quote(data)}
    return TEMPLATE % {
        "state_dir": shlex.quote(state_dir),
        "packages": shlex.quote(" ".join(packages)),
        "attempts": attempts,
        "delay": delay,
        "lock_timeout": lock_timeout,
        "bootstrap": block,
        "provider": provider,
    }


def multipart(parts):
    """A cloud-init MIME multipart user data document of ``[(content type, text)]``."""
    doc = MIMEMultipart(boundary="capvco-first-boot")
    for ctype, text in parts:
        subtype = ctype.split("/", 1)[1]
        doc.attach(MIMEText(text, _subtype=subtype, _charset="utf-8"))
    return doc.as_string()
