# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The platform connection: its options, the environment variables they fall back to, and what it is once read
(plain Python, no Ansible).

:data:`OPTIONS` is the one table of the connection options.  The modules' argument spec (``faces/module.py``), the
inventory plugin (``plugins/inventory/vms.py``) and the event source (``faces/events.py``) take theirs from it; the
node agent builds its :class:`Connection` from its command line and credential file.  Their documentation
(``plugins/doc_fragments/connection.py``, the plugins' ``DOCUMENTATION``) is static YAML, checked against the table
by ``tests/unit/platform/test_connection.py``.

A :class:`Connection` never shows its token: not in its ``repr`` or ``str``, and :meth:`Connection.redact` cuts it
out of any text (through the one scrubber, ``scrub.scrub``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import LIMIT, scrub


class Option(NamedTuple):
    """A connection option: its name, its type (Ansible's name of it), the environment variable it falls back to,
    its default (None: required, from the option or its variable) and whether it is a secret (``no_log``)."""

    name: str
    type: str
    env: str | None
    default: Any
    no_log: bool = False


#: The connection options, in the order every message names them.
OPTIONS: tuple[Option, ...] = (
    Option("api_url", "str", "WHITESKY_API_URL", None),
    Option("api_token", "str", "WHITESKY_API_TOKEN", None, no_log=True),
    Option("customer_id", "str", "WHITESKY_CUSTOMER_ID", None),
    Option("validate_certs", "bool", "WHITESKY_VALIDATE_CERTS", True),
    Option("timeout", "float", "WHITESKY_TIMEOUT", 30.0),
)
_BY_NAME = {option.name: option for option in OPTIONS}
#: The options without a default: a connection needs a value for each, from the option or its variable.
REQUIRED = tuple(option.name for option in OPTIONS if option.default is None)

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def check_id(kind: str, value: Any) -> str:
    """A customer or location id as it enters: letters, digits, ``.``, ``_`` and ``-``, at most 128."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InputError(
            "invalid %s %r: use 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
            % (kind, value)
        )
    return value


def missing(names: Sequence[str], where: str = "") -> str:
    """The one message for a connection without the required options ``names``: each, and its variable.  ``where``
    says where the options are set, when that is not plain (``" in whitesky.capvco.vms"``)."""
    one = len(names) == 1
    return "missing the platform connection: %s. Set the option%s%s, or the environment variable%s %s." % (
        ", ".join(names),
        "" if one else "s",
        where,
        "" if one else "s",
        ", ".join(str(_BY_NAME[name].env) for name in names),
    )


def require(where: str = "", **values: object) -> None:
    """Refuse (:class:`InputError`, :func:`missing`) when any of the required options ``values`` has none (None, or
    white space only), naming every one that has none."""
    lacking = [name for name in REQUIRED if name in values and text(values[name], name) is None]
    if lacking:
        raise InputError(missing(lacking, where))


def text(value: object, name: str) -> str | None:
    """A string option, stripped; None when it has no value (None, or white space only)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InputError("%s must be a string, got a %s" % (name, type(value).__name__))
    return value.strip()


def boolean(value: object, name: str) -> bool:
    """A boolean option, or a string of one as a rulebook's variables may give it (``true``, ``no``, ...)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise InputError("%s must be true or false, got %r" % (name, value))


def number(value: object, name: str, minimum: float, open_: bool) -> float:
    """A number option (or a string of one, as a rulebook's variables may give it), checked: finite, at least
    ``minimum`` (more than it, when ``open_``)."""
    found: float | None = None
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            found = float(value.strip())
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        found = float(value)
    if found is None or not math.isfinite(found) or found < minimum or (open_ and found == minimum):
        raise InputError(
            "%s must be a number of %s %s, got %r" % (name, "more than" if open_ else "at least", minimum, value)
        )
    return found


def _positive(value: object, name: str) -> float:
    return number(value, name, 0.0, True)


#: How an option of each type is read.
_PARSERS: dict[str, Callable[[object, str], Any]] = {"str": text, "bool": boolean, "float": _positive}


@dataclasses.dataclass(frozen=True)
class Connection:
    """The platform connection, checked: what a client is built from (``WhiteskyClient.connect``).  Its ``repr``
    (and ``str``) leaves the token out."""

    api_url: str
    api_token: str = dataclasses.field(repr=False)
    customer_id: str
    validate_certs: bool = True
    timeout: float = 30.0

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], environ: Mapping[str, str] | None = None, where: str = ""
    ) -> Connection:
        """The connection from ``options`` (any mapping that has them: a module's parameters, a rulebook's
        arguments), each one that is None taken from its environment variable in ``environ`` (None: the caller's
        framework did that already), else its default.  A required one without a value is refused with
        :func:`missing` (``where``: where the options are set); a value of the wrong type or form, naming it."""
        raw: dict[str, Any] = {}
        for option in OPTIONS:
            value = options.get(option.name)
            if value is None and option.env is not None and environ is not None:
                value = environ.get(option.env)
            if value is None or (isinstance(value, str) and not value.strip()):
                value = option.default
            raw[option.name] = value
        require(where, **raw)
        values = {option.name: _PARSERS[option.type](raw[option.name], option.name) for option in OPTIONS}
        check_id("customer_id", values["customer_id"])
        return cls(**values)

    def redact(self, text: object, limit: int = LIMIT, multiline: bool = False) -> str:
        """``text`` fit to be shown: without this connection's token (even one that is no JWT), through the one
        scrubber (``scrub.scrub``)."""
        return scrub(text, limit, multiline=multiline, secrets=(self.api_token,))
