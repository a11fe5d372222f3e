# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``misspelt`` filter: the variables whose names are close to one a playbook reads but are not one
(``max_hourly_cots``: did you mean ``max_hourly_cost``?), each with the name it is close to, by the cluster spec's
own check (``spec.schema.misspelt``).  The collection's playbooks refuse them before any change
(``playbooks/tasks/check_variables.yml``): a typo in ``-e`` is otherwise ignored without a word."""

from __future__ import annotations

from collections.abc import Iterable

from ansible_collections.whitesky.capvco.plugins.module_utils.spec.schema import misspelt as _misspelt


def _flat(value: object) -> list[str]:
    """The names of a list that may hold lists (a playbook's groups of variables), flattened."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, (bytes, dict)):
        return [n for item in value for n in _flat(item)]
    return []


def misspelt(names: object, reads: object, exempt: object = None) -> list[str]:
    """``["max_hourly_cots (did you mean max_hourly_cost?)"]``: each of ``names`` (the play's variables) that is none
    of ``reads`` nor ``exempt`` but close to one of ``reads``, with that one, sorted by name."""
    found = _misspelt(_flat(names), _flat(reads), _flat(exempt or []))
    return ["%s (did you mean %s?)" % (name, hint) for name, hint in found]


class FilterModule:
    def filters(self) -> dict[str, object]:
        return {"misspelt": misspelt}
