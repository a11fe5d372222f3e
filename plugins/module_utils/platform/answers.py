# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the core reads of the platform's answers, checked once, where the client receives them (pure Python).

The platform's spec marks few fields required, and whatever answers in the platform's place may send any JSON; the
core reads ``item["vgpu_id"]``, sorts notes by their time and compares names.  The client's endpoint methods hand
on only answers that have the fields the core reads, of the types it reads them as; anything else is a
:class:`~errors.BadAnswer` that names the operation, the item and the field (never the value: it may be anything),
not a ``KeyError`` or a ``TypeError`` deep in a planner.  A field the core does not read is not looked at (the
platform may add fields), an optional field may be null (the core reads those with ``.get``), and an answer that
fits is handed on as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import BadAnswer


class Field(NamedTuple):
    """A field the core reads: its types (``None`` among them when it may be null), whether it must be there, for a
    list or an object, the shape of its items or of itself, and for a string, the most characters it may have."""

    types: tuple[type, ...]
    required: bool = False
    shape: str | None = None
    longest: int | None = None


_NUMBER = (int, float)

#: The shapes the core reads, by name: ``{field: Field}``.
SHAPES: dict[str, dict[str, Field]] = {
    "reservation": {
        "vgpu_id": Field((str,), True),
        "vgpu_name": Field((str,), True),
        "gpu_id": Field((str,), True),
        "status": Field((str,), True),
        "virtual_machine": Field((dict, type(None)), shape="reservation's VM"),
        "deletion_time": Field(_NUMBER + (type(None),)),
    },
    "reservation's VM": {
        "id": Field((int,), True),
        "name": Field((str,), True),
        "cloudspace_id": Field((str,), True),
    },
    "VM": {
        "vm_id": Field((int,), True),
        "name": Field((str,), True),
        "status": Field((str,)),
        "devices": Field((list,), shape="device"),
        "network_interfaces": Field((list,), shape="network interface"),
    },
    "VM info": {
        "vm_id": Field((int,)),
        "name": Field((str,)),
        "description": Field((str, type(None))),
        "status": Field((str,)),
        "locked": Field((bool,)),
        "devices": Field((list,), shape="device"),
        "network_interfaces": Field((list,), shape="network interface"),
    },
    "device": {"reference_id": Field((str,)), "type": Field((str,))},
    "network interface": {"ip_address": Field((str,)), "mac_address": Field((str,)), "network_id": Field((int,))},
    "GPU profile": {
        "id": Field((str,), True),
        "vendor": Field((str,)),
        "model": Field((str,)),
        "available_instances": Field((int,)),
    },
    "note": {
        "id": Field((str,), True),
        "title": Field((str,)),
        "content": Field((str,)),
        "creation_time": Field(_NUMBER),
        "last_update_time": Field(_NUMBER),
    },
    "cloudspace": {
        "cloudspace_id": Field((str,), True),
        "name": Field((str,), True),
        "location": Field((str,)),
        "creation_time": Field(_NUMBER),
    },
    # what image_info shows of a location's images, and the image a machine is created from is checked against
    "image": {
        "image_id": Field((int,), True),
        "name": Field((str,), True, longest=256),
        "description": Field((str,), longest=4096),
        "status": Field((str,), longest=64),
        "os_type": Field((str,), longest=64),
        "size": Field((int,)),
        "boot_disk_size": Field((int,)),
        "memory": Field((int,)),
        "public": Field((bool,)),
    },
    # a location of the customer's listing (listCustomerLocations), with its prices
    "location": {
        "location": Field((str,), True, longest=128),
        "resources": Field((dict,)),
    },
}

_KIND = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", list: "a list", dict: "an object"}


def _kind(value: object) -> str:
    return "null" if value is None else _KIND.get(type(value), type(value).__name__)


