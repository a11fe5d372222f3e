# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The transport to the whitesky.cloud API: requests, retries within one deadline, Retry-After, TLS, paging.

Pure Python on httpx, with no Ansible import.  It knows URLs and HTTP, not the platform's operations: those are
``client.WhiteskyClient``'s, built on :class:`Transport`.

Every attempt goes through the credential's :class:`governor.Governor` (one per credential in the process, shared by
every transport and thread): it waits there for its turn, its window and its paced start, and reports how it ended;
the governor adapts to the platform's rate limit (429).  A 429 is not an attempt that counts against
``max_attempts`` (nothing was processed); the call's deadline still bounds it, and the time waiting in the governor.

Deadlines nest: a request or a wait ends by its own deadline (``timeout + retry_budget`` after it started) or by
the deadline of the operation it runs in, whichever comes first.  An operation sets one with
``with transport.deadline():`` (per thread); a request and a wait set theirs for what runs inside them (a
``retry_if`` or ``resolve`` hook, a wait's condition), so what they nest inherits it rather than starting afresh.
"""

from __future__ import annotations

import base64
import datetime
import email.utils
import ipaddress
import json
import math
import random
import re
import ssl
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from ansible_collections.whitesky.capvco.plugins.module_utils.platform import governor as rate
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    BadAnswer,
    InputError,
    WhiteskyError,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub

# httpx imports its command line client (click, pygments, rich: some 70 ms, paid by every module run) whenever
# those are installed; nothing here runs it, and httpx falls back to a stub when it cannot be imported.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: "cannot be imported"
HTTPX_IMPORT_ERROR: str | None = None
try:
    import httpx
except ImportError:  # pragma: no cover - reported by the module base
    httpx = None  # type: ignore[assignment]
    HTTPX_IMPORT_ERROR = traceback.format_exc()

#: Statuses retried: 429 (not processed; paced by the governor, not counted as an attempt) for every method; 502,
#: 503 and 504 for idempotent ones.
RETRY_STATUSES = frozenset((429, 502, 503, 504))
#: Methods retried on those statuses and on a lost answer.  A POST is not: a POST that
#: reserves is made idempotent by its caller (look the name up, then decide).
IDEMPOTENT_METHODS = frozenset(("GET", "HEAD", "PUT", "DELETE"))
#: Seconds one call may spend on retries beyond its own ``timeout``: its deadline is
#: ``timeout + RETRY_BUDGET`` after it started (a module's ``timeout`` option sets the first part).
RETRY_BUDGET = 30.0
#: The largest page the client asks for; the emulator serves up to this.
PAGE_LIMIT = 500
#: The most pages of one listing planned from its first page's count (a count beyond is fetched page by page, and
#: a listing ends at its first empty page whatever its count said).
MAX_PLANNED_PAGES = 10000
#: The longest wait a ``Retry-After`` may ask for, in seconds (a call's deadline ends it sooner anyway).
RETRY_AFTER_MAX = 3600.0
#: The most of a platform's error text that an error carries.
MESSAGE_LIMIT = 500
_DELAY_SECONDS = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,9})?")


def jwt_expiry(token: str) -> int | float | None:
    """Return the JWT's ``exp`` (epoch seconds), or None for a token that is not a JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(payload.encode("ascii")))
    except (ValueError, UnicodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return exp if isinstance(exp, (int, float)) else None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _tls_failure(exc: BaseException) -> str | None:
    """The TLS reason when a transport error is a failed handshake or verification (final), else None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return "%s" % (getattr(seen, "verify_message", None) or getattr(seen, "reason", None) or seen)
        seen = seen.__cause__ or seen.__context__
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text or "SSL" in text and "VERSION" in text:
        return text
    return None


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


def retry_after(value: object, now: Callable[[], float] = time.time) -> float | None:
    """The seconds a ``Retry-After`` header asks to wait: delay-seconds, or an HTTP-date (past: 0); at most
    :data:`RETRY_AFTER_MAX`.  None for anything else (``soon``, a negative number, ``nan``, ``inf``, an
    exponent): the backoff decides then.  Never raises."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if _DELAY_SECONDS.fullmatch(text):
        return min(float(text), RETRY_AFTER_MAX)
    if not text or len(text) > 64:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(text)
        if parsed.tzinfo is None:  # an HTTP-date is GMT; a date without a zone is read so
            parsed = parsed.replace(tzinfo=datetime.timezone.utc)
        seconds = parsed.timestamp() - now()
    except (TypeError, ValueError, IndexError, OverflowError, OSError):
        return None
    if not math.isfinite(seconds):
        return None
    return min(max(0.0, seconds), RETRY_AFTER_MAX)


def _message(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except (ValueError, RecursionError):
        return scrub(resp.text.strip(), MESSAGE_LIMIT) or resp.reason_phrase
    if isinstance(body, dict):
        return scrub(body.get("message") or body.get("error") or body, MESSAGE_LIMIT)
    return scrub(body, MESSAGE_LIMIT)


def _page(operation: str, got: Any) -> tuple[list[Any], int | None]:
    """``(items, count)`` of one page of a listing (``{"data": [...], "pagination": {"count": N}}``); a count that
    is not a number of items counts as none."""
    if got is None:
        return [], None
    if not isinstance(got, dict):
        raise BadAnswer("the platform's answer to %s is not an object (a page of a listing)" % operation)
    data = got.get("data")
    if data is None:
        data = []
    if not isinstance(data, list):
        raise BadAnswer("the platform's answer to %s: data is not a list" % operation)
    pagination = got.get("pagination")
    count = pagination.get("count") if isinstance(pagination, dict) else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        count = None
    return data, count


def _planned(size: int, count: int | None) -> range:
    """The starts of the pages after the first (``size`` items) that a listing of ``count`` items has, at most
    :data:`MAX_PLANNED_PAGES` of them (none without a count)."""
    return range(size, min(count, size * MAX_PLANNED_PAGES), size) if count is not None else range(0)


def _windowed(
    pool: ThreadPoolExecutor, page: Callable[[int], tuple[list[Any], int | None]], planned: range, parallel: int
) -> Iterator[tuple[int, list[Any]]]:
    """``(start, items)`` of the planned pages in order, at most ``parallel`` of them asked for ahead (the first
    ``parallel`` at once, before the first is handed on), until the first empty page: the listing ends there,
    whatever its count said."""
    window = deque(pool.submit(page, start) for start in planned[:parallel])  # asked for now, not when first read

    def pages() -> Iterator[tuple[int, list[Any]]]:
        for i, start in enumerate(planned):
            items, _seen = window.popleft().result()
            if not items:
                return
            if i + parallel < len(planned):
                window.append(pool.submit(page, planned[i + parallel]))
            yield start, items

    return pages()


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


class Transport:
    """Requests to ``https://<portal>/api/1``: the one place that retries.

    :param api_url: the base URL, with or without ``/api/1``; plain ``http://`` is accepted for
        loopback only without a warning (``warnings`` lists what the caller should show).
    :param token: the JWT; checked for expiry now, never printed.
    :param timeout: seconds for one request; one call (with its retries) ends by ``timeout +
        retry_budget`` seconds after it started, with an error that says how many attempts it made.
    :param max_attempts: the most requests one call makes that the platform processed or may have (a 429 is not).
    :param sleep, clock: how it waits and tells the time (injectable, for tests); the governor waits with them too.
    :param governor: the rate governor its requests go through; by default the process's one for this credential
        (``governor.shared``), or a governor of its own when ``sleep`` or ``clock`` is not the real one.

    Counters a caller can read: ``retries`` (attempts after the first), ``rate_limited`` (429s its calls met) and
    ``rate_waited`` (seconds its calls waited in the governor, all threads together).
    """

    def __init__(
        self,
        api_url: str,
        token: str,
        validate_certs: bool | str | ssl.SSLContext = True,
        timeout: float = 30.0,
        max_attempts: int = 6,
        backoff: float = 0.5,
        max_backoff: float = 20.0,
        retry_budget: float = RETRY_BUDGET,
        sleep: Callable[[float], object] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        governor: rate.Governor | None = None,
    ) -> None:
        if httpx is None:
            raise WhiteskyError("the Python library httpx is required")
        if not api_url:
            raise InputError("api_url is required (or set WHITESKY_API_URL), e.g. https://portal.example/api/1")
        if not token:
            raise InputError("api_token is required (or set WHITESKY_API_TOKEN)")
        exp = jwt_expiry(token)
        if exp is not None and exp <= time.time():
            raise ApiError(
                None,
                None,
                401,
                "the API token (JWT) expired at %s UTC; get a new one"
                % time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(exp)),
            )
        url = api_url.rstrip("/")
        if not url.endswith("/api/1"):
            url += "/api/1"
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError("api_url %r is not an http(s) URL, e.g. https://portal.example/api/1" % api_url)
        self.warnings: list[str] = []
        if parts.scheme == "http" and not _loopback(parts.hostname):
            self.warnings.append(
                "api_url %s uses plain http:// to a host that is not loopback: the API token travels unencrypted"
                % parts.netloc
            )
        self.base_url = url
        self.timeout = float(timeout)
        self.max_attempts = max(1, int(max_attempts))
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.retry_budget = max(0.0, float(retry_budget))
        self._sleep = sleep
        self._clock = clock
        self._token = token
        self._local = threading.local()  # this thread's operation deadline (see ``deadline``)
        if governor is None:
            real = sleep is time.sleep and clock is time.monotonic
            governor = rate.shared(url, token) if real else rate.Governor(clock=clock, sleep=sleep)
        self.governor = governor
        self._counting = threading.Lock()
        self.retries = 0
        self.rate_limited = 0
        self.rate_waited = 0.0
        self._http = httpx.Client(
            verify=validate_certs,
            timeout=self.timeout,
            headers={"Authorization": "Bearer " + token, "Accept": "application/json"},
        )

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, self.base_url)

    def redact(self, text: object, limit: int = 65536) -> str:
        """``text`` without this client's token (even one that is no JWT), then scrubbed (``scrub.scrub``, keeping
        its lines: a log record's traceback): for what leaves the process in a log."""
        text = "" if text is None else str(text)
        if self._token:
            text = text.replace(self._token, "***")
        return scrub(text, limit, multiline=True)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- deadlines -----------------------------------------------------------
    def inherited_deadline(self) -> float | None:
        """The deadline (on ``clock``) of the operation this thread is in, or None outside one."""
        return getattr(self._local, "deadline", None)

    @contextmanager
    def _within(self, deadline: float | None) -> Iterator[float | None]:
        """Run the block in this thread under ``deadline`` (or the inherited one, when it is earlier)."""
        outer = self.inherited_deadline()
        if deadline is None or (outer is not None and outer <= deadline):
            yield outer
            return
        self._local.deadline = deadline
        try:
            yield deadline
        finally:
            self._local.deadline = outer

    @contextmanager
    def deadline(self, seconds: float | None = None) -> Iterator[float | None]:
        """One operation's deadline, ``seconds`` (default ``timeout + retry_budget``) from now (a context manager).

        Every request and wait in the block, in this thread, ends by then (or by its own deadline, if that is
        earlier); one nested in another operation's keeps the earlier of the two.  Yields the deadline, on the
        ``clock``.  Other threads are not affected: a job run in a pool sets its own.
        """
        seconds = self.timeout + self.retry_budget if seconds is None else float(seconds)
        with self._within(self._clock() + seconds) as deadline:
            yield deadline

    def _deadline_from(self, started: float) -> float:
        """A call's deadline: ``timeout + retry_budget`` after it started, or the inherited one when earlier."""
        own = started + self.timeout + self.retry_budget
        inherited = self.inherited_deadline()
        return own if inherited is None else min(own, inherited)

    def wait_until(self, condition: Callable[[], object], what: str, interval: float = 0.25) -> None:
        """Poll ``condition()`` until it is true, within one call's deadline (``timeout + retry_budget``), or the
        deadline of the operation it runs in when that is earlier; the condition's requests inherit it.

        For an outcome the platform has not settled yet (a VM still locked by a request whose answer was
        lost); raises :class:`WhiteskyError` naming ``what`` when the deadline passes first.
        """
        started = self._clock()
        deadline = self._deadline_from(started)
        with self._within(deadline):
            while not condition():
                if self._clock() + interval >= deadline:
                    raise WhiteskyError(
                        "gave up waiting for %s after %.0fs (the call's deadline)" % (what, deadline - started)
                    )
                self._sleep(interval)

    def _delay(self, attempt: int, retry_after: float | None = None) -> float:
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
        """One platform call, retried here and nowhere else; returns the decoded JSON body (or None), each object
        of it through ``object_hook`` when one is given (``json.loads``'s: what a large answer keeps of itself).

        Retried, while attempts and the call's deadline last: a request that was never sent (no connection), 429
        (not processed: the governor paces what follows, and it is no attempt against ``max_attempts``), and for
        idempotent methods (or ``retry=True``) 502, 503, 504 and a lost answer.  Each attempt first waits its turn in
        the governor, within the call's deadline.  A TLS failure is final.  The call's deadline is ``timeout +
        retry_budget`` after it started, or the deadline of the operation it runs in (``deadline``) when that is
        earlier; a call whose operation has no time left is not sent.  Its hooks run under its deadline.  The caller
        adds what is its own:

        - ``retry_if(ApiError) -> bool``: more errors that mean "refused, nothing changed" (a 409
          while the VM is locked); those are waited out until the deadline, and do not count
          against ``max_attempts``;
        - ``resolve(ApiError)``: for a request that is not idempotent and whose outcome is unknown
          (a lost answer, 502, 503, 504), whether it happened after all: what to return if it did,
          None if it did not (then it is sent again).
        """
        retry = method in IDEMPOTENT_METHODS if retry is None else retry
        query = {k: _query_value(v) for k, v in (params or {}).items() if v is not None}
        started = self._clock()
        deadline = self._deadline_from(started)
        if deadline <= started:
            raise ApiError(method, path, None, "not sent: no time left within the operation's deadline")
        attempt = waits = free = 0
        last: ApiError | None = None  # the last attempt's error
        with self._within(deadline):
            while True:
                permit = self._admit(method, path, attempt, last, started, deadline)
                attempt += 1
                resp = self._attempt(permit, method, path, query, body, deadline)
                if isinstance(resp, httpx.TransportError):
                    found, last = self._after_transport_error(method, path, resp, retry, resolve)
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
                raise _gave_up(last, attempt, self._clock() - started, why) from None
            raise ApiError(method, path, 429, "not sent: %s" % why) from None
        self._count(waited=permit.waited)
        return permit

    def _attempt(
        self, permit: rate.Permit, method: str, path: str, query: dict[str, Any], body: Any, deadline: float
    ) -> httpx.Response | httpx.TransportError:
        """Send one attempt and report how it ended to the governor: the response, or the transport error."""
        try:
            resp = self._send(method, path, query, body, deadline)
        except httpx.TransportError as exc:
            self.governor.release(permit, rate.OTHER)
            return exc
        except BaseException:
            self.governor.release(permit, rate.OTHER)
            raise
        if resp.status_code == 429:
            self._count(limited=1)
            self.governor.release(permit, rate.LIMITED, retry_after(resp.headers.get("Retry-After")))
        else:  # any answer but a 5xx passed the limit (an error of the call's own is still an answer)
            self.governor.release(permit, rate.OK if resp.status_code < 500 else rate.OTHER)
        return resp

    def _send(self, method: str, path: str, query: dict[str, Any], body: Any, deadline: float) -> httpx.Response:
        """One attempt, its timeout capped by what is left of the call's deadline."""
        left = deadline - self._clock()
        return self._http.request(
            method, self.base_url + path, params=query, json=body, timeout=max(0.05, min(self.timeout, left))
        )

    @staticmethod
    def _after_transport_error(
        method: str,
        path: str,
        exc: httpx.TransportError,
        retry: bool,
        resolve: Callable[[ApiError], Any] | None,
    ) -> tuple[Any, ApiError]:
        """``(found, last)`` after no answer: a TLS failure is final; a request never sent, or one that may be
        repeated, is tried again; a mutating one that may have happened is resolved (or its error raised)."""
        tls = _tls_failure(exc)
        if tls:
            raise ApiError(method, path, None, "TLS failed (not retried): %s" % tls) from None
        last = ApiError(method, path, None, "%s: %s" % (type(exc).__name__, exc or "connection lost"))
        if retry or isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
            return None, last
        if resolve is None:
            raise last from None
        return resolve(last), last

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
        counted = attempt - free
        delay = self._delay(min(counted, 4) if waits else counted, wait_hint)  # a lock is polled at <= 4 s
        spent = self._clock() - started
        if counted - waits >= self.max_attempts:
            raise _gave_up(last, attempt, spent, "no attempts left")
        if self._clock() + delay >= deadline:
            why = "the platform asked to wait %.0fs" % wait_hint if wait_hint is not None else "no time left"
            raise _gave_up(last, attempt, spent, "%s within the call's deadline of %.0fs" % (why, deadline - started))
        self._count(retries=1)
        self._sleep(delay)

    def call(self, operation: str, query: dict[str, Any] | None = None, **path_params: Any) -> Any:
        """An operation by its id (``client.WhiteskyClient`` has them); a bare transport has none."""
        raise NotImplementedError

    def paginate(
        self,
        operation: str,
        query: dict[str, Any] | None = None,
        limit: int = PAGE_LIMIT,
        parallel: int = 32,
        **path_params: Any,
    ) -> Iterator[Any]:
        """Yield every item of a paginated list (``limit`` / ``start_after``), in order; each page is asked for
        with ``self.call`` (the operation by its id: ``client.WhiteskyClient``'s).

        Paging goes on until the platform says it is done: ``pagination.count`` items seen, or an
        empty page; never because a page was shorter than asked (a platform may page smaller).
        Once the first page shows the platform's page size and the count, the pages planned from
        them are fetched up to ``parallel`` at a time; a page that comes back short is filled in.  Every page
        keeps the deadline of the operation the listing runs in, in whichever thread it is fetched.
        """
        inherited = self.inherited_deadline()

        def page(start: int) -> tuple[list[Any], int | None]:
            with self._within(inherited):
                got = self.call(operation, query=dict(query or {}, limit=limit, start_after=start), **path_params)
            return _page(operation, got)

        data, count = page(0)
        pos, size = len(data), len(data)
        if not data:
            return

        def walk(stop: int | None) -> Generator[Any, None, bool]:
            """Fetch page by page from ``pos`` until ``stop`` (or the count, or an empty page)."""
            nonlocal pos, count
            while (stop is None or pos < stop) and (count is None or pos < count):
                items, seen = page(pos)
                if seen is not None:
                    count = seen
                if not items:
                    return False
                if stop is not None:
                    items = items[: stop - pos]
                pos += len(items)
                yield from items
            return True

        planned = _planned(size, count)
        if not planned:
            yield from data
        else:
            # at most ``parallel`` pages in flight or waiting: memory stays bounded by the window, not the listing;
            # they are asked for before the first page is handed on, so they are on their way while it is read
            with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(planned)))) as pool:
                pages = _windowed(pool, page, planned, parallel)
                yield from data
                for start, items in pages:
                    if pos < start:  # a page before this one came back short: fill the gap
                        yield from walk(start)
                    skip = max(0, pos - start)  # what an earlier fill already gave
                    yield from items[skip:]
                    pos = max(pos, start + len(items))
        yield from walk(None)
