# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The retry loop: the one place that retries a platform call (plain Python, no Ansible).

It sends through a ``send`` function it is given (``transport.Transport.send``: one HTTP attempt), so it knows
attempts, statuses and deadlines, not HTTP.  Every attempt goes through the credential's :class:`governor.Governor`
(one per credential in the process, shared by every transport and thread): it waits there for its turn, its window
and its paced start, and reports how it ended; the governor adapts to the platform's rate limit (429).  A 429 is not
an attempt that counts against ``max_attempts`` (nothing was processed); the call's deadline still bounds it, and
the time waiting in the governor.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from ansible_collections.whitesky.capvco.plugins.module_utils.platform import governor as rate
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.deadline import Deadlines
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.headers import retry_after
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub

if TYPE_CHECKING:  # the transport imports httpx (and keeps its command line client out): only its types here
    import httpx

#: Statuses retried: 429 (not processed; paced by the governor, not counted as an attempt) for every method; 502,
#: 503 and 504 for idempotent ones.
RETRY_STATUSES = frozenset((429, 502, 503, 504))
#: Methods retried on those statuses and on a lost answer.  A POST is not: a POST that
#: reserves is made idempotent by its caller (look the name up, then decide).
IDEMPOTENT_METHODS = frozenset(("GET", "HEAD", "PUT", "DELETE"))
#: The most of a platform's error text that an error carries.
MESSAGE_LIMIT = 500


class Unanswered(NamedTuple):
    """An attempt that got no answer (a connection refused or lost, a timeout): its error, and whether the request
    was surely never sent (no connection was made), so that even a request that is not idempotent may go again."""

    error: ApiError
    unsent: bool


#: One attempt: ``send(method, path, params, body, deadline)`` -> the answer, or :class:`Unanswered`; it raises a
#: final failure (TLS) itself.
Send = Callable[[str, str, dict[str, Any], Any, float], "httpx.Response | Unanswered"]


def _gave_up(last: ApiError, attempts: int, spent: float, why: str) -> ApiError:
    return ApiError(
        last.method,
        last.path,
        last.status,
        "gave up after %d attempt(s) in %.1fs (%s); last: %s" % (attempts, spent, why, last.message),
    )


def _decode(method: str, path: str, resp: httpx.Response, object_hook: Callable[[dict], Any] | None = None) -> Any:
    if not resp.content:
        return None
    try:
        return json.loads(resp.content, object_hook=object_hook)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to parse
        raise ApiError(method, path, resp.status_code, "response is not JSON: %s" % scrub(resp.text, 200)) from None


