# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The base classes of the core's errors, and the platform's own (pure Python, no imports of the collection).

Every error the core raises is a :class:`WhiteskyError`, which ``faces/module.py`` turns into ``fail_json``: the
message, plus ``details``.  Here are the base and the kinds every package raises (:class:`InputError`,
:class:`PartialFailure`), the platform's (:class:`ApiError`, :class:`BadAnswer`, :class:`LogicError`) and those of
reading a file from outside (:class:`NotJson`, :class:`TooLarge`).  A
package that has errors of its own keeps them in its ``errors.py``: ``ownership.errors`` (the lease's),
``firstboot.errors`` (a first boot's report, the NVIDIA driver), ``gpu.errors`` (capacity), ``machines.errors`` (a
NIC's address), ``faces.errors`` (Kubernetes).
A module that only validates input or parses output imports these, never the HTTP client.  (The governor's
``Overdue`` is no error of the core: the retry loop (``retry.Retry._admit``) turns it into an :class:`ApiError`,
and it never leaves the platform package.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

_T = TypeVar("_T")


class WhiteskyError(Exception):
    """Base of every error the core raises; ``details`` go into the module's failure result as they are."""

    def __init__(self, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details: dict[str, Any] = dict(details or {})


class InputError(WhiteskyError, ValueError):
    """Bad input from the user: the message names the value and what is valid."""


class PartialFailure(WhiteskyError):
    """Some items converged and some did not; ``details`` says which."""


class LogicError(WhiteskyError):
    """The platform's answers do not add up (two new NICs where one was attached): not a lost answer,
    so a caller never reads it as "no response" and never retries it."""


class BadAnswer(WhiteskyError):
    """The platform answered, but not in the shape the core reads (a field it reads missing or of another type, a
    list that is not one): not a lost answer, so never retried, and never a ``KeyError`` deep in a planner."""


#: What a user can check, by the status of a failed call (None: no answer came), named by the option and the
#: environment variable that set it.
HINTS = {
    None: " (is api_url, or WHITESKY_API_URL, the portal's address, and is the portal reachable from here?)",
    401: " (the platform refused the credential: check api_token, or WHITESKY_API_TOKEN)",
    403: " (the credential may not do this: check api_token, or WHITESKY_API_TOKEN, and customer_id, or"
    " WHITESKY_CUSTOMER_ID)",
}


class ApiError(WhiteskyError):
    """One platform call failed.

    ``status`` is the HTTP status, or ``None`` when no response came (a
    timeout, a dropped connection).  The token is never part of it.
    """

    def __init__(
        self, method: str | None, path: str | None, status: int | None, message: str, hint: str | None = None
    ) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.message = message
        where = "%s %s" % (method, path) if method else "whitesky API"
        code = "HTTP %s" % status if status is not None else "no response"
        super().__init__(
            "%s failed: %s: %s%s" % (where, code, message, HINTS.get(status, "") if hint is None else hint),
            {"status": status, "method": method, "path": path},
        )

    def refused(self, source: str) -> ApiError:
        """This error, its hint naming where the refused credential comes from (``source``: a file, not the
        module's options) when the platform refused it (401) or what it may do (403); else this error itself."""
        if self.status == 401:
            return ApiError(self.method, self.path, 401, self.message, " (the platform refused %s)" % source)
        if self.status == 403:
            return ApiError(self.method, self.path, 403, self.message, " (%s may not do this)" % source)
        return self

    @property
    def no_response(self) -> bool:
        """True when the request may or may not have been committed."""
        return self.status is None


class Resolved:
    """What a ``resolve`` hook gives back when a mutating call whose answer was lost did happen after all: the thing
    it made (an id, a NIC, a reservation).  The transport returns it as it is, the client's endpoint passes it
    through, and the caller, which made the hook, takes ``.value``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "Resolved(%r)" % (self.value,)


def missing_is_none(call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T | None:
    """Run a read; a 404 (the thing is not there) gives None."""
    try:
        return call(*args, **kwargs)
    except ApiError as exc:
        if exc.status != 404:
            raise
        return None


def gone_is_done(call: Callable[..., object], *args: Any, **kwargs: Any) -> bool:
    """Run a delete; a 404 means it is already gone, which counts as done.

    Returns True when this call deleted it, False when it was gone already.
    """
    try:
        call(*args, **kwargs)
    except ApiError as exc:
        if exc.status != 404:
            raise
        return False
    return True


def known(value: _T | None, what: str) -> _T:
    """``value``, which the caller has made sure is there; a :class:`WhiteskyError` naming ``what`` when it is not
    (ansible-test forbids ``assert`` in a collection's code)."""
    if value is None:
        raise WhiteskyError("%s is missing" % what)
    return value


class NotJson(ValueError):
    """A file's text is not JSON of finite numbers, or nests too deep for the parser (``too_deep``;
    ``documents.loads``); the message says which, and the reader says what the file is not."""

    def __init__(self, message: str, too_deep: bool = False) -> None:
        super().__init__(message)
        self.too_deep = too_deep


class TooLarge(ValueError):
    """A file holds more than the bytes its reader takes (``files.read_bounded``'s ``limit``)."""

    def __init__(self, path: str, limit: int) -> None:
        super().__init__("%s is larger than %d bytes" % (path, limit))
