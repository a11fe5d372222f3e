# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One request budget per credential, shared by every transport and thread of a process, that adapts to the
platform's rate limit (plain Python, standard library only).

The platform limits each credential with token buckets, one for mutating calls and one for reads, and answers 429
with ``Retry-After`` when a bucket is empty.  A :class:`Governor` holds one :class:`Lane` per class (``mutating``:
every method but GET; ``read``: GET), and each lane two limits, both AIMD (additive increase, multiplicative
decrease, as TCP's congestion control):

- a concurrency window: the most requests of the class in flight at once;
- a pacing rate: the most requests a second; none at first (not paced until the first 429).

At first the window is large and nothing is paced: a run that is never throttled waits for nothing.  A 429 of a
request sent after the lane's last decrease (one decrease per congestion epoch: the 429s of the requests already on
their way when the first came back say nothing new) halves the window (of what was in flight, as TCP's flight size)
and sets the rate to :data:`BETA` times the lower of the rate and the success rate measured since the last
decrease, over at most :data:`MEASURE_SECONDS` (a burst spent before a first decrease would inflate it); the
requests of the class that follow wait until its ``Retry-After`` has passed.  Each success adds to the rate
:data:`ALPHA` plus :data:`ALPHA_SHARE` of it per second of sending, and one to the window per window's worth of
successes.

Why this shape: against a token bucket the sawtooth it makes costs almost no throughput (the tokens not spent while
the rate is below the limit stay in the bucket, up to its burst, and are spent once it is above) and each cycle
costs about one 429.  The first 429 costs more: every request sent in the round trip before it came back meets the
empty bucket too (about one per thread in flight).  Several processes sharing a credential each run their own
governor and converge to fair shares: the faster one meets the empty bucket more often, a decrease is
multiplicative, and the additive part of the increase favours the slower one.

Requests of a class go in FIFO order: the first in line reserves its start time (pacing, a ``Retry-After``), sleeps
outside the lock, and then goes; a thread never starves behind later ones (the cluster lease's renewals among
them).  Every wait is jittered a little, so that processes sharing a credential do not move in lockstep.

:class:`Lane` is the decision logic alone, stepped with explicit times (``join``, ``poll``, ``done``), so that a
simulation drives it without threads (``tests/unit/platform/test_governor.py``); :class:`Governor` runs it for threads.
:func:`shared` is the registry: one governor per ``(base_url, sha256 of the token)`` in the process (the token
itself is never kept).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.api import MUTATING, READ, request_class

#: The classes of request (``api.request_class``: every method but GET is ``mutating``; GET is ``read``).
CLASSES = (MUTATING, READ)

#: What became of a request, for :meth:`Governor.release`: it passed the limit (any answer but 429 and 5xx),
#: it was limited (429), or it says nothing about the limit (no answer, a 5xx).
OK = "ok"
LIMITED = "limited"
OTHER = "other"

#: The window a lane starts with and never exceeds: more than any pool of the collection's threads, so that a run
#: that is never throttled is never held back by it.
WINDOW_MAX = 256
#: The window the mutating class starts with.  Before its first 429 a lane knows nothing of the limit, and every
#: request in flight when the platform's bucket runs dry is answered 429: the window bounds that first round's 429s
#: (it does not grow before the first 429: a burst's successes say nothing of the limit).  20 keeps
#: the vGPU core's usual fan-out (a VM's reserves in turn, VMs side by side) at full speed with no limit.  Reads start
#: at :data:`WINDOW_MAX`: their buckets are larger, and a listing's pages are asked for together.
MUTATING_WINDOW = 20
#: After the first 429's wait, a lane paces at one request per ``Retry-After`` (the bucket gives at least that) and
#: doubles its rate every :data:`RAMP_SECONDS` until the next 429, which finds the limit (its rate is then measured):
#: a first estimate from the successes before the first 429 counts the burst, and overshoots by far.
RAMP_SECONDS = 0.5
#: The multiplicative decrease of the rate on a 429 (TCP halves, CUBIC keeps 0.7).  A shallower cut saves fewer tokens
#: below the limit (they must fit in the burst to be spent later) and moves each process's rate less (processes
#: sharing a credential end nearer their fair shares); a deeper one costs fewer 429s.  0.6: at 5 a second with a
#: burst of 50 the tokens saved below the limit (about 13) fit in the burst, a sawtooth lasts about 25 s (one 429),
#: and 20 agents sharing the limit still end near their shares (``benchmarks/scale_bench.py``, ``cni_bench.py``;
#: ``tests/unit/platform/test_governor.py`` simulates it).
BETA = 0.6
#: The increase per second of sending: :data:`ALPHA` requests a second plus :data:`ALPHA_SHARE` of the rate.  The
#: additive part makes processes sharing a credential converge to fair shares (the slower one gains relatively more);
#: the proportional part lets a lane regain a large limit (50 a second) before its burst's worth of saved tokens
#: overflows, without making many small processes grow faster together (their sum grows by ``ALPHA_SHARE`` of the
#: limit).  At a limit of 5 a second: 0.15 a second per second, a sawtooth of about 14 s, one 429 in about 70 calls.
ALPHA = 0.05
ALPHA_SHARE = 0.02
#: The lowest rate a lane paces at (requests a second): at most 2 s between two requests of a class.  A process that
#: sends one request at a time (a node agent) measures few successes, and each 429 cuts its rate: a lower floor let
#: an unlucky agent among 20 sharing 5 a second fall to one request in 10 s and finish far behind the others (one
#: attempt in 2 s, with the Retry-After, keeps 20 such agents near their shares at the price of more 429s).
RATE_FLOOR = 0.5
#: The highest rate a lane paces at: as good as unpaced.
RATE_CAP = 1000.0
#: The longest recent window (seconds) the success rate is measured over on a 429.
MEASURE_SECONDS = 2.0
#: The fewest successes a measured rate is believed on (a process that sends a call every few seconds measures
#: nothing in a window of 2 s).
MEASURE_MIN_COUNT = 3
#: The shortest span a success rate is measured over (seconds): two 429s closer than this tell little.
MEASURE_MIN_SPAN = 0.1
#: Pacing intervals are jittered by up to this fraction either way (the mean is the rate's).
PACING_JITTER = 0.1
#: A ``Retry-After`` is waited out plus up to this fraction of it, plus up to :data:`WAIT_JITTER_ABS` seconds.
WAIT_JITTER = 0.03
WAIT_JITTER_ABS = 0.02
#: The wait after a 429 without a (readable) ``Retry-After``, in seconds.
DEFAULT_RETRY_AFTER = 1.0

#: What :meth:`Lane.poll` answers: go now; sleep until a time, then poll again; wait until something changes.
GO = "go"
SLEEP = "sleep"
WAIT = "wait"


class Lane:
    """One class's limits and its queue: the decisions alone, not thread-safe (:class:`Governor` calls it under its
    lock; a simulation steps it with its own clock).

    ``join()`` takes a place in line; ``poll(ticket, now)`` says what that place may do now (:data:`GO`: it is in
    flight from now; :data:`SLEEP` until the time given, then poll again; :data:`WAIT` for a change: another request's
    ``done`` or the head of the line going); ``leave(ticket)`` gives the place up; ``done(sent_at, outcome, now)``
    reports a request's outcome.
    """

    def __init__(self, rng: random.Random | None = None, window: int = WINDOW_MAX) -> None:
        self.rng = rng if rng is not None else random.Random()
        self.window = float(window)
        self._ramped_at: float | None = None  # while ramping up after the first 429: when the rate last doubled
        #: requests a second it paces at; None: not paced
        self.rate: float | None = None
        self.in_flight = 0
        self.blocked_until = -math.inf  # the last Retry-After's end (jittered)
        self.next_slot = -math.inf  # the paced start of the next request
        self.decreased_at = -math.inf
        self.epoch = 0  # decreases so far
        self.limited = 0  # 429s seen
        self.retry_after: float | None = None  # the last Retry-After seen, as the platform said it
        self._recent: deque[float] = deque()  # when the successes of the last MEASURE_SECONDS came back
        self._acked = 0  # successes since the window last grew
        self._grown_at: float | None = None
        self._line: deque[int] = deque()
        self._tickets = 0
        self._held: tuple[float, int] | None = None  # the head's reserved start, and the epoch it was reserved in

    def __repr__(self) -> str:
        rate = "unpaced" if self.rate is None else "%.2f/s" % self.rate
        return "Lane(window=%.1f, rate=%s, in_flight=%d, limited=%d)" % (
            self.window,
            rate,
            self.in_flight,
            self.limited,
        )

    def join(self) -> int:
        self._tickets += 1
        self._line.append(self._tickets)
        return self._tickets

    def leave(self, ticket: int) -> None:
        if self._line and self._line[0] == ticket:
            self._held = None
        with contextlib.suppress(ValueError):
            self._line.remove(ticket)

    def waiting(self) -> int:
        """Requests in line, not yet in flight."""
        return len(self._line)

    def poll(self, ticket: int, now: float) -> tuple[str, float]:
        """``(verdict, at)`` for the place ``ticket`` at ``now``: ``(GO, sent_at)``, ``(SLEEP, until)`` or
        ``(WAIT, now)``.  The head of the line reserves its start (after the last one's paced interval and the last
        ``Retry-After``); once it has slept until then it goes, unless a decrease came meanwhile (it reserves
        again)."""
        if not self._line or self._line[0] != ticket or self.in_flight >= math.floor(self.window):
            return WAIT, now
        held = self._held
        if held is not None and held[1] == self.epoch:
            return GO, self._go(max(now, held[0]))
        start = max(now, self.next_slot, self.blocked_until)
        if start <= now:
            return GO, self._go(now)
        self._held = (start, self.epoch)
        return SLEEP, start

    def _go(self, at: float) -> float:
        self._line.popleft()
        self._held = None
        self.in_flight += 1
        if self.rate is not None:
            self.next_slot = at + self.rng.uniform(1.0 - PACING_JITTER, 1.0 + PACING_JITTER) / self.rate
        return at

    def done(self, sent_at: float, outcome: str, now: float, retry_after: float | None = None) -> None:
        """A request sent at ``sent_at`` (what ``poll`` said with GO) ended at ``now`` with ``outcome``
        (:data:`OK`, :data:`LIMITED` with its ``Retry-After`` seconds, or :data:`OTHER`)."""
        self.in_flight = max(0, self.in_flight - 1)
        if outcome == OK:
            self._succeeded(now)
        elif outcome == LIMITED:
            self.limited += 1
            if sent_at >= self.decreased_at:  # sent before the last decrease: that one already answered it
                self._decrease(now, retry_after)

    def _forget(self, now: float) -> None:
        """Drop the successes older than any window still measured (memory stays bounded in a long run)."""
        kept = now - MEASURE_SECONDS
        while self._recent and self._recent[0] <= kept:
            self._recent.popleft()

    def measured(self, now: float) -> tuple[float, int]:
        """``(successes a second, successes)`` since the last decrease, over at most :data:`MEASURE_SECONDS`: after
        a decrease the bucket was empty, so what passed since is what it gives (before, a burst would count)."""
        self._forget(now)
        horizon = now - MEASURE_SECONDS
        since = max(horizon, self.decreased_at)
        count = 0
        for t in reversed(self._recent):  # in the order they came back
            if t <= since:
                break
            count += 1
        return count / max(now - since, MEASURE_MIN_SPAN), count

    def _decrease(self, now: float, retry_after: float | None) -> None:
        self.window = max(1.0, min(self.window, self.in_flight + 1.0) / 2.0)
        wait = DEFAULT_RETRY_AFTER if retry_after is None else max(0.0, retry_after)
        if self.rate is None:  # the first: one request per Retry-After, doubled each RAMP_SECONDS until the next 429
            self.rate = min(RATE_CAP, max(RATE_FLOOR, 1.0 / max(wait, MEASURE_MIN_SPAN)))
            self._ramped_at = now + wait
        else:
            self._ramped_at = None
            measured, count = self.measured(now)
            if count >= MEASURE_MIN_COUNT:  # below the share the bucket gave since the last decrease
                self.rate = min(RATE_CAP, max(RATE_FLOOR, BETA * min(self.rate, measured)))
            else:  # too few successes to measure a rate by: the rate as it was
                self.rate = max(RATE_FLOOR, BETA * self.rate)
        self.retry_after = retry_after
        wait += self.rng.uniform(0.0, wait * WAIT_JITTER + WAIT_JITTER_ABS)
        self.blocked_until = max(self.blocked_until, now + wait)
        self.decreased_at = now
        self.epoch += 1
        self._acked = 0
        self._grown_at = now

    def _succeeded(self, now: float) -> None:
        self._recent.append(now)
        self._forget(now)
        self._acked += 1
        if self._ramped_at is not None and self.rate is not None and now - self._ramped_at >= RAMP_SECONDS:
            self.rate = min(RATE_CAP, self.rate * 2.0)
            self._ramped_at = now
        if self._acked >= self.window and (self.epoch or self.window >= WINDOW_MAX):  # a start below stays, until a 429
            self.window = min(float(WINDOW_MAX), self.window + 1.0)
            self._acked = 0
        if self.rate is not None:
            since = now - self._grown_at if self._grown_at is not None else 0.0
            growth = ALPHA + ALPHA_SHARE * self.rate  # a second, per second of sending: at most one interval's worth
            self.rate = min(RATE_CAP, self.rate + growth * min(max(0.0, since), 1.0 / self.rate))
        self._grown_at = now


class Permit(NamedTuple):
    """A request let through: its class, when it went (on the governor's clock), and how long it waited."""

    kind: str
    sent_at: float
    waited: float


class Overdue(Exception):
    """A request would have waited on the rate limit past its deadline: not sent."""

    def __init__(self, kind: str, waited: float, start_in: float, retry_after: float | None) -> None:
        self.kind = kind
        self.waited = waited
        self.start_in = start_in
        self.retry_after = retry_after
        asked = " (the platform asked to wait %.0fs)" % retry_after if retry_after is not None else ""
        super().__init__(
            "waited %.1fs on the platform's rate limit for %s calls%s, and would wait %.1fs more"
            % (waited, kind, asked, start_in)
        )


class Governor:
    """The limits of one credential, for every thread: ``acquire`` before each attempt, ``release`` after it.

    :param clock: the time (seconds, monotonic); :param sleep: how a thread waits for its start (both injectable,
        as the transport's are); :param rng: the jitter's source.
    Counters: ``limited`` (429s seen), ``waited`` (seconds spent waiting in ``acquire``, every thread together).
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        rng = rng if rng is not None else random.Random()
        self.lanes = {
            kind: Lane(random.Random(rng.random()), MUTATING_WINDOW if kind == MUTATING else WINDOW_MAX)
            for kind in CLASSES
        }
        self.waited = 0.0
        self._cond = threading.Condition(threading.Lock())

    def __repr__(self) -> str:
        return "Governor(%s)" % ", ".join("%s=%r" % item for item in self.lanes.items())

    @property
    def limited(self) -> int:
        return sum(lane.limited for lane in self.lanes.values())

    def acquire(self, method: str, deadline: float | None = None) -> Permit:
        """Wait for this request's turn (FIFO per class), its window and its paced start; raise :class:`Overdue`
        instead when it would start after ``deadline`` (on the clock)."""
        kind = request_class(method)
        lane = self.lanes[kind]
        began = self._clock()
        with self._cond:
            ticket = lane.join()
            try:
                sent_at = self._turn(lane, ticket, kind, began, deadline)
            except BaseException:
                lane.leave(ticket)
                self._cond.notify_all()
                raise
            waited = max(0.0, self._clock() - began)
            self.waited += waited
            if lane.waiting():
                self._cond.notify_all()  # the next in line is the head now
        return Permit(kind, sent_at, waited)

    def _turn(self, lane: Lane, ticket: int, kind: str, began: float, deadline: float | None) -> float:
        """Under the lock: poll until GO; sleep (outside the lock) or wait on the condition meanwhile."""
        while True:
            now = self._clock()
            verdict, at = lane.poll(ticket, now)
            if verdict == GO:
                return at
            if deadline is not None and at >= deadline:
                raise Overdue(kind, now - began, max(0.0, at - now), lane.retry_after)
            if verdict == SLEEP:
                self._cond.release()
                try:
                    self._sleep(at - now)
                finally:
                    self._cond.acquire()
            else:
                self._cond.wait(None if deadline is None else deadline - now)

    def release(self, permit: Permit, outcome: str, retry_after: float | None = None) -> None:
        """Report how the request ``permit`` let through ended (:data:`OK`, :data:`LIMITED` with its
        ``Retry-After`` seconds, :data:`OTHER`)."""
        with self._cond:
            self.lanes[permit.kind].done(permit.sent_at, outcome, self._clock(), retry_after)
            self._cond.notify_all()


_REGISTRY: dict[tuple[str, str], Governor] = {}
_REGISTRY_LOCK = threading.Lock()


def credential_key(base_url: str, token: str) -> tuple[str, str]:
    """The registry's key of a credential: the base URL and a SHA-256 of the token (never the token)."""
    return base_url, hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def shared(base_url: str, token: str) -> Governor:
    """The process's one governor of this credential (on the real clock), made on first use."""
    key = credential_key(base_url, token)
    with _REGISTRY_LOCK:
        governor = _REGISTRY.get(key)
        if governor is None:
            governor = _REGISTRY[key] = Governor()
        return governor
