# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The language of the cluster spec's schema (pure Python): a :class:`Field` (kind, bounds, default, doc) and the
parser that checks a value against one, collecting every error by its path (``pools[1].gpu.count``).  Unknown keys
are refused with a suggestion; an integer is an integer (``"2"`` is read as 2, ``"two"`` or ``1.5`` never); every
name is matched whole (``fullmatch``: a final newline is not a name's end).  The spec itself is ``clusterspec``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot.render import DRIVER_VERSION, PACKAGE

#: What a field without a default has, and what a parser gives back for a value it refused.
MISSING = object()

#: DNS-label-like names: the cluster, its pools, a NetworkAttachmentDefinition, a location.
LABEL = r"[a-z0-9]([a-z0-9-]*[a-z0-9])?"
CLOUDSPACE = r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?"
#: A GPU type as the platform's profiles name it (vendor and model): printable words, matched without case.
GPU_TYPE = r"[A-Za-z0-9]([A-Za-z0-9 ._-]*[A-Za-z0-9])?"
#: A GPU profile as a pool asks for it: ``full`` or a profile id (``nvidia-a100-40c``).
GPU_PROFILE = r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?"


class Field:
    """One field of the spec: its kind, bounds, default and documentation."""

    def __init__(self, kind: str, doc: str, **kw: Any) -> None:
        self.kind = kind  # int, str, bool, object, list
        self.doc = doc
        self.required: bool = kw.pop("required", False)
        self.default: Any = kw.pop("default", MISSING)
        self.minimum: int | None = kw.pop("minimum", None)
        self.maximum: int | None = kw.pop("maximum", None)
        self.pattern: str | None = kw.pop("pattern", None)
        self.min_length: int | None = kw.pop("min_length", 1 if kind == "str" and self.default != "" else None)
        self.max_length: int | None = kw.pop("max_length", None)
        # an object's fields and a list's items (None for the other kinds, which never read them)
        self.fields: dict[str, Field] = kw.pop("fields", None)
        self.items: Field = kw.pop("items", None)
        self.min_items: int | None = kw.pop("min_items", None)
        self.max_items: int | None = kw.pop("max_items", None)
        self.secret: bool = kw.pop("secret", False)
        self.numeric_text: bool = kw.pop("numeric_text", False)  # a str that YAML may give as a number (550)
        # a further check of a str: its error text, or None
        self.check: Callable[[str], str | None] | None = kw.pop("check", None)
        if kw:
            raise TypeError("unknown field options %s" % sorted(kw))
        self.regex = re.compile(self.pattern) if self.pattern else None


def int_field(doc: str, minimum: int, maximum: int | None = None, **kw: Any) -> Field:
    return Field("int", doc, minimum=minimum, maximum=maximum, **kw)


def _kind_name(value: object) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)


def _show(value: object, field: Field | None = None) -> str:
    if field is not None and field.secret:
        return "(hidden)"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class Errors(list[str]):
    def add(self, path: str, text: str) -> None:
        self.append("%s: %s" % (path or "spec", text))


def suggest(key: object, known: Iterable[str]) -> str | None:
    """The known name ``key`` was most likely meant to be: the same once case, ``-`` and ``_`` are set aside, else
    the shortest that begins with it (``grace``: ``grace_period``), else the closest in spelling (``intervall``);
    None when none is close.  The one "did you mean" of the collection (the spec, the playbooks' variables, the
    event source's arguments)."""
    if not isinstance(key, str):
        return None
    names = sorted(k for k in known if isinstance(k, str))
    fold = key.lower().replace("-", "_")
    folded = {k.lower().replace("_", ""): k for k in names}
    hit = folded.get(fold.replace("_", ""))
    if hit is None and len(fold) >= 3:
        hit = min((k for k in names if k.startswith(fold)), key=len, default=None)
    if hit:
        return hit
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6) or difflib.get_close_matches(
        fold, names, n=1, cutoff=0.6
    )
    return close[0] if close else None


def near(name: str, key: str) -> bool:
    """``name`` is ``key`` misspelt: the same once case, ``_`` and ``-`` are set aside, or very close."""
    fold = name.lower().replace("_", "").replace("-", "")
    return fold == key.replace("_", "") or difflib.SequenceMatcher(None, name.lower(), key).ratio() >= 0.8


def misspelt(names: Iterable[str], known: Iterable[str], exempt: Iterable[str] = ()) -> list[tuple[str, str]]:
    """``[(name, the known name it is close to)]``, sorted: each of ``names`` that is neither known nor exempt but
    :func:`near` one that is (:func:`suggest`): a variable a typo made (``max_hourly_cots``, ``pool``), which its
    reader would not see.  The one check of it, for the cluster spec's variables and for every playbook's."""
    wanted = [k for k in known if isinstance(k, str)]
    skip = set(wanted) | {e for e in exempt if isinstance(e, str)}
    out: list[tuple[str, str]] = []
    for name in sorted({n for n in names if isinstance(n, str)} - skip):
        hint = suggest(name, wanted)
        if hint and near(name, hint):
            out.append((name, hint))
    return out


