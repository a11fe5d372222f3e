# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The transport to the whitesky.cloud API: requests, retries within one deadline, Retry-After, TLS, paging.

Pure Python on httpx, with no Ansible import.  It knows URLs and HTTP, not the platform's operations: those are
``client.WhiteskyClient``'s, built on :class:`Transport`.
"""

from __future__ import annotations

import base64
import email.utils
import ipaddress
import json
import random
import re
import ssl
import sys
import time
import traceback
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from ansible_collections.whitesky.capvco.plugins.module_utils.errors import ApiError, InputError, WhiteskyError

# httpx imports its command line client (click, pygments, rich: some 70 ms, paid by every module run) whenever
# those are installed; nothing here runs it, and httpx falls back to a stub when it cannot be imported.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)
try:
    import httpx
except ImportError:  # pragma: no cover - reported by the module base
    httpx = None
    HTTPX_IMPORT_ERROR = traceback.format_exc()
else:
    HTTPX_IMPORT_ERROR = None

#: Statuses retried: 429 (not processed) for every method; 502, 503 and 504 for idempotent ones.
RETRY_STATUSES = frozenset((429, 502, 503, 504))
#: Methods retried on those statuses and on a lost answer.  A POST is not: a POST that
#: reserves is made idempotent by its caller (look the name up, then decide).
IDEMPOTENT_METHODS = frozenset(("GET", "HEAD", "PUT", "DELETE"))
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+")
#: Seconds one call may spend on retries beyond its own ``timeout``: its deadline is
#: ``timeout + RETRY_BUDGET`` after it started (a module's ``timeout`` option sets the first part).
RETRY_BUDGET = 30.0
#: The largest page the client asks for; the emulator serves up to this.
PAGE_LIMIT = 500


def jwt_expiry(token):
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


def _loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _tls_failure(exc):
    """The TLS reason when a transport error is a failed handshake or verification (final), else None."""
    seen = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return "%s" % (getattr(seen, "verify_message", None) or getattr(seen, "reason", None) or seen)
        seen = seen.__cause__ or seen.__context__
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text or "SSL" in text and "VERSION" in text:
        return text
    return None


def _gave_up(last, attempts, spent, why):
    return ApiError(
        last.method,
        last.path,
        last.status,
        "gave up after %d attempt(s) in %.1fs (%s); last: %s" % (attempts, spent, why, last.message),
    )


def _decode(method, path, resp):
    if not resp.content:
        return None
    try:
        return resp.json()
    except ValueError:
        raise ApiError(method, path, resp.status_code, "response is not JSON: %r" % resp.text[:200]) from None


def _retry_after(value):
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _message(resp):
    try:
        body = resp.json()
    except ValueError:
        return resp.text.strip()[:500] or resp.reason_phrase
    if isinstance(body, dict):
        return str(body.get("message") or body.get("error") or body)[:500]
    return str(body)[:500]


def _query_value(value):
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
    :param max_attempts: the most requests one call makes.
    """

    def __init__(
        self,
        api_url,
        token,
        validate_certs=True,
        timeout=30.0,
        max_attempts=6,
        backoff=0.5,
        max_backoff=20.0,
        retry_budget=RETRY_BUDGET,
        sleep=time.sleep,
        clock=time.monotonic,
    ):
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
        self.warnings = []
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
        self.retries = 0
        self._http = httpx.Client(
            verify=validate_certs,
            timeout=self.timeout,
            headers={"Authorization": "Bearer " + token, "Accept": "application/json"},
        )

    def __repr__(self):
        return "%s(%r)" % (type(self).__name__, self.base_url)

    def redact(self, text):
        """``text`` without this client's token, nor any bearer token (a platform error may echo the headers)."""
        text = str(text)
        if self._token:
            text = text.replace(self._token, "***")
        return _BEARER.sub(r"\1***", text)

    def close(self):
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def wait_until(self, condition, what, interval=0.25):
        """Poll ``condition()`` until it is true, within one call's deadline (``timeout + retry_budget``).

        For an outcome the platform has not settled yet (a VM still locked by a request whose answer was
        lost); raises :class:`WhiteskyError` naming ``what`` when the deadline passes first.
        """
        deadline = self._clock() + self.timeout + self.retry_budget
        while not condition():
            if self._clock() + interval >= deadline:
                budget = self.timeout + self.retry_budget
                raise WhiteskyError("gave up waiting for %s after %.0fs (the call's deadline)" % (what, budget))
            self._sleep(interval)

    def _delay(self, attempt, retry_after=None):
        """Full-jitter exponential backoff; a ``Retry-After`` is waited out, plus a little jitter."""
        jitter = random.uniform(0, min(self.max_backoff, self.backoff * (2 ** (attempt - 1))))
        if retry_after is not None:
            return retry_after + jitter * 0.1
        return jitter

    def request(self, method, path, params=None, body=None, retry=None, retry_if=None, resolve=None):
        """One platform call, retried here and nowhere else; returns the decoded JSON body (or None).

        Retried, while attempts and the call's deadline last: a request that was never sent (no
        connection), 429 (not processed), and for idempotent methods (or ``retry=True``) 502, 503,
        504 and a lost answer.  A TLS failure is final.  The caller adds what is its own:

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
        deadline = started + self.timeout + self.retry_budget
        attempt = waits = 0
        while True:
            attempt += 1
            try:
                resp = self._send(method, path, query, body, deadline)
            except httpx.TransportError as exc:
                found, last = self._after_transport_error(method, path, exc, retry, resolve)
                wait_hint, waiting = None, False
            else:
                if resp.status_code < 400:
                    return _decode(method, path, resp)
                found, last, wait_hint, waiting = self._after_status(method, path, resp, retry, retry_if, resolve)
            if found is not None:
                return found
            waits += waiting
            self._back_off(last, attempt, waits, wait_hint, started, deadline)

    def _send(self, method, path, query, body, deadline):
        """One attempt, its timeout capped by what is left of the call's deadline."""
        left = deadline - self._clock()
        return self._http.request(
            method, self.base_url + path, params=query, json=body, timeout=max(0.05, min(self.timeout, left))
        )

    @staticmethod
    def _after_transport_error(method, path, exc, retry, resolve):
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
    def _after_status(method, path, resp, retry, retry_if, resolve):
        """``(found, last, wait_hint, waiting)`` after an error status: 429 (not processed) and, when the request may
        be repeated, 502/503/504 are tried again; otherwise those are resolved; a refusal ``retry_if`` accepts is
        waited out; anything else is raised."""
        last = ApiError(method, path, resp.status_code, _message(resp))
        wait_hint = _retry_after(resp.headers.get("Retry-After")) if resp.status_code in (429, 503) else None
        if resp.status_code == 429 or (resp.status_code in RETRY_STATUSES and retry):
            return None, last, wait_hint, False  # not processed, or safe to repeat
        if resp.status_code in RETRY_STATUSES and resolve is not None:
            return resolve(last), last, wait_hint, False  # processed or not? the caller can tell
        if retry_if is not None and retry_if(last):
            return None, last, wait_hint, True  # refused, nothing changed: wait it out until the deadline
        raise last

    def _back_off(self, last, attempt, waits, wait_hint, started, deadline):
        """Sleep before the next attempt, or give up: no attempts left, or no time left before the deadline."""
        delay = self._delay(min(attempt, 4) if waits else attempt, wait_hint)  # a lock is polled at <= 4 s
        spent = self._clock() - started
        if attempt - waits >= self.max_attempts:
            raise _gave_up(last, attempt, spent, "no attempts left")
        if self._clock() + delay >= deadline:
            why = "the platform asked to wait %.0fs" % wait_hint if wait_hint is not None else "no time left"
            raise _gave_up(
                last, attempt, spent, "%s within the call's deadline of %.0fs" % (why, self.timeout + self.retry_budget)
            )
        self.retries += 1
        self._sleep(delay)

    def paginate(self, operation, query=None, limit=PAGE_LIMIT, parallel=32, **path_params):
        """Yield every item of a paginated list (``limit`` / ``start_after``), in order; each page is asked for
        with ``self.call`` (the operation by its id: ``client.WhiteskyClient``'s).

        Paging goes on until the platform says it is done: ``pagination.count`` items seen, or an
        empty page; never because a page was shorter than asked (a platform may page smaller).
        Once the first page shows the platform's page size and the count, the pages planned from
        them are fetched up to ``parallel`` at a time; a page that comes back short is filled in.
        """

        def page(start):
            got = self.call(operation, query=dict(query or {}, limit=limit, start_after=start), **path_params) or {}
            return got.get("data") or [], (got.get("pagination") or {}).get("count")

        data, count = page(0)
        pos, size = len(data), len(data)
        if not data:
            return

        def walk(stop):
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

        planned = list(range(size, count, size)) if count is not None else []
        if not planned:
            yield from data
        else:
            # at most ``parallel`` pages in flight or waiting: memory stays bounded by the window, not the listing;
            # they are asked for before the first page is handed on, so they are on their way while it is read
            with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(planned)))) as pool:
                window = deque(pool.submit(page, start) for start in planned[:parallel])
                yield from data
                for i, start in enumerate(planned):
                    items, _seen = window.popleft().result()
                    if i + parallel < len(planned):
                        window.append(pool.submit(page, planned[i + parallel]))
                    if pos < start:  # a page before this one came back short: fill the gap
                        yield from walk(start)
                    skip = max(0, pos - start)  # what an earlier fill already gave
                    yield from items[skip:]
                    pos = max(pos, start + len(items))
        yield from walk(None)
