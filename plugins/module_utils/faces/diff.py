# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A module result's ``diff`` as a person reads it: text, a line per thing, so Ansible's default callback shows it
(pure Python).  The core says what changed as data (``world/changes.py``: a side is a list of ``(kind, name)``
lines); each line is rendered ``<kind> <name>`` and scrubbed (``scrub``), as everything a person reads is: a line
may carry what the platform said (a name, a currency)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub
from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import DiffLine


def text(lines: Iterable[DiffLine]) -> str:
    """One side of a diff as text: a line ``<kind> <name>`` per line, in order, each scrubbed (controls escaped,
    secrets out: a platform's string never reaches the terminal raw)."""
    return "".join("%s\n" % scrub("%s %s" % (kind, name)) for kind, name in lines)


def render(diff: Mapping[str, Any]) -> dict[str, Any]:
    """A result's ``diff`` with each side that is lines (a list, ``world/changes.py``) as :func:`text`; a side of
    another shape (a module's own ``before`` and ``after`` objects) as it is."""
    return {side: text(lines) if isinstance(lines, list) else lines for side, lines in diff.items()}
