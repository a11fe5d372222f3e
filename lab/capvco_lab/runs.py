"""A playbook run as one unit: every process it started carries ``CAPVCO_RUN=<marker>`` in its environment, so a
test can kill all of it (ansible-playbook, its workers, and module processes that left its process group)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys

from capvco_lab.emulator import wait_for


def run_pids(marker):
    """The processes whose environment carries ``CAPVCO_RUN=marker``: a run and everything it started."""
    needle = ("CAPVCO_RUN=%s" % marker).encode()
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    pids.append(int(pid))
        except OSError:
            continue
    return pids


def kill_all(marker):
    """SIGKILL a run: ansible-playbook, its workers and the module processes they started (some leave the
    process group), until none is left."""

    def gone():
        for pid in run_pids(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return not run_pids(marker)

    assert wait_for(gone, timeout=30), "the killed run's processes outlived SIGKILL"


def start_playbook(playbook, extra, emu_env, marker, collections, cwd):
    """``ansible-playbook playbook -e extra`` started as one run (``CAPVCO_RUN=marker``, a session of its own), with
    the default callback, against the emulator of ``emu_env``; the process (its output piped, as text)."""
    bindir = os.path.dirname(sys.executable)
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=collections,
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
        ANSIBLE_NOCOLOR="1",
        CAPVCO_RUN=marker,
        PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
        **emu_env,
    )
    return subprocess.Popen(
        [os.path.join(bindir, "ansible-playbook"), playbook, "-e", json.dumps(extra)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )


@contextlib.contextmanager
def stopped(marker):
    """SIGSTOP every process of a run (ansible-playbook, its workers, the module's process, which left the group)
    for the ``with`` block, and SIGCONT them after, whatever happens; yields their pids."""
    pids = run_pids(marker)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield pids
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
