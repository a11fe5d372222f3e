# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A module result's ``diff``, as text: a line per thing, so Ansible's default callback shows it (pure Python).  A
line may carry what the platform said (a name, a currency): each is scrubbed (``scrub``), as everything a person
reads is."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub


class Diff(TypedDict):
    """A module result's ``diff``: text, a line per thing (``diff_lines``); Ansible's callbacks show a diff of
    strings or dicts only."""

    before: str
    after: str


def diff_lines(kind: str, names: Iterable[object]) -> str:
    """One side of a diff: a line ``<kind> <name>`` per name, in order, each scrubbed (controls escaped, secrets
    out: a platform's string never reaches the terminal raw)."""
    return "".join("%s\n" % scrub("%s %s" % (kind, name)) for name in names)


def names_diff(kind: str, before: Iterable[str], after: Iterable[str]) -> Diff:
    """The diff of two lists of names of one kind."""
    return {"before": diff_lines(kind, before), "after": diff_lines(kind, after)}
