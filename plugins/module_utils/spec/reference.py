# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster spec's schema in other shapes (pure Python): OpenAPI (the CRDs' schemas are tested against
:func:`openapi`) and Markdown (:func:`reference`, which docs/lifecycle.md embeds)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.spec.clusterspec import SPEC, cidr_error
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.schema import MISSING, Field, describe_pattern

_OPENAPI_TYPES = {
    "int": "integer",
    "number": "number",
    "str": "string",
    "bool": "boolean",
    "object": "object",
    "list": "array",
}


def openapi(field: Field) -> dict[str, Any]:
    """The OpenAPI v3 schema of a field, as a CRD writes it (no descriptions)."""
    out: dict[str, Any] = {"type": _OPENAPI_TYPES[field.kind]}
    for attr, key in (
        ("minimum", "minimum"),
        ("maximum", "maximum"),
        ("max_length", "maxLength"),
        ("max_items", "maxItems"),
        ("min_items", "minItems"),
    ):
        if getattr(field, attr) is not None:
            out[key] = getattr(field, attr)
    if field.kind == "str" and field.min_length:
        out["minLength"] = field.min_length
    if field.pattern:
        out["pattern"] = "^%s$" % field.pattern
    if field.default is not MISSING and field.kind not in ("object", "list"):
        out["default"] = field.default
    if field.kind == "object":
        out["properties"] = {k: openapi(v) for k, v in field.fields.items()}
        required = sorted(k for k, v in field.fields.items() if v.required)
        if required:
            out["required"] = required
    if field.kind == "list":
        out["items"] = openapi(field.items)
    return out


def _bounds_text(field: Field) -> str:
    parts: list[str] = []
    if field.minimum is not None or field.maximum is not None:
        parts.append(
            "%s..%s" % ("" if field.minimum is None else field.minimum, "" if field.maximum is None else field.maximum)
        )
    if field.pattern:
        parts.append(describe_pattern(field.pattern))
    if field.max_length:
        parts.append("at most %d characters" % field.max_length)
    if field.max_items:
        parts.append("at most %d items" % field.max_items)
    if field.kind == "list" and field.items.kind != "object" and _bounds_text(field.items):
        parts.append("each: " + _bounds_text(field.items))
    if field.check is cidr_error:
        parts.append("a CIDR")
    return "; ".join(parts)


def _rows(field: Field, path: str) -> Iterator[str]:
    for key, sub in field.fields.items():
        where = "%s.%s" % (path, key) if path else key
        kind = {"list": "list", "object": "mapping"}.get(sub.kind, sub.kind)
        if sub.required:
            need = "required"
        elif sub.default is not MISSING and sub.kind not in ("object",) and sub.default != []:
            need = "default %s" % ("`%s`" % sub.default if sub.default != "" else '`""`')
        else:
            need = ""
        yield "| `%s` | %s | %s | %s | %s |" % (where, kind, need, _bounds_text(sub), sub.doc)
        if sub.kind == "object":
            yield from _rows(sub, where)
        elif sub.kind == "list" and sub.items.kind == "object":
            yield from _rows(sub.items, where + "[]")


def reference() -> str:
    """The spec's reference, a Markdown table generated from :data:`SPEC` (docs/lifecycle.md embeds it)."""
    head = ["| key | type | required / default | bounds | what |", "|---|---|---|---|---|"]
    return "\n".join(head + list(_rows(SPEC, ""))) + "\n"
