# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a module's result says the platform held before it and holds after: its ``diff``, as data (pure Python).

A side is a list of lines, a line ``(kind, name)`` per thing (``("machine", "web-0")``), in order; the faces render
it as text (``faces/diff.py``: a line ``<kind> <name>`` each, scrubbed), as Ansible's default callback shows it.
A name may be what the platform said (a VM's name, a currency): it stays as it is here, and is scrubbed where it is
rendered.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

#: One line of a side of a diff: the kind of thing and its name.
DiffLine = tuple[str, str]


class Diff(TypedDict):
    """A module result's ``diff``: its lines before and after (``diff_lines``)."""

    before: list[DiffLine]
    after: list[DiffLine]


def diff_lines(kind: str, names: Iterable[object]) -> list[DiffLine]:
    """One side of a diff: a line ``(kind, name)`` per name, in order."""
    return [(kind, "%s" % (name,)) for name in names]


def names_diff(kind: str, before: Iterable[str], after: Iterable[str]) -> Diff:
    """The diff of two lists of names of one kind."""
    return {"before": diff_lines(kind, before), "after": diff_lines(kind, after)}
