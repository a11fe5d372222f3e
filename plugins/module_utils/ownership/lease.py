# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run at a time per cluster: a lease held in a note on the cluster's cloudspace (plain Python, no Ansible).

The platform has no lock, but it keeps notes on a cloudspace, each with the platform's own creation time and id.
A run that is about to change a cluster writes a lease note (:func:`lease_note`: the cluster, a random run
id, the lease's time to live), lists the notes, and goes on only while its note is the earliest live lease note of
the cluster (creation time, then id: every run sees the same order).  Until then it waits, polling, for at most
``wait`` seconds; then it takes its note back and fails, naming the run that holds the cluster.

A holder renews its note (an update, which moves the note's ``last_update_time``) every quarter of its time to
live, from a thread (and while it waits for its turn, so that no waiter behind it takes its note for a dead
one); it deletes its note when it is done.  A run killed while holding the lease leaves its note: a waiter counts a
note as expired once it has seen the same ``last_update_time`` for longer than the note's time to live on its own
clock (no two clocks are compared), deletes it, and goes on.  A note's time to live is never believed beyond the
collection's own (:data:`TTL`): a note that claims a day is a note that claims :data:`TTL`.

**Fencing.**  A holder that was stopped (a paused process or VM, a suspended laptop, a hung call) may find on its
return that its lease was taken over.  So a holder writes nothing once it cannot prove it still holds the lease:
before each mutating call of its client (``client.call``), :meth:`Lease.fence` checks that the last write of its
note that succeeded was sent less than :data:`FENCE` of the time to live ago, on its own clock (``CLOCK_BOOTTIME``
where the system has it, so that a suspend counts); a renewal that finds the note gone renews nothing more, so such
a holder is fenced soon after.  A holder that cannot prove its lease raises :class:`LeaseLost`: the run stops,
says what it did, and fails.  A waiter takes over only after the full time to live, so the two never write at
once; the window left is a call already sent when the holder stopped (docs/known-limitations.md).

Reads made before a run held the lease may be stale: whoever takes it reads again before it plans what it
writes (``converge``, the one runner of a converge, takes the lease for every core that needs it).  A run that holds
the lease already (the cluster core calling the machines and GPU cores with the same client) does not take it
again.

A teardown deletes the cloudspace, and the notes with it: a waiter that finds the cloudspace gone raises
:class:`CloudspaceGone`, and its caller starts again from its reads.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, NamedTuple

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes as ownership_notes
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.errors import (
    CloudspaceGone,
    ClusterBusy,
    LeaseLost,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    Resolved,
    WhiteskyError,
    gone_is_done,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

#: Seconds a lease lives without renewal (a killed holder's lease is taken over after this, plus a poll); the
#: longest a lease note is believed, whatever it says.
TTL = 30
#: The part of the time to live after the last renewal within which a holder still writes (the rest is the margin
#: for a renewal that is slow, and for the two clocks' rates).
FENCE = 2.0 / 3.0
#: Seconds a run waits for another run's lease before it fails.
WAIT = 900.0
#: Seconds between two reads of the notes while waiting.
POLL = 0.5


def _clock() -> float:
    """Seconds on a clock that counts a suspend (``CLOCK_BOOTTIME``), else the monotonic clock."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(boottime) if boottime is not None else time.monotonic()


class Lease:
    """The lease of ``cluster`` on cloudspace ``cloudspace_id``, taken by :meth:`acquire`, let go by
    :meth:`release`.  ``waited`` is the seconds :meth:`acquire` waited, ``holders`` the runs it waited for."""

    def __init__(
        self,
        client: WhiteskyClient,
        cloudspace_id: str,
        cluster: str,
        *,
        wait: float = WAIT,
        ttl: int = TTL,
        clock: Callable[[], float] = _clock,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.cloudspace_id = cloudspace_id
        self.cluster = cluster
        self.run = secrets.token_hex(8)
        self.ttl = int(ttl)
        self.wait = wait
        self.title, self.content = lease_note(cluster, self.run, self.ttl)
        self.note_id: str | None = None
        self.waited = 0.0
        self.holders: list[str] = []
        # a renewal found the note gone (taken over, or the cloudspace went): no more renewals.  Read by fence(),
        # whose refusal then says that another run took the cluster over
        self.lost = False
        self.proven: float | None = None  # when the last write of the note that succeeded was sent (this clock)
        self.fenced = False  # fence() refused a write of this run
        self.silent: dict[str, float] = {}  # run -> seconds its note has been seen unchanged (while waiting)
        self._clock = clock
        self._sleep = sleep
        self._seen: dict[str, tuple[object, float]] = {}  # note id -> (its last_update_time, when first seen so)
        self._paced = time.monotonic()  # when the last renewal was sent, on the clock that paces the renewals
        self._stop = threading.Event()
        self._last_notes: list[dict] = []
        self._renewer: threading.Thread | None = None

    def acquire(self) -> Lease:
        """Write the note, then wait until it is the earliest live lease of the cluster (or fail)."""
        started = self._clock()
        try:
            self._write()
            self.proven = started
        except ApiError as exc:
            if exc.status == 404:
                raise CloudspaceGone(
                    "cloudspace %s of cluster %r is gone" % (self.cloudspace_id, self.cluster), {}
                ) from None
            raise
        try:
            while True:
                ahead = self._ahead()
                if not ahead:
                    break
                for run in ahead:
                    if run not in self.holders:
                        self.holders.append(run)
                if self._clock() - started >= self.wait:
                    raise ClusterBusy(
                        "cluster %r is held by another run (%s) and it did not let go within %.0fs; nothing was "
                        "changed by this run" % (self.cluster, self._holders(ahead), self.wait),
                        {"lease_holders": ahead},
                    )
                self._sleep(POLL)
                if self._clock() - float(self.proven or started) >= self.ttl / 4.0:
                    self._renew_once()
        except BaseException:
            self._take_back()
            raise
        self.waited = round(self._clock() - started, 3)
        self._renewer = threading.Thread(target=self._renew, name="capvco-lease", daemon=True)
        self._renewer.start()
        return self

    def _holders(self, runs: list[str]) -> str:
        """The runs ahead, each with how long its note has been silent (unchanged) on this run's clock."""
        return ", ".join("run %s, its note unchanged for %.0fs" % (r, self.silent.get(r, 0.0)) for r in runs)

    def fence(self, operation: str = "") -> None:
        """Raise :class:`LeaseLost` unless this run can prove it still holds the lease: the last write of its note
        that succeeded was sent less than :data:`FENCE` of the time to live ago.  (A renewal that finds the note
        gone renews nothing more, so a run whose note was taken over is fenced at the latest then.)"""
        age = self._clock() - self.proven if self.proven is not None else float("inf")
        if age >= self.ttl * FENCE:
            self.fenced = True
            raise LeaseLost(
                "this run no longer holds the lease of cluster %r (run %s): its last renewal was %.0fs ago, past "
                "%.0fs of its %ds time to live (was the run stopped?%s); it stopped before %s and wrote nothing more. "
                "Run it again: it reads the cluster anew."
                % (
                    self.cluster,
                    self.run,
                    age,
                    self.ttl * FENCE,
                    self.ttl,
                    " its note is gone: another run took the cluster over" if self.lost else "",
                    operation or "its next change",
                ),
                {"lease_lost": True},
            )

    def _say_member(self) -> None:
        """Write the cluster's member note on the cloudspace unless a creator or member note names it already (the
        notes were just read): once per cluster and cloudspace.  The renewing thread writes it, beside the run's
        work (it only tells the inventory whose markers to read); a failure is left to the next run that holds the
        lease."""
        if self.cluster in ownership_notes.clusters_in(self._last_notes):
            return
        title, content = ownership_notes.member_note(self.cluster)

        def resolve(_exc: Exception) -> Resolved | None:  # the answer was lost: is the note there after all?
            return Resolved(True) if self.cluster in ownership_notes.clusters_in(self._notes()) else None

        with suppress(WhiteskyError):
            self.client.create_cloudspace_note(self.cloudspace_id, title, content, resolve=resolve)

    def release(self) -> None:
        """Stop renewing and delete the note (already gone with its cloudspace counts as done)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        self._take_back()

    def _write(self) -> None:
        def resolve(_exc: Exception) -> Resolved | None:  # the answer was lost: is the note there after all?
            mine = self._mine(self._notes())
            return Resolved(mine) if mine is not None else None

        self.client.create_cloudspace_note(self.cloudspace_id, self.title, self.content, resolve=resolve)

    def _notes(self) -> list[dict]:
        try:
            return [n for n in self.client.cloudspace_notes(self.cloudspace_id) if isinstance(n, dict)]
        except ApiError as exc:
            if exc.status == 404:
                raise CloudspaceGone(
                    "cloudspace %s of cluster %r was deleted while this run waited for its lease"
                    % (self.cloudspace_id, self.cluster),
                    {},
                ) from None
            raise

    def _mine(self, notes: list[dict]) -> dict | None:
        for note in notes:
            if note.get("title") == self.title and note.get("content") == self.content:
                return note
        return None

    def _ahead(self) -> list[str]:
        """The runs whose live lease notes come before this run's (expired ones are deleted on the way)."""
        notes = self._last_notes = self._notes()
        mine = self._mine(notes)
        if mine is None:
            raise LeaseLost(
                "this run no longer holds the lease of cluster %r (run %s): its lease note on cloudspace %s is gone "
                "while it waited for the cluster (was the run stopped past its %ds time to live? another run then "
                "deletes the note and may take the cluster over); it changed nothing. Run it again: it reads the "
                "cluster anew." % (self.cluster, self.run, self.cloudspace_id, self.ttl),
                {"lease_lost": True},
            )
        self.note_id = str(mine.get("id"))
        leases = []
        for note in notes:
            held = parse_lease(note.get("title"), note.get("content"))
            if held is not None and held.cluster == self.cluster and note is not mine:
                leases.append((note, held))
        key = _order(mine)
        ahead = []
        for note, held in leases:
            if self._expired(note, held):
                gone_is_done(self.client.delete_cloudspace_note, self.cloudspace_id, str(note.get("id")))
            elif _order(note) < key:
                ahead.append(held.run)
        return ahead

    def _expired(self, note: dict, held: Held) -> bool:
        """Whether ``note`` kept one ``last_update_time`` for longer than its time to live (never more than the
        collection's own), on this run's clock."""
        note_id, stamp, now = str(note.get("id")), note.get("last_update_time"), self._clock()
        seen = self._seen.get(note_id)
        if seen is None or seen[0] != stamp:
            self._seen[note_id] = seen = (stamp, now)
        self.silent[held.run] = now - seen[1]
        return now - seen[1] > min(held.ttl, max(self.ttl, TTL))

    def _renew(self) -> None:
        """Renew every quarter of the time to live, counted from the last renewal's send (not from its answer: on
        a platform that takes seconds per call, the proof a holder has is as old as the send, plus the call)."""
        self._say_member()
        while not self._stop.wait(self._until_next()):
            if not self._renew_once():
                return

    def _until_next(self) -> float:
        """Seconds to the next renewal: a quarter of the time to live after the last one was sent (at least a
        sixteenth: a failed renewal is not sent again at once), on the monotonic clock that paces the thread."""
        quarter = self.ttl / 4.0
        return min(quarter, max(self.ttl / 16.0, quarter - (time.monotonic() - self._paced)))

    def _renew_once(self) -> bool:
        """Renew the note once; False when it is gone (taken over: this run stalled past its time to live, or the
        cloudspace went), which fences this run.  A renewal that fails otherwise is tried again at the next."""
        sent, self._paced = self._clock(), time.monotonic()
        try:
            self.client.update_cloudspace_note(self.cloudspace_id, str(self.note_id), self.title, self.content)
        except ApiError as exc:
            if exc.status == 404:
                self.lost = True
                return False
            return True
        except WhiteskyError:
            return True
        self.proven = sent
        return True

    def _take_back(self) -> None:
        """Delete this run's note; one that cannot be deleted now expires after its time to live."""
        try:
            if self.note_id is None:
                mine = self._mine(self._notes())
                self.note_id = str(mine.get("id")) if mine is not None else None
            if self.note_id is not None:
                gone_is_done(self.client.delete_cloudspace_note, self.cloudspace_id, self.note_id)
        except WhiteskyError:
            pass  # it expires after its time to live


class Held(NamedTuple):
    """What a lease note says: the cluster, the run that holds it, its time to live in seconds."""

    cluster: str
    run: str
    ttl: int


_CLUSTER = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_LEASE = re.compile(r"lease cluster=(%s) run=([0-9a-f]{16}) ttl=([0-9]{1,5})" % _CLUSTER)


def lease_note(cluster: str, run: str, ttl: int) -> tuple[str, str]:
    """``(title, content)`` of the lease note of ``run`` on ``cluster`` (the title is the creator note's)."""
    naming.cluster_part(cluster)
    return ownership_notes.NOTE_TITLE, "lease cluster=%s run=%s ttl=%d" % (cluster, run, ttl)


def parse_lease(title: object, content: object) -> Held | None:
    """The lease a note records, or None (the whole note must match)."""
    if title != ownership_notes.NOTE_TITLE or not isinstance(content, str):
        return None
    found = _LEASE.fullmatch(content)
    if found is None:
        return None
    return Held(found.group(1), found.group(2), int(found.group(3)))


def _order(note: dict) -> tuple[float, str]:
    stamp = note.get("creation_time")
    return (float(stamp) if isinstance(stamp, (int, float)) else float("inf"), str(note.get("id")))


def waited_message(lease: Lease) -> str:
    """What a run says when it waited for other runs of the cluster before it went on."""
    return "cluster %r was held by another run (run %s): this run waited %.1fs for it, then read the cluster again" % (
        lease.cluster,
        ", ".join(lease.holders),
        lease.waited,
    )


def _held(client: WhiteskyClient) -> dict[tuple[str, str], Lease]:
    """The leases this run holds (a run's leases live as long as its client)."""
    held: dict[tuple[str, str], Lease] = client.leases
    return held


def fence(client: WhiteskyClient, operation: str) -> None:
    """Fence a write that the client does not fence by itself (a note: the lease's own writes are notes) with every
    lease this run holds (:meth:`Lease.fence`): the cluster's pools note is written only by a run that can prove it
    holds the cluster."""
    for lease in list(_held(client).values()):
        lease.fence(operation)


@contextmanager
def held(client: WhiteskyClient, cloudspace_id: str, cluster: str, wait: float = WAIT) -> Iterator[Lease | None]:
    """Hold the cluster's lease on the cloudspace for the ``with`` block; yields the :class:`Lease`, or None when
    this run holds it already (its outer holder lets go)."""
    leases = _held(client)
    key = (cloudspace_id, cluster)
    if key in leases:
        yield None
        return
    lease = Lease(client, cloudspace_id, cluster, wait=wait).acquire()
    leases[key] = lease
    try:
        yield lease
    finally:
        del leases[key]
        lease.release()
    if lease.fenced:  # a run fenced on the way fails, even where the refusal was taken as an answer
        lease.fence()
