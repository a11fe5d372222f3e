# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``whitesky.capvco.vgpu_events`` event source's arguments (plain Python, no Ansible).

The source (``extensions/eda/plugins/event_source/vgpu_events.py``) is thin: it parses its arguments here
(:func:`settings`), holds the cursor (``faces/cursor.py``: :func:`~cursor.locked`, :func:`~cursor.load`), and polls:
``reclaim/events.py`` reads a location (:func:`~reclaim.events.read`) and says what that reading means against what
was already delivered (:func:`~reclaim.events.plan`), and each event is written down in the cursor *before* the
source puts it on its queue (:meth:`~cursor.Cursor.prepare`).  The events and the delivery guarantee are described
there, and in docs/gpus.md ("Events").

The connection arguments are the collection's connection options (``connection.OPTIONS``), each falling back to
its environment variable as the modules' do.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import (
    OPTIONS,
    Connection,
    check_id,
    number,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import schema

#: The source's name in a rulebook.
SOURCE = "whitesky.capvco.vgpu_events"

#: The orphan sweep's default (``vgpu_reclaim``'s ``grace_period``, the ``gpu_orphans`` playbook's).
DEFAULT_GRACE_PERIOD = 900.0
DEFAULT_INTERVAL = 60.0
#: The longest wait between polls while the platform fails (unless ``interval`` is longer).
DEFAULT_MAX_BACKOFF = 300.0

ARGUMENTS = frozenset(
    (
        *(option.name for option in OPTIONS),
        "location",
        "locations",
        "interval",
        "grace_period",
        "cost_threshold",
        "cursor",
        "max_backoff",
    )
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settings(Connection):
    """The source's arguments, checked: its connection (the token never in its ``repr``) and its own."""

    locations: tuple[str, ...]
    interval: float
    grace_period: float
    cost_threshold: float | None
    cursor: str
    max_backoff: float


def _optional(args: Mapping[str, Any], name: str, default: float, minimum: float, open_: bool = False) -> float:
    value = args.get(name)
    return default if value is None else number(value, name, minimum, open_)


def _locations(args: Mapping[str, Any]) -> tuple[str, ...]:
    one, many = args.get("location"), args.get("locations")
    if (one is None) == (many is None):
        raise InputError(
            "give location (one platform location) or locations (a list of them), not %s"
            % ("both" if one is not None else "neither")
        )
    if one is not None:
        many = [one]
    if not isinstance(many, list) or not many:
        raise InputError("locations must be a non-empty list of location names, got %r" % (many,))
    if len(set(map(str, many))) != len(many):
        raise InputError("locations names a location twice: %r" % (many,))
    return tuple(check_id("location", name) for name in many)


def public_url(api_url: str) -> str:
    """The API's address as the cursor records it: no credentials, query or fragment, ending in ``/api/1`` as the
    client's base URL does."""
    parts = urlsplit(api_url.strip())
    netloc = parts.netloc.rpartition("@")[2]
    path = parts.path.rstrip("/")
    if not path.endswith("/api/1"):
        path += "/api/1"
    return urlunsplit((parts.scheme.lower(), netloc.lower(), path, "", ""))


def default_cursor(api_url: str, customer_id: str, environ: Mapping[str, str]) -> str:
    """``$XDG_STATE_HOME/whitesky-capvco/vgpu_events-<customer>-<12 hex digits of the API's address>.json``
    (``~/.local/state`` when ``XDG_STATE_HOME`` is unset or not absolute): one cursor per customer and platform."""
    base = environ.get("XDG_STATE_HOME") or ""
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    digest = hashlib.sha256(public_url(api_url).encode("utf-8")).hexdigest()[:12]
    return os.path.join(base, "whitesky-capvco", "vgpu_events-%s-%s.json" % (customer_id, digest))


def suggest(name: str) -> str | None:
    """The argument ``name`` was most likely meant to be (``schema.suggest``, the collection's one "did you mean")."""
    return schema.suggest(name, ARGUMENTS)


def _unknown(name: str) -> str:
    hint = suggest(name)
    return "%r (did you mean %s?)" % (name, hint) if hint else repr(name)


def check_token(token: str) -> None:
    """Refuse a token that cannot go into an ``Authorization`` header as it is: a bearer token is printable ASCII
    without white space (RFC 6750).  A token pasted with a line break, a ``Bearer `` prefix or a typographic quote
    would otherwise fail deep in the HTTP client (a traceback), or be retried as if the platform were down.  The
    message says where the first bad character is, never the token."""
    for index, char in enumerate(token):
        if not "!" <= char <= "~":
            raise InputError(
                "api_token (or WHITESKY_API_TOKEN) of %s is not a token that can be sent: its character %d is %s. A "
                "token is printable ASCII without spaces: was it copied with a line break, quotes or a 'Bearer ' "
                "prefix?"
                % (
                    SOURCE,
                    index + 1,
                    "not ASCII" if ord(char) > 127 else "white space or a control character",
                )
            )


def settings(args: Mapping[str, Any], environ: Mapping[str, str]) -> Settings:
    """The source's arguments (a rulebook's ``args``), checked, with the connection from ``environ`` where the
    arguments leave it out.  ``eda_*`` keys (ansible-rulebook's own, e.g. ``eda_feedback_queue``) are ignored; any
    other unknown key is refused, naming the argument it most likely meant (a misspelt ``grace_period`` must not go
    unnoticed), and so is a token that cannot be sent (:func:`check_token`)."""
    unknown = sorted(str(k) for k in args if k not in ARGUMENTS and not str(k).startswith("eda_"))
    if unknown:
        named = ", ".join(map(_unknown, unknown))
        raise InputError(
            "%s takes no argument%s %s; its arguments are %s"
            % (SOURCE, "" if len(unknown) == 1 else "s", named, ", ".join(sorted(ARGUMENTS)))
        )
    connection = Connection.from_options(args, environ, where=" in %s" % SOURCE)
    check_token(connection.api_token)
    cursor = args.get("cursor")
    if cursor is not None and (not isinstance(cursor, str) or not cursor.strip()):
        raise InputError("cursor must be the path of the cursor file, got %r" % (cursor,))
    threshold = args.get("cost_threshold")
    return Settings(
        **dataclasses.asdict(connection),
        locations=_locations(args),
        interval=_optional(args, "interval", DEFAULT_INTERVAL, 0.0, True),
        grace_period=_optional(args, "grace_period", DEFAULT_GRACE_PERIOD, 0.0),
        cost_threshold=None if threshold is None else number(threshold, "cost_threshold", 0.0, False),
        cursor=os.path.abspath(os.path.expanduser(cursor.strip()))
        if isinstance(cursor, str)
        else default_cursor(connection.api_url, connection.customer_id, environ),
        max_backoff=_optional(args, "max_backoff", DEFAULT_MAX_BACKOFF, 0.0, True),
    )


def next_delay(interval: float, failures: int, max_backoff: float) -> float:
    """Seconds to the next poll: ``interval``; after ``failures`` polls in a row in which a location failed, twice
    as long each time, up to ``max_backoff`` (or ``interval``, when that is longer)."""
    if failures <= 0:
        return interval
    return min(interval * 2.0 ** min(failures, 32), max(interval, max_backoff))
