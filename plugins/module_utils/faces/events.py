# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vGPU events of the ``whitesky.capvco.vgpu_events`` event source (pure Python, no Ansible import).

The source (``extensions/eda/plugins/event_source/vgpu_events.py``) is thin: it parses its arguments here
(:func:`settings`), holds the cursor (:func:`locked`, :func:`load`), and polls: :func:`read` reads a location,
:func:`plan` says what that reading means against what was already delivered, and each event is written down
*before* the source puts it on its queue (:meth:`Cursor.prepare`: its ``seq`` given once, what it changes
recorded, the event itself kept as the cursor's ``pending`` event, the cursor saved).  A source killed anywhere
therefore restarts from what it delivered or was about to deliver: it puts the pending event on the queue again
first, with the same ``seq`` (so an event is delivered at least once, and a repeat is the same event with the same
``seq``, which a consumer can check), and no ``seq`` ever names two events.

The events (docs/gpus.md, "Events", is the user's description):

- ``vgpu.orphaned``: once per escape of a reservation: it is owned (its name decodes), no VM of its machine exists
  in the location, and it is at least ``grace_period`` old (its age is read from its name, as ``vgpu_reclaim``
  reads it: the reservations ``gpu_orphans -e reclaim=true`` would release).
- ``vgpu.reclaimed``: once, for a reservation whose ``vgpu.orphaned`` was delivered, when a later reading no longer
  shows it as an orphan: ``reason: released`` when it is no longer listed at all (deleted permanently, the one
  state in which a vGPU stops billing: by ``gpu_orphans``, ``vgpu_reclaim``, by hand); ``reason: owner_back`` when
  it is still listed but a VM of its machine's name exists again.  Detaching it, moving it to the recycle bin
  (soft delete) or restoring it from there changes nothing: it still bills, and it is still an orphan.
- ``cost.threshold``: when the money at risk in a location rises above ``cost_threshold``: the figure is the
  location's escaped orphans (those ``vgpu.orphaned`` reports, soft-deleted ones included) times the hourly price
  of one vGPU there (the price list's monthly ``vgu`` / 730).  Once per crossing: it is re-armed when a reading
  shows the figure at or below the threshold.

Everything the platform says is hostile: a string it gives is passed on in an event only when it is a plain token
(:func:`plain`: letters, digits, space, ``. _ : @ + -``; so never a Jinja template, which a playbook's extra vars
would render) and is ``null`` otherwise, named in the event's ``withheld``; a number only when it is finite.
The cursor file is hostile too: it is read whole, checked field by field, and refused (never reset) when it is not
exactly what :meth:`Cursor.save` writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.billing import Billed, Costs, add, costs, times
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import check_id
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.sweep import OrphanCheck, machines_in_location
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import attached_to

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

ORPHANED = "vgpu.orphaned"
RECLAIMED = "vgpu.reclaimed"
THRESHOLD = "cost.threshold"
#: The source's name in a rulebook.
SOURCE = "whitesky.capvco.vgpu_events"

#: The orphan sweep's default (``vgpu_reclaim``'s ``grace_period``, the ``gpu_orphans`` playbook's).
DEFAULT_GRACE_PERIOD = 900.0
DEFAULT_INTERVAL = 60.0
DEFAULT_TIMEOUT = 30.0
#: The longest wait between polls while the platform fails (unless ``interval`` is longer).
DEFAULT_MAX_BACKOFF = 300.0
#: How many reservations a ``cost.threshold`` names (the oldest); its counts cover all of them.
THRESHOLD_NAMES = 20

CURSOR_KIND = "whitesky.capvco.vgpu_events cursor"
CURSOR_VERSION = 2
#: The largest cursor file read (a cursor of 100,000 reported orphans is some 20 MB).
CURSOR_MAX_BYTES = 64 * 1024 * 1024

#: The connection arguments and the environment variable each falls back to, as the modules'.
CONNECTION_ENV = {
    "api_url": "WHITESKY_API_URL",
    "api_token": "WHITESKY_API_TOKEN",
    "customer_id": "WHITESKY_CUSTOMER_ID",
}
ARGUMENTS = frozenset(
    (
        *CONNECTION_ENV,
        "validate_certs",
        "timeout",
        "location",
        "locations",
        "interval",
        "grace_period",
        "cost_threshold",
        "cursor",
        "max_backoff",
    )
)

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._:@+-]{0,254}")
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def plain(value: object) -> str | None:
    """``value`` when it is a plain token (at most 255 letters, digits, spaces and ``. _ : @ + -``, starting with a
    letter or digit), else None: what the platform says goes into an event only as such a token."""
    return value if isinstance(value, str) and _PLAIN.fullmatch(value) else None


def finite(value: object, digits: int = 4) -> float | None:
    """``value`` rounded, when it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return round(float(value), digits)


# -- arguments --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Settings:
    """The source's arguments, checked."""

    api_url: str
    api_token: str = dataclasses.field(repr=False)
    customer_id: str
    validate_certs: bool
    timeout: float
    locations: tuple[str, ...]
    interval: float
    grace_period: float
    cost_threshold: float | None
    cursor: str
    max_backoff: float


def _number(value: object, name: str, minimum: float, open_: bool) -> float:
    """``value`` (a number, or a string of one, as a rulebook's variables may give it) checked: finite, at least
    ``minimum`` (more than it, when ``open_``)."""
    number: float | None = None
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            number = float(value.strip())
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    if number is None or not math.isfinite(number) or number < minimum or (open_ and number == minimum):
        raise InputError(
            "%s must be a number of %s %s, got %r" % (name, "more than" if open_ else "at least", minimum, value)
        )
    return number


def _optional(args: Mapping[str, Any], name: str, default: float, minimum: float, open_: bool = False) -> float:
    value = args.get(name)
    return default if value is None else _number(value, name, minimum, open_)


def _bool(args: Mapping[str, Any], name: str, default: bool) -> bool:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise InputError("%s must be true or false, got %r" % (name, value))


def _text(args: Mapping[str, Any], environ: Mapping[str, str], name: str) -> str | None:
    value = args.get(name)
    if value is None:
        value = environ.get(CONNECTION_ENV[name])
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InputError("%s must be a string, got a %s" % (name, type(value).__name__))
    return value.strip()


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


def settings(args: Mapping[str, Any], environ: Mapping[str, str]) -> Settings:
    """The source's arguments (a rulebook's ``args``), checked, with the connection from ``environ`` where the
    arguments leave it out.  ``eda_*`` keys (ansible-rulebook's own, e.g. ``eda_feedback_queue``) are ignored; any
    other unknown key is refused (a misspelt ``grace_period`` must not go unnoticed)."""
    unknown = sorted(str(k) for k in args if k not in ARGUMENTS and not str(k).startswith("eda_"))
    if unknown:
        raise InputError("%s takes no argument(s) %s; it takes %s" % (SOURCE, unknown, ", ".join(sorted(ARGUMENTS))))
    connection = {name: _text(args, environ, name) for name in CONNECTION_ENV}
    missing = [name for name, value in connection.items() if value is None]
    if missing:
        raise InputError(
            "missing the platform connection: %s. Set the argument(s) or the environment variable(s) %s."
            % (", ".join(missing), ", ".join(CONNECTION_ENV[name] for name in missing))
        )
    api_url, api_token, customer_id = (str(connection[name]) for name in CONNECTION_ENV)
    check_id("customer_id", customer_id)
    cursor = args.get("cursor")
    if cursor is not None and (not isinstance(cursor, str) or not cursor.strip()):
        raise InputError("cursor must be the path of the cursor file, got %r" % (cursor,))
    threshold = args.get("cost_threshold")
    timeout = args.get("timeout")
    if timeout is None:
        timeout = environ.get("WHITESKY_TIMEOUT") or DEFAULT_TIMEOUT
    return Settings(
        api_url=api_url,
        api_token=api_token,
        customer_id=customer_id,
        validate_certs=_bool(args, "validate_certs", True),
        timeout=_number(timeout, "timeout", 0.0, True),
        locations=_locations(args),
        interval=_optional(args, "interval", DEFAULT_INTERVAL, 0.0, True),
        grace_period=_optional(args, "grace_period", DEFAULT_GRACE_PERIOD, 0.0),
        cost_threshold=None if threshold is None else _number(threshold, "cost_threshold", 0.0, False),
        cursor=os.path.abspath(os.path.expanduser(cursor.strip()))
        if isinstance(cursor, str)
        else default_cursor(api_url, customer_id, environ),
        max_backoff=_optional(args, "max_backoff", DEFAULT_MAX_BACKOFF, 0.0, True),
    )


def next_delay(interval: float, failures: int, max_backoff: float) -> float:
    """Seconds to the next poll: ``interval``; after ``failures`` polls in a row in which a location failed, twice
    as long each time, up to ``max_backoff`` (or ``interval``, when that is longer)."""
    if failures <= 0:
        return interval
    return min(interval * 2.0 ** min(failures, 32), max(interval, max_backoff))


# -- a reading of a location ------------------------------------------------------------------------------------


class Found(NamedTuple):
    """An owned reservation as a reading keeps it."""

    vgpu_id: str
    vgpu_name: str
    owner: naming.Owner
    status: str
    vm_id: int | None
    vm_name: str | None


class Reading(NamedTuple):
    """What one poll read of a location: the ids of its owned reservations (soft-deleted ones included), its
    orphans (owned, no VM of their machine in the location; of any age), their costs, one vGPU's hourly price and
    the currency."""

    location: str
    now: float
    listed: frozenset[str]
    orphans: tuple[Found, ...]
    costs: Costs
    per_hour: float | None  # None: the location's price is not known
    currency: str | None

    def escaped(self, grace_period: float) -> list[Found]:
        """The orphans at least ``grace_period`` old, the oldest first."""
        out = [o for o in self.orphans if self.now - o.owner.created >= grace_period]
        out.sort(key=lambda o: (o.owner.created, o.vgpu_name))
        return out

    def at_risk(self, grace_period: float) -> float | None:
        """The money at risk per hour: the escaped orphans times one vGPU's hourly price (None: not known)."""
        return times(len(self.escaped(grace_period)), self.per_hour)


def read(client: WhiteskyClient, location: str, now: float | None = None) -> Reading:
    """Read a location: its reservations (soft-deleted included), then its VMs, then the orphans' costs (blocking).

    The reservations are listed before the VMs, as ``vgpu_reclaim`` lists them: a reservation needs its VM to
    exist, so one made while this reads is never taken for an orphan."""
    now = time.time() if now is None else now
    owned: list[Found] = []
    for item in client.vgpus(location, include_deleted=True):
        owner = naming.decode(item.get("vgpu_name"))
        if owner is None:
            continue  # not ours: never reported
        vm = item.get("virtual_machine")
        owned.append(
            Found(item["vgpu_id"], item["vgpu_name"], owner, item["status"], attached_to(item), vm and vm["name"])
        )
    is_orphan = OrphanCheck(machines_in_location(client, location))
    orphans = tuple(o for o in owned if is_orphan(o.owner))
    billed = [Billed(o.vgpu_id, o.vm_id, o.owner.cluster, o.owner.created) for o in orphans]
    figures, currency, per_hour = costs(client, location, billed, now)
    return Reading(location, now, frozenset(o.vgpu_id for o in owned), orphans, figures, per_hour, currency)


# -- the cursor -------------------------------------------------------------------------------------------------


class Reported(NamedTuple):
    """An orphan whose ``vgpu.orphaned`` was delivered (until its ``vgpu.reclaimed`` is): what the reclaimed event
    says of it.  Immutable: the cursor keeps each one's JSON text until it changes."""

    vgpu_name: str
    seq: int
    orphaned_at: float
    cost_per_hour: float | None  # None: the price was not known
    currency: str | None
    cost: float | None
    last_seen: float


@dataclasses.dataclass
class Place:
    """A location's part of the cursor: its reported orphans by vgpu_id, and whether its ``cost.threshold`` was
    delivered and is not re-armed yet."""

    reported: dict[str, Reported] = dataclasses.field(default_factory=dict)
    above: bool = False


class Step(NamedTuple):
    """One event to deliver (``seq`` is set when it is), and what the cursor records once it is delivered: the
    reservation it reports (``vgpu.orphaned``) or lets go (``vgpu.reclaimed``), or the threshold crossed."""

    event: dict[str, Any]
    report: tuple[str, Reported] | None = None
    drop: str | None = None
    above: bool = False


@dataclasses.dataclass
class Cursor:
    """What the source delivered, for one customer of one platform: ``seq``, the number of events delivered (each
    event carries its own), and each location's :class:`Place`.  Written whole, atomically, by :meth:`save`."""

    path: str
    api_url: str
    customer_id: str
    seq: int = 0
    locations: dict[str, Place] = dataclasses.field(default_factory=dict)
    #: the event written down and about to be delivered (or delivered, until the next save): a restart delivers it
    #: again first, with its seq
    pending: dict[str, Any] | None = None
    #: each reported orphan's JSON text, by (location, vgpu_id), while it is unchanged: a save after each event
    #: then costs a join, not the serialization of every reported orphan again
    _texts: dict[tuple[str, str], tuple[Reported, str]] = dataclasses.field(default_factory=dict, repr=False)

    def place(self, location: str) -> Place:
        return self.locations.setdefault(location, Place())

    def record(self, location: str, step: Step, seq: int) -> None:
        """Write down (in memory) that ``step``'s event went out as number ``seq``."""
        place = self.place(location)
        if step.report is not None:
            vgpu_id, reported = step.report
            place.reported[vgpu_id] = reported._replace(seq=seq)
        if step.drop is not None:
            place.reported.pop(step.drop, None)
        if step.above:
            place.above = True
        self.seq = seq

    def prepare(self, location: str, step: Step) -> dict[str, Any]:
        """The step's event with the next ``seq``, written down before it is delivered: what it changes recorded,
        the event kept as ``pending``, the cursor saved.  The caller delivers it, then calls :meth:`delivered`."""
        seq = self.seq + 1
        event = dict(step.event, seq=seq)
        self.record(location, step, seq)
        self.pending = event
        self.save()
        return event

    def delivered(self) -> None:
        """The pending event is on the queue: the next save forgets it (until then a restart delivers it again)."""
        self.pending = None

    def _entry(self, location: str, vgpu_id: str, reported: Reported, texts: dict[Any, Any]) -> str:
        cached = self._texts.get((location, vgpu_id))
        if cached is not None and cached[0] == reported:
            text = cached[1]
        else:
            text = json.dumps(vgpu_id) + ":" + json.dumps(reported._asdict(), allow_nan=False, separators=(",", ":"))
        texts[location, vgpu_id] = (reported, text)
        return text

    def text(self) -> str:
        """The cursor's JSON text (the reported orphans in the order they were reported)."""
        texts: dict[tuple[str, str], tuple[Reported, str]] = {}
        places = []
        for name, place in sorted(self.locations.items()):
            reported = ",".join(self._entry(name, k, v, texts) for k, v in place.reported.items())
            places.append(
                '%s:{"above_threshold":%s,"reported":{%s}}' % (json.dumps(name), json.dumps(place.above), reported)
            )
        self._texts = texts
        head = {
            "kind": CURSOR_KIND,
            "version": CURSOR_VERSION,
            "api_url": self.api_url,
            "customer_id": self.customer_id,
            "seq": self.seq,
            "pending": self.pending,
        }
        return json.dumps(head, separators=(",", ":"), allow_nan=False)[:-1] + ',"locations":{%s}}' % ",".join(places)

    def save(self) -> None:
        """Write the cursor: a temporary file beside it, flushed and fsynced, renamed over it (``os.replace``),
        then the folder fsynced: a crash leaves the old cursor or the new one, never a torn one."""
        text = self.text()
        folder = os.path.dirname(self.path)
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(self.path) + ".", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _refuse(path: str, why: str) -> InputError:
    return InputError(
        "refusing the cursor file %s: %s. It was left as it is: give the source another cursor path, or remove "
        "the file to start afresh (every orphan past the grace period is then reported again)" % (path, why)
    )


def _reject_constant(name: str) -> Any:
    raise ValueError("%s is not a number JSON allows" % name)


def _field(data: Mapping[str, Any], key: str, types: tuple[type, ...], where: str) -> Any:
    value = data.get(key)
    if key not in data or isinstance(value, bool) != (bool in types) or not isinstance(value, types):
        raise ValueError("%s.%s is missing or not %s" % (where, key, " or ".join(t.__name__ for t in types)))
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("%s.%s is not finite" % (where, key))
    return value


def _keys(data: object, expected: frozenset[str], where: str) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise ValueError("%s is not an object" % where)
    if set(data) != expected:
        raise ValueError("%s has the keys %s, not %s" % (where, sorted(map(str, data))[:10], sorted(expected)))
    return data


_NUM = (int, float)
_REPORTED_KEYS = frozenset(Reported._fields)


def _reported(data: object, where: str) -> Reported:
    fields = _keys(data, _REPORTED_KEYS, where)
    name = _field(fields, "vgpu_name", (str,), where)
    if naming.decode(name) is None:
        raise ValueError("%s.vgpu_name is not the name of an owned reservation" % where)
    currency = fields["currency"]
    if currency is not None and plain(currency) is None:
        raise ValueError("%s.currency is not a plain token" % where)
    seq = _field(fields, "seq", (int,), where)
    if seq < 1:
        raise ValueError("%s.seq is not a positive number" % where)
    return Reported(
        vgpu_name=name,
        seq=seq,
        orphaned_at=float(_field(fields, "orphaned_at", _NUM, where)),
        cost_per_hour=_number_or_none(fields, "cost_per_hour", where),
        currency=currency,
        cost=_number_or_none(fields, "cost", where),
        last_seen=float(_field(fields, "last_seen", _NUM, where)),
    )


def _number_or_none(fields: Mapping[str, Any], key: str, where: str) -> float | None:
    """A finite number of the cursor's, or None (a price that was not known)."""
    return None if fields[key] is None else float(_field(fields, key, _NUM, where))


#: The keys of each event as the source delivers it (its ``seq`` included): what a pending event must have.
EVENT_KEYS: dict[str, frozenset[str]] = {
    ORPHANED: frozenset(
        [
            "type",
            "location",
            "vgpu_name",
            "owner",
            "age",
            "grace_period",
            "in_recycle_bin",
            "vm_id",
            "vgpu_seconds",
            "cost",
            "cost_per_hour",
            "detected_at",
            "withheld",
            "vgpu_id",
            "status",
            "vm_name",
            "currency",
            "seq",
        ]
    ),
    RECLAIMED: frozenset(
        [
            "type",
            "location",
            "vgpu_name",
            "owner",
            "reason",
            "orphaned_seq",
            "orphaned_at",
            "last_seen",
            "cost",
            "cost_per_hour",
            "saved_per_hour",
            "detected_at",
            "withheld",
            "vgpu_id",
            "currency",
            "seq",
        ]
    ),
    THRESHOLD: frozenset(
        [
            "type",
            "location",
            "cost_per_hour",
            "threshold",
            "orphans",
            "cost",
            "vgpu_names",
            "grace_period",
            "detected_at",
            "withheld",
            "currency",
            "seq",
        ]
    ),
}


def _pending(data: object, seq: int) -> dict[str, Any] | None:
    """The cursor's pending event: null, or an event of a known type numbered as the cursor's last, whose every
    string is a plain token (it goes onto the queue as it is)."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ValueError("the cursor's pending event is not an object")
    fields: dict[str, Any] = data
    keys = EVENT_KEYS.get(fields.get("type"))  # type: ignore[arg-type]
    if keys is None:
        raise ValueError("the cursor's pending event is of no known type")
    if set(fields) != keys:
        raise ValueError("the cursor's pending event has the keys %s, not %s" % (sorted(fields)[:20], sorted(keys)))
    names = fields.get("vgpu_names") if fields["type"] == THRESHOLD else [fields.get("vgpu_name")]
    if not isinstance(names, list) or any(naming.decode(n) is None for n in names):
        raise ValueError("the cursor's pending event names a reservation that is not an owned one")
    if _field(fields, "seq", (int,), "the cursor's pending event") != seq:
        raise ValueError("the cursor's pending event is not numbered as the cursor's last event")
    todo: list[object] = [fields]
    while todo:
        value = todo.pop()
        if isinstance(value, dict):
            todo.extend(value.keys())
            todo.extend(value.values())
        elif isinstance(value, list):
            todo.extend(value)
        elif isinstance(value, str) and plain(value) is None:
            raise ValueError("the cursor's pending event holds a string that is not a plain token")
    return dict(fields)


def _parse(data: Mapping[str, Any], cursor: Cursor) -> None:
    """Fill ``cursor`` from a document whose kind, version and scope were checked; ValueError names what is wrong."""
    cursor.seq = _field(data, "seq", (int,), "the cursor")
    if cursor.seq < 0:
        raise ValueError("the cursor's seq is negative")
    locations = data["locations"]
    if not isinstance(locations, dict):
        raise ValueError("the cursor's locations is not an object")
    for name, body in locations.items():
        where = "locations[%r]" % name
        try:
            check_id("location", name)
        except InputError:
            raise ValueError("%s is not a location name" % where) from None
        fields = _keys(body, frozenset(("above_threshold", "reported")), where)
        place = Place(above=_field(fields, "above_threshold", (bool,), where))
        reported = fields["reported"]
        if not isinstance(reported, dict):
            raise ValueError("%s.reported is not an object" % where)
        for vgpu_id, item in reported.items():
            if not vgpu_id or len(vgpu_id) > 256:
                raise ValueError("%s.reported has a key that is no reservation id" % where)
            place.reported[vgpu_id] = _reported(item, "%s.reported[%r]" % (where, vgpu_id[:64]))
            if place.reported[vgpu_id].seq > cursor.seq:
                raise ValueError("%s.reported[%r].seq is beyond the cursor's seq" % (where, vgpu_id[:64]))
        cursor.locations[name] = place


def load(path: str, api_url: str, customer_id: str) -> Cursor:
    """The cursor at ``path`` for ``customer_id`` at ``api_url``; a new one (empty) when there is no file.  A file
    that is not such a cursor, exactly, is refused with an error naming the path: never reset, never overwritten."""
    scope = public_url(api_url)
    cursor = Cursor(path, scope, customer_id)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(CURSOR_MAX_BYTES + 1)
    except FileNotFoundError:
        return cursor
    except OSError as exc:
        raise _refuse(path, "it cannot be read (%s)" % (exc.strerror or exc)) from None
    if len(raw) > CURSOR_MAX_BYTES:
        raise _refuse(path, "it is larger than %d bytes" % CURSOR_MAX_BYTES)
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise _refuse(path, "it is not JSON (a corrupt file, or not a cursor)") from None
    if not isinstance(data, dict) or data.get("kind") != CURSOR_KIND:
        raise _refuse(path, "it is not a %s cursor (its kind is not %r)" % (SOURCE, CURSOR_KIND))
    if data.get("version") != CURSOR_VERSION:
        raise _refuse(path, "its version is %r; this source reads version %d" % (data.get("version"), CURSOR_VERSION))
    if data.get("customer_id") != customer_id or data.get("api_url") != scope:
        raise _refuse(
            path,
            "it is the cursor of customer %r at %r, not of customer %r at %r"
            % (data.get("customer_id"), data.get("api_url"), customer_id, scope),
        )
    try:
        _keys(
            data, frozenset(("kind", "version", "api_url", "customer_id", "seq", "pending", "locations")), "the cursor"
        )
        _parse(data, cursor)
        cursor.pending = _pending(data["pending"], cursor.seq)
    except ValueError as exc:
        raise _refuse(path, "it is corrupt: %s" % exc) from None
    return cursor


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """Hold ``path + ".lock"`` (``flock``, exclusive) while the source runs: two sources on one cursor would deliver
    the same events twice.  The cursor's folder is made (mode 0700) when it does not exist."""
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise _refuse(path, "its folder or lock file cannot be made (%s)" % (exc.strerror or exc)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise InputError(
                "the cursor file %s is in use by another %s source (it holds %s.lock): give each source its own "
                "cursor" % (path, SOURCE, path)
            ) from None
        yield
    finally:
        os.close(fd)


# -- what a reading means ---------------------------------------------------------------------------------------


def _owner(owner: naming.Owner) -> dict[str, Any]:
    return {"cluster": owner.cluster, "machine": owner.machine, "slot": owner.slot, "created": owner.created}


def _withheld(event: dict[str, Any], raw: Mapping[str, object]) -> dict[str, Any]:
    """``event`` with each of ``raw``'s platform strings as a plain token, or None and named in ``withheld``."""
    event["withheld"] = []
    for key, value in raw.items():
        event[key] = plain(value)
        if value is not None and event[key] is None:
            event["withheld"].append(key)
    return event


def orphaned_event(found: Found, reading: Reading, grace_period: float) -> dict[str, Any]:
    seconds, cost = reading.costs.get(found.vgpu_id, (0.0, times(0, reading.per_hour)))
    event: dict[str, Any] = {
        "type": ORPHANED,
        "location": reading.location,
        "vgpu_name": found.vgpu_name,
        "owner": _owner(found.owner),
        "age": int(reading.now - found.owner.created),
        "grace_period": grace_period,
        "in_recycle_bin": found.status == "DELETED",
        "vm_id": found.vm_id,
        "vgpu_seconds": finite(seconds, 1),
        "cost": finite(cost),
        "cost_per_hour": finite(reading.per_hour),
        "detected_at": round(reading.now, 3),
    }
    raw = {"vgpu_id": found.vgpu_id, "status": found.status, "vm_name": found.vm_name, "currency": reading.currency}
    return _withheld(event, raw)


def reclaimed_event(vgpu_id: str, reported: Reported, reason: str, reading: Reading) -> dict[str, Any]:
    owner = naming.decode(reported.vgpu_name)
    event: dict[str, Any] = {
        "type": RECLAIMED,
        "location": reading.location,
        "vgpu_name": reported.vgpu_name,
        "owner": _owner(owner) if owner is not None else None,
        "reason": reason,
        "orphaned_seq": reported.seq,
        "orphaned_at": reported.orphaned_at,
        "last_seen": reported.last_seen,
        "cost": finite(reported.cost),
        "cost_per_hour": finite(reported.cost_per_hour),
        "saved_per_hour": finite(reported.cost_per_hour) if reason == "released" else 0.0,
        "detected_at": round(reading.now, 3),
    }
    return _withheld(event, {"vgpu_id": vgpu_id, "currency": reported.currency})


def _sum_costs(costs: Iterable[float | None]) -> float | None:
    """The sum of costs; None once one of them is not known."""
    total: float | None = 0.0
    for cost in costs:
        total = add(total, cost)
    return total


def threshold_event(reading: Reading, grace_period: float, threshold: float) -> dict[str, Any]:
    escaped = reading.escaped(grace_period)
    event: dict[str, Any] = {
        "type": THRESHOLD,
        "location": reading.location,
        "cost_per_hour": reading.at_risk(grace_period),
        "threshold": threshold,
        "orphans": len(escaped),
        "cost": _sum_costs(reading.costs.get(o.vgpu_id, (0.0, 0.0))[1] for o in escaped),
        "vgpu_names": [o.vgpu_name for o in escaped[:THRESHOLD_NAMES]],
        "grace_period": grace_period,
        "detected_at": round(reading.now, 3),
    }
    return _withheld(event, {"currency": reading.currency})


def plan(place: Place, reading: Reading, grace_period: float, cost_threshold: float | None) -> list[Step]:
    """The events a reading calls for, in order, against a location's :class:`Place` (pure): a ``vgpu.reclaimed``
    for each reported orphan the reading no longer shows as one (in the order they were reported), a
    ``vgpu.orphaned`` for each escaped orphan not reported yet (the oldest first), then a ``cost.threshold`` when
    the money at risk is above ``cost_threshold`` and the threshold is armed."""
    current = {o.vgpu_id for o in reading.orphans}
    steps: list[Step] = []
    for vgpu_id, reported in sorted(place.reported.items(), key=lambda item: item[1].seq):
        if vgpu_id not in current:
            reason = "owner_back" if vgpu_id in reading.listed else "released"
            steps.append(Step(reclaimed_event(vgpu_id, reported, reason, reading), drop=vgpu_id))
    seen: set[str] = set()  # a listing that names a reservation twice (a hostile one, or pages that raced) says it once
    for found in reading.escaped(grace_period):
        if found.vgpu_id in place.reported or found.vgpu_id in seen:
            continue
        seen.add(found.vgpu_id)
        cost = reading.costs.get(found.vgpu_id, (0.0, 0.0))[1]
        reported = Reported(
            vgpu_name=found.vgpu_name,
            seq=0,  # the event's, once it is delivered
            orphaned_at=round(reading.now, 3),
            cost_per_hour=finite(reading.per_hour),
            currency=plain(reading.currency),
            cost=finite(cost),
            last_seen=round(reading.now, 3),
        )
        steps.append(Step(orphaned_event(found, reading, grace_period), report=(found.vgpu_id, reported)))
    at_risk = reading.at_risk(grace_period)  # unknown (no price): no threshold is crossed on a guess
    if cost_threshold is not None and not place.above and at_risk is not None and at_risk > cost_threshold:
        steps.append(Step(threshold_event(reading, grace_period, cost_threshold), above=True))
    return steps


def settle(place: Place, reading: Reading, grace_period: float, cost_threshold: float | None) -> None:
    """After a reading's events are delivered: each reported orphan still shown gets its cost so far and the time it
    was last seen; the threshold is re-armed when the money at risk is at or below it (or there is none)."""
    for found in reading.orphans:
        reported = place.reported.get(found.vgpu_id)
        if reported is not None:
            cost = finite(reading.costs.get(found.vgpu_id, (0.0, 0.0))[1])
            place.reported[found.vgpu_id] = reported._replace(
                cost=reported.cost if cost is None else cost, last_seen=round(reading.now, 3)
            )
    at_risk = reading.at_risk(grace_period)
    if place.above and (cost_threshold is None or (at_risk is not None and at_risk <= cost_threshold)):
        place.above = False
