#!/usr/bin/env python3
"""A mutation check of the core: plant one fault at a time in the planner, the lease, the ownership proof and the
price, run the unit layer (the fast suite ``make test`` starts with) against it, and fail unless every fault is
killed, that is, some unit test fails with it in place.

The faults are the harms the collection exists to prevent, each as the smallest edit that makes it: a vGPU slot kept
past a pool's count (a leaked reservation), a duplicate reservation of a slot left billed, a machine owned by a name
that only starts with the cluster's, a lease judged by the longest time to live any note claims, a note written
without the lease's fence, a negative price taken as a price, and a price that counts only the first unit.

    .venv/bin/python hack/mutants.py [--only NAME] [--list]

Each fault is applied to the file in place and taken back in a ``finally`` (the file is checked clean in git
first, so that a killed run leaves ``git diff`` to show and ``git checkout`` to undo).  It runs after the unit
layer, not in it (``make mutants``): one unit run per fault.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = "plugins/module_utils/"


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    harm: str


MUTANTS = (
    Mutant(
        "planner-keeps-a-slot-past-the-count",
        CORE + "gpu/vgpus.py",
        "        if slot >= count:\n",
        "        if slot > count:\n",
        "scaling a pool's vGPUs down keeps the slot at the old count: a reservation billed that nothing uses",
    ),
    Mutant(
        "planner-leaves-a-duplicate-slot",
        CORE + "gpu/vgpus.py",
        "        releases.extend(i for i in group if i is not keep)\n",
        "        releases.extend(i for i in group if i is not keep and deleted(i))\n",
        "two live reservations of one slot: the second stays, billed",
    ),
    Mutant(
        "ownership-by-name-prefix",
        CORE + "ownership/markers.py",
        "    return marker is not None and marker.cluster == cluster\n",
        "    return marker is not None and marker.cluster.startswith(cluster)\n",
        "cluster 'web' owns 'web-db''s machines: a neighbour's VM changed or deleted",
    ),
    Mutant(
        "lease-trusts-the-longest-ttl",
        CORE + "ownership/lease.py",
        "        return now - seen[1] > min(held.ttl, max(self.ttl, TTL))\n",
        "        return now - seen[1] > max(held.ttl, max(self.ttl, TTL))\n",
        "a stalled holder's note that claims a long time to live keeps every other run out (or a long ttl is trusted)",
    ),
    Mutant(
        "lease-fence-skipped",
        CORE + "ownership/lease.py",
        "    for lease in list(_held(client).values()):\n        lease.fence(operation)\n",
        "    for lease in list(_held(client).values())[:0]:\n        lease.fence(operation)\n",
        "a run that lost its lease still writes the cluster's pools note",
    ),
    Mutant(
        "price-takes-a-negative-price",
        CORE + "gpu/billing.py",
        "    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:\n",
        "    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value < math.inf:\n",
        "a negative price from the platform shown as a price (a bill that looks like a credit)",
    ),
    Mutant(
        "price-counts-only-the-first-unit",
        CORE + "gpu/billing.py",
        "    for unit in UNITS_PRICED:\n        one = unit_cost(",
        "    for unit in UNITS_PRICED[:1]:\n        one = unit_cost(",
        "the whole price leaves out most of the bill",
    ),
)


def unit_run() -> tuple[int, str, float]:
    """The unit layer, stopping at its first failure; its exit status, its last lines and its seconds."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-n", "2", "tests/unit"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    return proc.returncode, "\n".join(lines[:3]) or proc.stdout[-600:], time.monotonic() - started


def planted(mutant: Mutant) -> None:
    path = ROOT / mutant.path
    text = path.read_text(encoding="utf-8")
    if text.count(mutant.old) != 1:
        raise SystemExit("mutant %s: its line is not once in %s (the code moved: update it)" % (mutant.name, path))
    dirty = subprocess.run(["git", "diff", "--quiet", "--", mutant.path], cwd=ROOT, check=False).returncode
    if dirty:
        raise SystemExit("%s has changes of its own: commit or stash them before planting faults in it" % mutant.path)
    path.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", help="run only this mutant (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the mutants and the harm each plants")
    args = ap.parse_args()
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    if args.list or not chosen:
        for m in MUTANTS:
            print("%-38s %s: %s" % (m.name, m.path[len(CORE) :], m.harm))
        return 0 if args.list else 2
    rc, said, seconds = unit_run()
    if rc != 0:
        print("the unit layer fails without a fault (rc %d in %.1f s): fix that first\n%s" % (rc, seconds, said))
        return 2
    print("baseline: the unit layer passes in %.1f s" % seconds)
    survivors = []
    for mutant in chosen:
        path = ROOT / mutant.path
        original = path.read_text(encoding="utf-8")
        try:
            planted(mutant)
            rc, said, seconds = unit_run()
        finally:
            path.write_text(original, encoding="utf-8")
        if rc != 0 and "FAILED" in said:  # (-x under xdist ends a failed run with 2: interrupted)
            said = said.replace("\n", "\n         ")
            print("killed   %-38s in %5.1f s by\n         %s" % (mutant.name, seconds, said))
        else:
            survivors.append(mutant)
            print("SURVIVED %-38s (unit layer rc %d in %.1f s): %s\n%s" % (mutant.name, rc, seconds, mutant.harm, said))
    print("mutants: %d planted, %d killed, %d survived" % (len(chosen), len(chosen) - len(survivors), len(survivors)))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