def _message(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except (ValueError, RecursionError):
        return scrub(resp.text.strip(), MESSAGE_LIMIT) or resp.reason_phrase
    if isinstance(body, dict):
        return scrub(body.get("message") or body.get("error") or body, MESSAGE_LIMIT)
    return scrub(body, MESSAGE_LIMIT)


class Retry:
    """Calls retried within their deadline, each attempt through ``send`` and the ``governor``.

    :param max_attempts: the most requests one call makes that the platform processed or may have (a 429 is not).
    :param backoff, max_backoff: the full-jitter exponential backoff's first step and its cap, in seconds.

    Counters a caller can read: ``retries`` (attempts after the first), ``rate_limited`` (429s its calls met) and
    ``rate_waited`` (seconds its calls waited in the governor, all threads together).
    """

    def __init__(
        self,
        send: Send,
        governor: rate.Governor,
        deadlines: Deadlines,
        max_attempts: int = 6,
        backoff: float = 0.5,
        max_backoff: float = 20.0,
    ) -> None:
        self.send = send
        self.governor = governor
        self.deadlines = deadlines
        self.max_attempts = max(1, int(max_attempts))
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self._counting = threading.Lock()
        self.retries = 0
        self.rate_limited = 0
        self.rate_waited = 0.0
        #: where the credential comes from, when not from the module's options (a mounted Secret's file): a 401 or
        #: 403 then names it (``ApiError.refused``)
        self.credential_source: str | None = None
        #: asked once when the platform refuses the credential (401): True when a new one was found (the request is
        #: then sent again with it: a refused request was not processed)
        self.renew: Callable[[], bool] | None = None

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Full-jitter exponential backoff; a ``Retry-After`` is waited out, plus a little jitter."""
        jitter = random.uniform(0, min(self.max_backoff, self.backoff * (2 ** (attempt - 1))))
        if retry_after is not None:
            return retry_after + jitter * 0.1
        return jitter

    def request(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None = None,
        body: Any = None,
        retry: bool | None = None,
        retry_if: Callable[[ApiError], bool] | None = None,
        resolve: Callable[[ApiError], Any] | None = None,
        object_hook: Callable[[dict], Any] | None = None,
    ) -> Any:
        """:meth:`_request`; a refusal of the credential names where it comes from (``credential_source``)."""
        try:
            try:
                return self._request(method, path, params, body, retry, retry_if, resolve, object_hook)
            except ApiError as exc:
                if exc.status != 401 or self.renew is None or not self.renew():
                    raise
                return self._request(method, path, params, body, retry, retry_if, resolve, object_hook)
        except ApiError as exc:
            if self.credential_source is None or exc.status not in (401, 403):
                raise
            raise exc.refused(self.credential_source) from None

    def _request(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None = None,
        body: Any = None,
        retry: bool | None = None,
        retry_if: Callable[[ApiError], bool] | None = None,
        resolve: Callable[[ApiError], Any] | None = None,
        object_hook: Callable[[dict], Any] | None = None,
    ) -> Any:
        """One platform call, retried here and nowhere else; returns the decoded JSON body (or None), each object
        of it through ``object_hook`` when one is given (``json.loads``'s: what a large answer keeps of itself).

        Retried, while attempts and the call's deadline last: a request that was never sent (no connection), 429
        (not processed: the governor paces what follows, and it is no attempt against ``max_attempts``), and for
        idempotent methods (or ``retry=True``) 502, 503, 504 and a lost answer.  Each attempt first waits its turn in
        the governor, within the call's deadline.  A TLS failure is final.  The call's deadline is ``timeout +
        retry_budget`` after it started, or the deadline of the operation it runs in (``Deadlines.operation``) when
        that is earlier; a call whose operation has no time left is not sent.  Its hooks run under its deadline.
        The caller adds what is its own:

        - ``retry_if(ApiError) -> bool``: more errors that mean "refused, nothing changed" (a 409
          while the VM is locked); those are waited out until the deadline, and do not count
          against ``max_attempts``;
        - ``resolve(ApiError)``: for a request that is not idempotent and whose outcome is unknown
          (a lost answer, 502, 503, 504), whether it happened after all: what to return if it did,
          None if it did not (then it is sent again).
        """
        retry = method in IDEMPOTENT_METHODS if retry is None else retry
        query = {k: v for k, v in (params or {}).items() if v is not None}
        started = self.deadlines.clock()
        deadline = self.deadlines.of_call(started)
        if deadline <= started:
            raise ApiError(method, path, None, "not sent: no time left within the operation's deadline")
        attempt = waits = free = 0
        last: ApiError | None = None  # the last attempt's error
        with self.deadlines.within(deadline):
            while True:
                permit = self._admit(method, path, attempt, last, started, deadline)
                attempt += 1
                resp = self._attempt(permit, method, path, query, body, deadline)
                if isinstance(resp, Unanswered):
                    found, last = self._after_no_answer(resp, retry, resolve)
                    wait_hint, waiting = None, False
                else:
                    if resp.status_code < 400:
                        return _decode(method, path, resp, object_hook)
                    if resp.status_code == 429:  # not processed: the governor waits it out before the next attempt
                        last = ApiError(method, path, 429, _message(resp))
                        free += 1
                        self._count(retries=1)
                        continue
                    found, last, wait_hint, waiting = self._after_status(method, path, resp, retry, retry_if, resolve)
                if found is not None:
                    return found
                waits += waiting
                self._back_off(last, attempt, waits, free, wait_hint, started, deadline)

    def _count(self, retries: int = 0, limited: int = 0, waited: float = 0.0) -> None:
        with self._counting:
            self.retries += retries
            self.rate_limited += limited
            self.rate_waited += waited

    def _admit(
        self, method: str, path: str, attempt: int, last: ApiError | None, started: float, deadline: float
    ) -> rate.Permit:
        """Wait in the governor for this attempt's turn; give up when the deadline would pass first (with the last
        attempt's error, or "not sent" before the first)."""
        try:
            permit = self.governor.acquire(method, deadline)
        except rate.Overdue as exc:
            self._count(waited=exc.waited)
            asked = "the platform asked to wait %.0fs" % exc.retry_after if exc.retry_after is not None else "paced"
            why = (
                "waited %.1fs on the platform's rate limit (%s, HTTP 429) and would wait %.1fs more, past the "
                "call's deadline of %.0fs" % (exc.waited, asked, exc.start_in, deadline - started)
            )
            if last is not None:
                raise _gave_up(last, attempt, self.deadlines.clock() - started, why) from None
            raise ApiError(method, path, 429, "not sent: %s" % why) from None
        self._count(waited=permit.waited)
        return permit

    def _attempt(
        self, permit: rate.Permit, method: str, path: str, query: dict[str, Any], body: Any, deadline: float
    ) -> httpx.Response | Unanswered:
        """Send one attempt and report how it ended to the governor: the answer, or that there was none."""
        try:
            resp = self.send(method, path, query, body, deadline)
        except BaseException:
            self.governor.release(permit, rate.OTHER)
            raise
        if isinstance(resp, Unanswered):
            self.governor.release(permit, rate.OTHER)
        elif resp.status_code == 429:
            self._count(limited=1)
            self.governor.release(permit, rate.LIMITED, retry_after(resp.headers.get("Retry-After")))
        else:  # any answer but a 5xx passed the limit (an error of the call's own is still an answer)
            self.governor.release(permit, rate.OK if resp.status_code < 500 else rate.OTHER)
        return resp

    @staticmethod
    def _after_no_answer(
        lost: Unanswered, retry: bool, resolve: Callable[[ApiError], Any] | None
    ) -> tuple[Any, ApiError]:
        """``(found, last)`` after no answer: a request never sent, or one that may be repeated, is tried again; a
        mutating one that may have happened is resolved (or its error raised)."""
        if retry or lost.unsent:
            return None, lost.error
        if resolve is None:
            raise lost.error from None
        return resolve(lost.error), lost.error

    @staticmethod
    def _after_status(
        method: str,
        path: str,
        resp: httpx.Response,
        retry: bool,
        retry_if: Callable[[ApiError], bool] | None,
        resolve: Callable[[ApiError], Any] | None,
    ) -> tuple[Any, ApiError, float | None, bool]:
        """``(found, last, wait_hint, waiting)`` after an error status but 429 (the governor's): when the request may
        be repeated, 502/503/504 are tried again; otherwise those are resolved; a refusal ``retry_if`` accepts is
        waited out; anything else is raised."""
        last = ApiError(method, path, resp.status_code, _message(resp))
        wait_hint = retry_after(resp.headers.get("Retry-After")) if resp.status_code == 503 else None
        if resp.status_code in RETRY_STATUSES and retry:
            return None, last, wait_hint, False  # safe to repeat
        if resp.status_code in RETRY_STATUSES and resolve is not None:
            return resolve(last), last, wait_hint, False  # processed or not? the caller can tell
        if retry_if is not None and retry_if(last):
            return None, last, wait_hint, True  # refused, nothing changed: wait it out until the deadline
        raise last

    def _back_off(
        self,
        last: ApiError,
        attempt: int,
        waits: int,
        free: int,
        wait_hint: float | None,
        started: float,
        deadline: float,
    ) -> None:
        """Sleep before the next attempt, or give up: no attempts left, or no time left before the deadline.  Of the
        ``attempt`` so far, ``waits`` (refusals waited out) and ``free`` (429s) do not count against
        ``max_attempts``."""
        clock = self.deadlines.clock
        counted = attempt - free
        delay = self.delay(min(counted, 4) if waits else counted, wait_hint)  # a lock is polled at <= 4 s
        spent = clock() - started
        if counted - waits >= self.max_attempts:
            raise _gave_up(last, attempt, spent, "no attempts left")
        if clock() + delay >= deadline:
            why = "the platform asked to wait %.0fs" % wait_hint if wait_hint is not None else "no time left"
            raise _gave_up(last, attempt, spent, "%s within the call's deadline of %.0fs" % (why, deadline - started))
        self._count(retries=1)
        self.deadlines.sleep(delay)
