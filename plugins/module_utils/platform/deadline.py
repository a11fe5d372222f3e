# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deadlines that nest (plain Python, no Ansible).

A call (a request with its retries, or a wait) ends by its own deadline, ``timeout + retry_budget`` after it
started, or by the deadline of the operation it runs in, whichever comes first.  An operation sets one with
``with deadlines.operation():`` (per thread); a call sets its own for what runs inside it (a request's hooks, a
wait's condition), so that what nests inherits it rather than starting afresh.  Other threads are not affected: a
job run in a pool sets its own (``paging`` hands a listing's deadline to the threads that fetch its pages).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError

#: Seconds one call may spend on retries beyond its own ``timeout``: its deadline is
#: ``timeout + RETRY_BUDGET`` after it started (a module's ``timeout`` option sets the first part).
RETRY_BUDGET = 30.0


class Deadlines:
    """The deadlines of one transport's calls, on its ``clock``; it waits with ``sleep``.

    :param timeout: seconds for one request; :param retry_budget: the seconds beyond it that one call, with its
        retries, may take.  Both may be changed later; a call reads them when it starts.
    """

    def __init__(
        self,
        timeout: float,
        retry_budget: float = RETRY_BUDGET,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.timeout = float(timeout)
        self.retry_budget = max(0.0, float(retry_budget))
        self.clock = clock
        self.sleep = sleep
        self._local = threading.local()  # this thread's operation deadline

    def inherited(self) -> float | None:
        """The deadline (on ``clock``) of the operation this thread is in, or None outside one."""
        return getattr(self._local, "deadline", None)

    @contextmanager
    def within(self, deadline: float | None) -> Iterator[float | None]:
        """Run the block in this thread under ``deadline`` (or the inherited one, when it is earlier); yields the
        deadline the block runs under."""
        outer = self.inherited()
        if deadline is None or (outer is not None and outer <= deadline):
            yield outer
            return
        self._local.deadline = deadline
        try:
            yield deadline
        finally:
            self._local.deadline = outer

    @contextmanager
    def operation(self, seconds: float | None = None) -> Iterator[float | None]:
        """One operation's deadline, ``seconds`` (default ``timeout + retry_budget``) from now (a context manager).

        Every request and wait in the block, in this thread, ends by then (or by its own deadline, if that is
        earlier); one nested in another operation's keeps the earlier of the two.  Yields the deadline, on the
        ``clock``.
        """
        seconds = self.timeout + self.retry_budget if seconds is None else float(seconds)
        with self.within(self.clock() + seconds) as deadline:
            yield deadline

    def of_call(self, started: float) -> float:
        """A call's deadline: ``timeout + retry_budget`` after it started, or the inherited one when earlier."""
        own = started + self.timeout + self.retry_budget
        inherited = self.inherited()
        return own if inherited is None else min(own, inherited)

    def wait_until(self, condition: Callable[[], object], what: str, interval: float = 0.25) -> None:
        """Poll ``condition()`` until it is true, within one call's deadline (``timeout + retry_budget``), or the
        deadline of the operation it runs in when that is earlier; the condition's requests inherit it.

        For an outcome the platform has not settled yet (a VM still locked by a request whose answer was
        lost); raises :class:`WhiteskyError` naming ``what`` when the deadline passes first.
        """
        started = self.clock()
        deadline = self.of_call(started)
        with self.within(deadline):
            while not condition():
                if self.clock() + interval >= deadline:
                    raise WhiteskyError(
                        "gave up waiting for %s after %.0fs (the call's deadline)" % (what, deadline - started)
                    )
                self.sleep(interval)
