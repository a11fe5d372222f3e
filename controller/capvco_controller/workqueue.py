"""A work queue with client-go's guarantees: a key waits at most once however often it is added, a key is never
handed to two workers at once (added while it is worked on, it is handed out again once that work is done), adds
can be delayed, and a failing key backs off exponentially per key."""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(
        self,
        base_delay: float = 1.0,
        max_delay: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.clock = clock
        self._cond = threading.Condition()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._waiting: list[tuple[float, int, K]] = []  # (when, tie-break, key)
        self._seq = 0
        self._failures: dict[K, int] = {}
        self._added_at: dict[K, float] = {}
        self._shutdown = False
        self.adds = 0
        self.retries = 0

    def add(self, key: K) -> None:
        with self._cond:
            self._add(key)

    def _add(self, key: K) -> None:
        if self._shutdown or key in self._dirty:
            return
        self.adds += 1
        self._dirty.add(key)
        self._added_at.setdefault(key, self.clock())
        if key not in self._processing:
            self._queue.append(key)
            self._cond.notify()

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            self._seq += 1
            heapq.heappush(self._waiting, (self.clock() + delay, self._seq, key))
            self._cond.notify()

    def add_rate_limited(self, key: K) -> float:
        """Add ``key`` after its backoff (``base_delay * 2**failures``, at most ``max_delay``); the delay."""
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
            self.retries += 1
        delay = min(self.base_delay * float(2**n), self.max_delay)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """``key`` succeeded: its backoff starts again from the base."""
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    def get(self, timeout: float | None = None) -> tuple[K, float] | None:
        """The next key and how long it waited (seconds), or None at shut down or after ``timeout``."""
        deadline = None if timeout is None else self.clock() + timeout
        with self._cond:
            while True:
                if self._shutdown:  # the keys left are for the next leader: none is started now
                    return None
                self._move_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    waited = self.clock() - self._added_at.pop(key, self.clock())
                    return key, waited
                wait = None
                if self._waiting:
                    wait = max(self._waiting[0][0] - self.clock(), 0.0)
                if deadline is not None:
                    left = deadline - self.clock()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def _move_due(self) -> None:
        now = self.clock()
        while self._waiting and self._waiting[0][0] <= now:
            _, _, key = heapq.heappop(self._waiting)
            self._add(key)

    def done(self, key: K) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def depth(self) -> int:
        with self._cond:
            return len(self._queue)

    def delayed(self) -> int:
        with self._cond:
            return len(self._waiting)

    def busy(self) -> int:
        with self._cond:
            return len(self._processing)

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
