"""The property tests' two modes, in one place: the gate and the exploration.

The gate (every plain pytest run: ``make test``, CI, a developer's ``pytest``): each property test draws the same
examples on every run (Hypothesis' ``derandomize``, no example database), so a tree that passed passes again on
any machine.  The seeded integration properties (the stateful ownership test, the reviewed reclaim's) keep their
fixed seed.

The exploration (``make explore``, ``CAPVCO_EXPLORE=1``): random seeds everywhere and ``CAPVCO_EXPLORE_SCALE``
times as many examples (10 by default), each failure printed with its reproduction blob.  A failure it finds is
kept in its test as an ``@example`` (or, for a stateful sequence, as an explicit test of that sequence), so that
the gate runs it from then on.
"""

from __future__ import annotations

import os

from hypothesis import settings

EXPLORE = os.environ.get("CAPVCO_EXPLORE") == "1"
SCALE = max(1, int(os.environ.get("CAPVCO_EXPLORE_SCALE", "10"))) if EXPLORE else 1


def examples(n: int) -> int:
    """The number of examples a property test draws: ``n`` at the gate, ``n`` times the scale when exploring."""
    return n * SCALE


def env_examples(name: str, default: int) -> int:
    """``examples`` of a count that an environment variable may set (the variable wins, unscaled)."""
    value = os.environ.get(name)
    return int(value) if value else examples(default)


def load() -> str:
    """Register both profiles and load the one of this run; returns its name (tests/conftest.py calls it)."""
    settings.register_profile("gate", derandomize=True, database=None, deadline=None, print_blob=True)
    settings.register_profile(
        "explore", derandomize=False, database=None, deadline=None, print_blob=True, max_examples=examples(100)
    )
    name = "explore" if EXPLORE else "gate"
    settings.load_profile(name)
    return name
