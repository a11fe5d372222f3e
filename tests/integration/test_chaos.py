"""The chaos suite in its short form: one loop (the long form is `make chaos`, 50 loops)."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import ROOT


def test_chaos_short_form():
    """Random faults and SIGKILLs of whole playbook runs, two actors at once on each of create, scale down, force
    delete and delete, beside a noisy neighbour: checked against the emulator's ledger (no leak, no double
    reservation by slot, nothing unowned touched, nothing accruing after teardown), and every re-run explained by a
    kill or an injected error; the only test where faults, kills and a second actor meet in one run."""
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "tests", "chaos", "chaos.py"),
            "--loops",
            "1",
            "--seed",
            "20261129",
            "--kill-rate",
            "0.5",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert "leaks 0, double reservations 0, unowned touched 0" in summary, summary
    assert ", 0 unexpected)" in summary, summary
