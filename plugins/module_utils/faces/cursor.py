# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cursor of the ``whitesky.capvco.vgpu_events`` event source: its format, its file and its lock (plain Python,
no Ansible import).

The cursor is what the source delivered, for one customer of one platform: the number of events delivered (``seq``:
each event carries its own), each location's :class:`~reclaim.events.Place`, and the events written down and not yet
delivered (``pending``, in order).  Every event of a reading is written down at once, *before* the source puts the
first on its queue (:meth:`Cursor.prepare`: each ``seq`` given once, what each changes recorded, the events kept as
``pending``, the cursor saved), and each is struck off once it is on the queue (:meth:`Cursor.delivered`).  The queue
may hold the source for as long as the rule engine takes with the event before (a playbook's run): an orphan the
source has read is written down before that wait, so one released while the source is down still gets its
``vgpu.orphaned`` (and, at the next reading, its ``vgpu.reclaimed``).  A source killed anywhere therefore restarts
from what it delivered or was about to deliver: it puts the pending events on the queue again first, with the same
``seq`` (so an event is delivered at least once, and a repeat is the same event with the same ``seq``, which a
consumer can check), and no ``seq`` ever names two events.

The cursor file is hostile: it is read whole (at most :data:`CURSOR_MAX_BYTES`), checked field by field, and refused
(never reset) when it is not exactly what :meth:`Cursor.save` writes.  It is written whole or not at all
(``files.write_whole``), and held by one source at a time (:func:`locked`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import math
import os
from collections.abc import Iterator, Mapping
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.events import SOURCE, public_url
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform import documents, files
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import check_id
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.events import (
    EVENT_KEYS,
    THRESHOLD,
    Place,
    Reported,
    Step,
    plain,
)

CURSOR_KIND = "whitesky.capvco.vgpu_events cursor"
CURSOR_VERSION = 3
#: The versions this source reads: version 2 (one pending event, or null) is read as a list of at most one.
CURSOR_READS = (2, 3)
#: The largest cursor file read (a cursor of 100,000 reported orphans is some 20 MB).
CURSOR_MAX_BYTES = 64 * 1024 * 1024


@dataclasses.dataclass
class Cursor:
    """What the source delivered, for one customer of one platform: ``seq``, the number of events delivered (each
    event carries its own), and each location's :class:`Place`.  Written whole, atomically, by :meth:`save`."""

    path: str
    api_url: str
    customer_id: str
    seq: int = 0
    locations: dict[str, Place] = dataclasses.field(default_factory=dict)
    #: the events written down and not yet delivered, in order (the first may be delivered, until the next save): a
    #: restart delivers them again first, with their seqs
    pending: list[dict[str, Any]] = dataclasses.field(default_factory=list)
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

    def prepare(self, location: str, steps: list[Step]) -> list[dict[str, Any]]:
        """The steps' events, each with the next ``seq``, all written down before the first is delivered: what each
        changes recorded, the events kept as ``pending``, the cursor saved once.  The caller delivers them in order,
        calling :meth:`delivered` after each."""
        events = []
        for step in steps:
            seq = self.seq + 1
            events.append(dict(step.event, seq=seq))
            self.record(location, step, seq)
        self.pending.extend(events)
        if events:
            self.save()
        return events

    def delivered(self) -> None:
        """The first pending event is on the queue: struck off, and the cursor saved (a restart delivers the rest)."""
        if self.pending:
            self.pending.pop(0)
            self.save()

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
        """Write the cursor whole (``files.write_whole``: a temporary file beside it, fsynced, renamed over it, then
        the folder fsynced): a crash leaves the old cursor or the new one, never a torn one."""
        files.write_whole(self.path, self.text() + "\n", sync_folder=True)


def _refuse(path: str, why: str) -> InputError:
    return InputError(
        "refusing the cursor file %s: %s. It was left as it is: give the source another cursor path, or remove "
        "the file to start afresh (every orphan past the grace period is then reported again)" % (path, why)
    )


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


def _pending(data: object, seq: int, version: int) -> list[dict[str, Any]]:
    """The cursor's pending events: a list of events numbered in a row up to the cursor's last (version 2: null, or
    one such event), each of a known type, every string in it a plain token (it goes onto the queue as it is)."""
    if version == 2:
        data = [] if data is None else [data]
    if not isinstance(data, list) or len(data) > seq:
        raise ValueError("the cursor's pending events are not a list of at most its seq events")
    return [_event(item, seq - len(data) + 1 + i) for i, item in enumerate(data)]


def _event(data: object, seq: int) -> dict[str, Any]:
    """A pending event numbered ``seq``."""
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
        raise ValueError("the cursor's pending events are not numbered in a row up to the cursor's last event")
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
        raw = files.read_bounded(path, CURSOR_MAX_BYTES)
    except FileNotFoundError:
        return cursor
    except files.TooLarge:
        raise _refuse(path, "it is larger than %d bytes" % CURSOR_MAX_BYTES) from None
    except OSError as exc:
        raise _refuse(path, "it cannot be read (%s)" % (exc.strerror or exc)) from None
    try:
        data = documents.loads(raw, "a cursor")
    except documents.NotJson:
        raise _refuse(path, "it is not JSON (a corrupt file, or not a cursor)") from None
    if not isinstance(data, dict) or data.get("kind") != CURSOR_KIND:
        raise _refuse(path, "it is not a %s cursor (its kind is not %r)" % (SOURCE, CURSOR_KIND))
    if data.get("version") not in CURSOR_READS or isinstance(data.get("version"), bool):
        raise _refuse(
            path,
            "its version is %r; this source reads versions %s"
            % (data.get("version"), " and ".join(str(v) for v in CURSOR_READS)),
        )
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
        cursor.pending = _pending(data["pending"], cursor.seq, data["version"])
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
