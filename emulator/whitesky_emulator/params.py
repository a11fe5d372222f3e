"""The validation of a request against what its operation accepts.

The table (``OPERATIONS``: where each parameter goes, its type, whether it is required, its allowed values, and
the request body's fields) is ``spec_params``, generated from the platform's Swagger spec by ``gen_params``.  A
request that does not fit gets a 400 that names the parameter or field; no input reaches a handler untyped, so
none can make it fail with a 500.

Query parameters the operation does not declare are ignored, as the platform's framework does; body fields it
does not declare are refused where the body's schema is closed (all of them here).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from .paramtypes import ARRAY, BOOL, INT, OBJECT, STR, Body, QueryRule
from .spec_params import OPERATIONS

__all__ = ["INT_MAX", "INT_MIN", "OPERATIONS", "Invalid", "QueryArgs", "Scalar", "validate"]

#: The platform's integers are 64-bit.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1

#: A path or query parameter's value once typed.
Scalar = int | bool | str
#: Typed query arguments: a scalar, or the values of an array parameter.
QueryArgs = dict[str, Scalar | list[str]]


class MultiDict(Protocol):
    """A request's query parameters: each name's values in order (Starlette's ``QueryParams``)."""

    def getlist(self, key: str) -> list[str]: ...


class Invalid(ValueError):
    """A request does not fit its operation: ``where`` names the parameter or field."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__("%s: %s" % (where, message))
        self.where = where


def _int(where: str, raw: str) -> int:
    text = raw.strip()
    if not text.lstrip("-").isdigit() or len(text) > 20:
        raise Invalid(where, "must be an integer, got %r" % raw[:40])
    value = int(text)
    if not INT_MIN <= value <= INT_MAX:
        raise Invalid(where, "%s is out of range (a 64-bit integer)" % text)
    return value


def _bool(where: str, raw: str) -> bool:
    low = raw.lower()
    if low in ("true", "1"):
        return True
    if low in ("false", "0"):
        return False
    raise Invalid(where, "must be true or false, got %r" % raw[:40])


def _scalar(where: str, kind: str, raw: str) -> Scalar:
    if kind == INT:
        return _int(where, raw)
    if kind == BOOL:
        return _bool(where, raw)
    return raw


def _check_body(where: str, schema: Body, value: object) -> None:
    if not isinstance(value, dict):
        raise Invalid(where, "must be a JSON object")
    unknown = sorted(set(value) - set(schema["properties"]))
    if unknown:
        raise Invalid(
            "%s.%s" % (where, unknown[0]),
            "unknown field(s) %s; valid: %s" % (", ".join(unknown), ", ".join(sorted(schema["properties"]))),
        )
    for name in schema["required"]:
        if name not in value:
            raise Invalid("%s.%s" % (where, name), "is required")
    for name, kind in schema["properties"].items():
        if name not in value:
            continue
        field, got = "%s.%s" % (where, name), value[name]
        if isinstance(kind, dict):
            _check_body(field, kind, got)
        elif kind == STR and not isinstance(got, str):
            raise Invalid(field, "must be a string")
        elif kind == INT and (isinstance(got, bool) or not isinstance(got, int) or not INT_MIN <= got <= INT_MAX):
            raise Invalid(field, "must be a 64-bit integer")
        elif kind == BOOL and not isinstance(got, bool):
            raise Invalid(field, "must be a boolean")
        elif kind == OBJECT and not isinstance(got, dict):
            raise Invalid(field, "must be an object")
        _check_enum(field, schema["enum"].get(name), got)


def _check_enum(field: str, allowed: tuple[str, ...] | None, got: object) -> None:
    if allowed and got not in allowed:
        raise Invalid(field, "must be one of %s" % ", ".join(allowed))


def validate(
    operation_id: str, path_params: Mapping[str, str], query: MultiDict, raw_body: bytes
) -> tuple[dict[str, Scalar], QueryArgs, dict[str, Any] | None]:
    """``(path, query, body)`` typed as the operation declares them; :class:`Invalid` when they do not fit.

    ``query`` is a multi-dict (``getlist``); ``raw_body`` the request's bytes; the body is the decoded JSON (None
    when the operation takes none, or an optional one was not sent).
    """
    spec = OPERATIONS[operation_id]
    path: dict[str, Scalar] = {"customer_id": path_params["customer_id"]}
    for name, kind in spec["path"].items():
        path[name] = _scalar(name, kind, path_params[name])
    args: QueryArgs = {}
    for name, rule in spec["query"].items():
        values = query.getlist(name)
        if values:
            args[name] = list(values) if rule["type"] == ARRAY else _query_scalar(name, rule, values[-1])
        elif rule["required"]:
            raise Invalid(name, "is a required query parameter")
    return path, args, _body(spec.get("body"), raw_body)


def _query_scalar(name: str, rule: QueryRule, raw: str) -> Scalar:
    value = _scalar(name, rule["type"], raw)
    if rule["enum"] and value not in rule["enum"]:
        raise Invalid(name, "must be one of %s, got %r" % (", ".join(rule["enum"]), raw[:40]))
    minimum = rule["minimum"]
    if minimum is not None and isinstance(value, int) and value < minimum:
        raise Invalid(name, "must be %d or more, got %d" % (minimum, value))
    return value


def _body(schema: Body | None, raw_body: bytes) -> dict[str, Any] | None:
    """The request's JSON body checked against the operation's schema (None when it takes none)."""
    if schema is None:
        return None
    payload = None
    if raw_body:
        try:
            payload = json.loads(raw_body)
        except ValueError:
            raise Invalid("body", "is not valid JSON") from None
    if payload is None:
        if not schema["optional"]:
            raise Invalid("body", "is required")
        return None
    _check_body("body", schema, payload)  # a JSON object, or Invalid
    checked: dict[str, Any] = payload
    return checked
