"""A playbook run as one unit: every process it started carries ``CAPVCO_RUN=<marker>`` in its environment, so a
test can kill all of it (ansible-playbook, its workers, and module processes that left its process group)."""

from __future__ import annotations

import contextlib
import os
import signal

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
