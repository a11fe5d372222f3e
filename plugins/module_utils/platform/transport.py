# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The HTTP transport to the whitesky.cloud API: the URL, the credential, TLS, and one attempt of a request.

Pure Python on httpx, with no Ansible import.  It knows URLs and HTTP, not the platform's operations: those are
``client.WhiteskyClient``'s, which holds a :class:`Transport`.  A transport holds its parts rather than being them:
its :class:`~deadline.Deadlines` (one call's deadline, and the operation's that nested calls inherit) and its
:class:`~retry.Retry` loop (the one place that retries, through the credential's rate governor), which sends each
attempt with :meth:`Transport.send`.  Paging is ``paging``'s, the parsing of Retry-After ``headers``'.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import ssl
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

from ansible_collections.whitesky.capvco.plugins.module_utils.platform import governor as rate
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import require
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.deadline import RETRY_BUDGET, Deadlines
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    InputError,
    WhiteskyError,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.retry import Retry, Unanswered
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


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


class Credential(Protocol):
    """A token that may change while a process runs (``credentials.TokenFile``: a mounted Secret's file)."""

    def token(self, force: bool = False) -> str:
        """The token now (``force``: read again at once, not when it is next due)."""

    def source(self) -> str:
        """Where the token comes from (never its value)."""


class Transport:
    """Requests to ``https://<portal>/api/1``, each call through its :class:`~retry.Retry` loop (``retry``), under
    its :class:`~deadline.Deadlines` (``deadlines``).

    :param api_url: the base URL, with or without ``/api/1``; plain ``http://`` is accepted for
        loopback only without a warning (``warnings`` lists what the caller should show).
    :param token: the JWT; checked for expiry now, never printed.
    :param timeout: seconds for one request; one call (with its retries) ends by ``timeout +
        retry_budget`` seconds after it started, with an error that says how many attempts it made.
    :param max_attempts, backoff, max_backoff: the retry loop's (``retry.Retry``).
    :param sleep, clock: how it waits and tells the time (injectable, for tests); the governor waits with them too.
    :param governor: the rate governor its requests go through; by default the process's one for this credential
        (``governor.shared``), or a governor of its own when ``sleep`` or ``clock`` is not the real one.
    :param credential: where the token comes from when it may change under the process (:class:`Credential`):
        asked before each attempt, a new token is used from then on (every token it held stays out of what it
        shows), and a refusal (401, 403) names that source instead of the module's options.
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
        credential: Credential | None = None,
    ) -> None:
        if httpx is None:
            raise WhiteskyError("the Python library httpx is required")
        require(api_url=api_url, api_token=token)
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
        self._token = token
        self.deadlines = Deadlines(timeout, retry_budget, clock, sleep)
        if governor is None:
            real = sleep is time.sleep and clock is time.monotonic
            governor = rate.shared(url, token) if real else rate.Governor(clock=clock, sleep=sleep)
        self.governor = governor
        self.retry = Retry(self.send, governor, self.deadlines, max_attempts, backoff, max_backoff)
        self._verify = validate_certs
        self._http = self._client(token)
        #: where the token comes from when it may change (a mounted Secret's file), asked before each attempt
        self.credential = credential
        self._spent: list[str] = []  # the tokens used before the current one (still secrets: never shown)
        self._retired: list[httpx.Client] = []  # their clients, closed with this transport (requests may be on them)
        self._swap = threading.Lock()
        if credential is not None:
            self.retry.credential_source = credential.source()
            self.retry.renew = self._renew

    def _client(self, token: str) -> httpx.Client:
        return httpx.Client(
            verify=self._verify,
            timeout=self.deadlines.timeout,
            headers={"Authorization": "Bearer " + token, "Accept": "application/json"},
        )

    def _renew(self) -> bool:
        """After a refusal: whether ``credential`` has another token now (read at once), which is used from now on."""
        if self.credential is None or self.credential.token(force=True) == self._token:
            return False
        self._current()
        return True

    def _current(self) -> httpx.Client:
        """The HTTP client of the token now: a changed ``credential`` gets a client of its own (the one before is
        kept until :meth:`close`, for the requests still on it)."""
        if self.credential is None:
            return self._http
        token = self.credential.token()
        if token == self._token:
            return self._http
        with self._swap:
            if token != self._token:
                require(api_token=token)
                fresh = self._client(token)
                self._retired.append(self._http)
                self._spent.append(self._token)
                self._http, self._token = fresh, token
                self.retry.credential_source = self.credential.source()
            return self._http

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, self.base_url)

    def redact(self, text: object, limit: int = 65536) -> str:
        """``text`` without this transport's token (even one that is no JWT), then scrubbed (``scrub.scrub``, keeping
        its lines: a log record's traceback): for what leaves the process in a log."""
        return scrub(text, limit, multiline=True, secrets=(self._token, *self._spent))

    def close(self) -> None:
        for client in [*self._retired, self._http]:
            client.close()

    def send(
        self, method: str, path: str, query: dict[str, Any], body: Any, deadline: float
    ) -> httpx.Response | Unanswered:
        """One attempt (``retry.Send``), its timeout capped by what is left of the call's ``deadline``: the answer,
        or :class:`~retry.Unanswered` when there was none.  A TLS failure is final: raised, never retried."""
        left = deadline - self.deadlines.clock()
        http = self._current()
        try:
            return http.request(
                method,
                self.base_url + path,
                params={k: _query_value(v) for k, v in query.items()},
                json=body,
                timeout=max(0.05, min(self.deadlines.timeout, left)),
            )
        except httpx.TransportError as exc:
            tls = _tls_failure(exc)
            if tls:
                raise ApiError(method, path, None, "TLS failed (not retried): %s" % tls) from None
            lost = ApiError(method, path, None, "%s: %s" % (type(exc).__name__, exc or "connection lost"))
            return Unanswered(lost, isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)))