def _fits(value: object, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:  # True is an int to Python, not to JSON
        return False
    return isinstance(value, types)


def _wanted(types: tuple[type, ...]) -> str:
    return " or ".join("null" if t is type(None) else _KIND.get(t, t.__name__) for t in types)


_ABSENT = object()
#: Each shape's fields as the check walks them: ``(name, field, the exact types that fit at once)`` (a subclass of
#: a type, or a bool where an int is read, goes the long way through :func:`_fits`).  The check runs once per item of
#: every listing (10,000 reservations in a scan), so it does no work for a field that fits.
_FAST: dict[str, tuple[tuple[str, Field, frozenset[type]], ...]] = {
    shape: tuple((name, f, frozenset(f.types)) for name, f in fields.items()) for shape, fields in SHAPES.items()
}
#: The most items a listing the core reads may have (a location's images, the customer's locations): more is an
#: answer no platform gives, refused before any item is read.
MOST_ITEMS = 10000


def record(answer: object, shape: str, operation: str, where: str = "the answer") -> dict[str, Any]:
    """``answer``, an object with the fields of ``shape`` that the core reads (see :data:`SHAPES`), checked
    through its nested objects and lists; :class:`BadAnswer` naming ``operation`` and ``where`` otherwise."""
    if not isinstance(answer, dict):
        raise _bad(operation, where, "is %s, not an object (a %s)" % (_kind(answer), shape))
    for name, field, exact in _FAST[shape]:
        value = answer.get(name, _ABSENT)
        if value is _ABSENT:
            if field.required:
                raise _bad(operation, where + "." + name, "is missing (the core reads it as %s)" % _wanted(field.types))
            continue
        if value is None and not field.required:  # an optional field sent as null is one not sent
            continue
        if type(value) not in exact and not _fits(value, field.types):
            raise _bad(operation, where + "." + name, "is %s, not %s" % (_kind(value), _wanted(field.types)))
        if field.longest is not None and isinstance(value, str) and len(value) > field.longest:
            raise _bad(operation, where + "." + name, "is longer than %d characters" % field.longest)
        if field.shape is not None and isinstance(value, dict):
            record(value, field.shape, operation, where + "." + name)
        elif field.shape is not None and isinstance(value, list):
            items(value, field.shape, operation, where + "." + name)
    return answer


def items(
    answer: object, shape: str, operation: str, where: str = "the answer", most: int | None = None
) -> list[dict[str, Any]]:
    """``answer``, a list of objects of ``shape`` (at most ``most`` of them, when given), each checked
    (:func:`record`)."""
    if not isinstance(answer, list):
        raise _bad(operation, where, "is %s, not a list" % _kind(answer))
    if most is not None and len(answer) > most:
        raise _bad(operation, where, "has %d items, more than the %d the collection reads" % (len(answer), most))
    for i, item in enumerate(answer):
        record(item, shape, operation, "%s[%d]" % (where, i))
    return answer


def listed(
    answer: object, operation: str, shape: str | None = None, key: str = "result", most: int | None = None
) -> list[Any]:
    """The list in a list operation's envelope (``{"result": [...]}``; no answer, or no list, is an empty list),
    each item of ``shape`` when one is given, and at most ``most`` of them when that is given."""
    if answer is None:
        return []
    if not isinstance(answer, Mapping):
        raise _bad(operation, "the answer", "is %s, not an object" % _kind(answer))
    found = answer.get(key)
    if found is None:
        return []
    if shape is None:
        if not isinstance(found, list):
            raise _bad(operation, key, "is %s, not a list" % _kind(found))
        if most is not None and len(found) > most:
            raise _bad(operation, key, "has %d items, more than the %d the collection reads" % (len(found), most))
        return found
    return items(found, shape, operation, key, most)


def field(answer: object, key: str, types: tuple[type, ...], operation: str) -> Any:
    """One field of an answer (``{"vm_id": 7}``), of ``types``."""
    if not isinstance(answer, Mapping) or key not in answer:
        raise _bad(operation, key, "is missing (the core reads it as %s)" % _wanted(types))
    value = answer[key]
    if not _fits(value, types):
        raise _bad(operation, key, "is %s, not %s" % (_kind(value), _wanted(types)))
    return value


def _bad(operation: str, where: str, what: str) -> BadAnswer:
    return BadAnswer(
        "the platform's answer to %s does not fit what the collection reads: %s %s" % (operation, where, what),
        {"operation": operation},
    )
