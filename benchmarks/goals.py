"""The benchmarks' table of goals: each figure beside its bound, and the exit status (1 when one is missed)."""

from __future__ import annotations


def report(goals, missed=(), width=72):
    """Print ``goals`` (``[(name, measured, bound)]``, met when measured <= bound) and the verdict, with ``missed``
    (names of other failures) among the misses; return the exit status."""
    print("%-*s %10s %8s" % (width, "goal", "measured", "bound"))
    missed = list(missed)
    for name, value, bound in goals:
        ok = value <= bound
        missed += [] if ok else [name]
        print("%-*s %10.3f %8.2f %s" % (width, name, value, bound, "ok" if ok else "MISSED"))
    print("goals: %s" % ("all met" if not missed else "MISSED: " + "; ".join(missed)))
    return 1 if missed else 0