def _parse_int(value: Any, field: Field, path: str, errors: Errors) -> Any:
    if isinstance(value, bool):
        errors.add(path, "must be an integer, got %s %s" % (_kind_name(value), _show(value)))
        return MISSING
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,12}", value):
        value = int(value)
    if not isinstance(value, int):
        errors.add(path, "must be an integer, got %s %s" % (_kind_name(value), _show(value)))
        return MISSING
    return _bounds(value, field, path, errors)


def _bounds(value: int, field: Field, path: str, errors: Errors) -> Any:
    if field.minimum is not None and value < field.minimum:
        errors.add(path, "must be %s or more, got %s" % (field.minimum, value))
        return MISSING
    if field.maximum is not None and value > field.maximum:
        errors.add(path, "must be %s or less, got %s" % (field.maximum, value))
        return MISSING
    return value


def _parse_str(value: Any, field: Field, path: str, errors: Errors) -> Any:
    if field.numeric_text and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # driverVersion: 550 (YAML reads it as a number)
    if not isinstance(value, str):
        hint = ""
        if field.numeric_text and isinstance(value, float):  # driverVersion: 550.127 (YAML reads it as a number)
            hint = '; quote it (%s: "%r"): unquoted, YAML reads it as a number' % (
                path.rpartition(".")[2],
                value,
            )
        errors.add(path, "must be a string, got %s %s%s" % (_kind_name(value), _show(value, field), hint))
        return MISSING
    if field.min_length is not None and len(value) < field.min_length:
        errors.add(path, "must not be empty")
        return MISSING
    if field.max_length is not None and len(value) > field.max_length:
        errors.add(path, "must be at most %d characters, got %d" % (field.max_length, len(value)))
        return MISSING
    if field.regex is not None and not field.regex.fullmatch(value):
        errors.add(path, "%s does not match %s" % (_show(value, field), describe_pattern(field.pattern)))
        return MISSING
    why = field.check(value) if field.check else None
    if why:
        errors.add(path, "%s %s" % (_show(value, field), why))
        return MISSING
    return value


_PATTERN_WORDS: dict[str | None, str] = {
    LABEL: "lower-case letters, digits and '-' (not at either end)",
    CLOUDSPACE: "letters, digits, '.', '_' and '-' (not at either end)",
    PACKAGE: "a Debian package name, optionally =VERSION (letters a-z, digits, + . : = ~ * -)",
    DRIVER_VERSION: "a driver branch or version such as 550 or 550.127.05 (or empty)",
    GPU_TYPE: "letters, digits, spaces, '.', '_' and '-' (not at either end)",
}


def describe_pattern(pattern: str | None) -> str:
    return _PATTERN_WORDS.get(pattern, "the pattern %s" % pattern)


def _parse_bool(value: Any, field: Field, path: str, errors: Errors) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "on", "false", "no", "off"):
        return value.lower() in ("true", "yes", "on")
    errors.add(path, "must be true or false, got %s %s" % (_kind_name(value), _show(value)))
    return MISSING


def _parse_object(value: Any, field: Field, path: str, errors: Errors) -> Any:
    if not isinstance(value, dict):
        errors.add(path, "must be a mapping, got %s %s" % (_kind_name(value), _show(value)))
        return MISSING
    out: dict[str, Any] = {}
    for key in value:
        if key not in field.fields:
            hint = suggest(key, field.fields)
            where = "%s.%s" % (path, key) if path else str(key)
            errors.add(
                where,
                "unknown key; did you mean %s?" % hint
                if hint
                else "unknown key; valid keys: %s" % ", ".join(sorted(field.fields)),
            )
    for key, sub in field.fields.items():
        where = "%s.%s" % (path, key) if path else key
        got = value.get(key)
        if got is None:
            if sub.required:
                errors.add(where, "is required")
            elif sub.default is not MISSING:
                out[key] = (
                    parse(copy_value(sub.default), sub, where, errors)
                    if sub.kind == "object"
                    else copy_value(sub.default)
                )
            continue
        parsed = parse(got, sub, where, errors)
        if parsed is not MISSING:
            out[key] = parsed
    return out


def copy_value(value: Any) -> Any:
    return (
        {k: copy_value(v) for k, v in value.items()}
        if isinstance(value, dict)
        else list(value)
        if isinstance(value, list)
        else value
    )


def _parse_list(value: Any, field: Field, path: str, errors: Errors) -> Any:
    if not isinstance(value, list):
        errors.add(path, "must be a list, got %s %s" % (_kind_name(value), _show(value)))
        return MISSING
    if field.max_items is not None and len(value) > field.max_items:
        errors.add(path, "must have at most %d items, got %d" % (field.max_items, len(value)))
        return MISSING
    if field.min_items is not None and len(value) < field.min_items:
        errors.add(path, "must have at least %d item(s)" % field.min_items)
        return MISSING
    out: list[Any] = []
    for i, item in enumerate(value):
        parsed = parse(item, field.items, "%s[%d]" % (path, i), errors)
        if parsed is not MISSING:
            out.append(parsed)
    return out


_PARSERS: dict[str, Callable[[Any, Field, str, Errors], Any]] = {
    "int": _parse_int,
    "str": _parse_str,
    "bool": _parse_bool,
    "object": _parse_object,
    "list": _parse_list,
}


def parse(value: Any, field: Field, path: str, errors: Errors) -> Any:
    """``value`` checked against ``field``: the typed value, or ``MISSING`` with the errors added."""
    return _PARSERS[field.kind](value, field, path, errors)
