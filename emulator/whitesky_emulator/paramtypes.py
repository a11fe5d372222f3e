"""The shape of the table of what each operation accepts (``spec_params``, generated from the platform's spec):
where each parameter goes, its type, whether it is required, its allowed values, and the closed body schemas."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NotRequired, TypedDict

#: The spec's types of a parameter or a body field.
INT, STR, BOOL, ARRAY, OBJECT = "integer", "string", "boolean", "array", "object"
KINDS = (INT, STR, BOOL, ARRAY, OBJECT)


class QueryRule(TypedDict):
    """A query parameter: its type, whether required, its allowed values, its least value (integers)."""

    type: str
    required: bool
    enum: tuple[str, ...] | None
    minimum: int | None


class Body(TypedDict):
    """A closed object body: each field a type or a nested body; the required fields; whether the body itself may
    be left out; each field's allowed values."""

    properties: dict[str, Field]
    required: tuple[str, ...]
    optional: bool
    enum: dict[str, tuple[str, ...]]


#: A body field: its type (one of :data:`KINDS`), or a nested body.
Field = str | Body


class OperationParams(TypedDict):
    """What one operation accepts: its path parameters (``customer_id`` left out: every path has it, a string),
    its query parameters, and its body (absent when it takes none)."""

    path: dict[str, str]
    query: dict[str, QueryRule]
    body: NotRequired[Body]


def q(kind: str, required: bool = False, enum: Iterable[str] | None = None, minimum: int | None = None) -> QueryRule:
    return {"type": kind, "required": required, "enum": tuple(enum) if enum else None, "minimum": minimum}


def body(
    properties: Mapping[str, Field],
    required: Iterable[str] = (),
    optional: bool = False,
    enum: Mapping[str, Iterable[str]] | None = None,
) -> Body:
    """A closed object body: ``{"field": type or nested body}``; ``enum``: ``{"field": allowed values}``."""
    return {
        "properties": dict(properties),
        "required": tuple(required),
        "optional": optional,
        "enum": {name: tuple(values) for name, values in (enum or {}).items()},
    }
