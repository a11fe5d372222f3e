# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A module result's ``diff``, as text: a line per thing, so Ansible's default callback shows it (pure Python)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict


class Diff(TypedDict):
    """A module result's ``diff``: text, a line per thing (``diff_lines``); Ansible's callbacks show a diff of
    strings or dicts only."""

    before: str
    after: str


def diff_lines(kind: str, names: Iterable[object]) -> str:
    """One side of a diff: a line ``<kind> <name>`` per name, in order."""
    return "".join("%s %s\n" % (kind, name) for name in names)


def names_diff(kind: str, before: Iterable[str], after: Iterable[str]) -> Diff:
    """The diff of two lists of names of one kind."""
    return {"before": diff_lines(kind, before), "after": diff_lines(kind, after)}
