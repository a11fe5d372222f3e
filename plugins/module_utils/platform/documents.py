# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""JSON from outside, one way (pure): the text's nesting measured before any parser sees it (:func:`text_depth`),
then parsed with finite numbers only (:func:`loads`: no ``NaN``, no ``Infinity``, no ``1e400``), and a parsed
document's nesting (:func:`depth`).  A machine's first-boot report, a reviewed reclaim's plan file, the event
source's cursor and the node agent's ledger are read through here; each caller says in its own words what the file
is not.  (The platform's answers are read by ``answers.py``, the CNI runtime's input by the node's shim, which
imports nothing of the collection.)"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import NotJson

#: A JSON string (its escapes included) and a bracket, for measuring nesting on the text.
_STRING = re.compile(r'"(?:\\.|[^"\\])*"')
_BRACKET = re.compile(r"[\[\]{}]")


def text_depth(text: str, limit: int) -> int:
    """How deep the JSON text nests (brackets outside strings), counted no further than one past ``limit``."""
    level = deepest = 0
    for found in _BRACKET.finditer(_STRING.sub('""', text)):
        if found.group() in "[{":
            level += 1
            deepest = max(deepest, level)
            if deepest > limit:
                break
        else:
            level -= 1
    return deepest


def depth(doc: object, limit: int) -> int:
    """How deep a parsed document nests (a scalar is 0), without recursion, counted no further than one past
    ``limit``."""
    deepest, todo = 0, [(doc, 1)]
    while todo:
        value, level = todo.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        todo.extend((child, level + 1) for child in children)
    return deepest


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("%s is out of range" % text[:40])
    return value


def loads(text: str | bytes, what: str = "a document") -> Any:
    """The JSON document in ``text``, its numbers finite; :class:`NotJson` for anything else (never another
    error): not JSON, a constant or an out-of-range number, bytes that are not UTF-8, nesting past the parser's
    recursion limit.  ``what`` names the document in the message (``NaN is not a number a plan holds``)."""

    def no_constant(name: str) -> float:
        raise ValueError("%s is not a number %s holds" % (name, what))

    try:
        return json.loads(text, parse_constant=no_constant, parse_float=_finite)
    except RecursionError:
        raise NotJson("it nests too deep to parse", too_deep=True) from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise NotJson(str(exc)[:200]) from None
