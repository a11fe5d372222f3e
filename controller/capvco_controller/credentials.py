"""The controller's platform credential, and where it comes from.

With ``--credentials-dir DIR`` (the role mounts the credentials Secret there) it is the files ``api_url``,
``customer_id`` and ``api_token`` of that folder, read again when they change: the kubelet updates a mounted
Secret in place (a new ``..data`` folder, swapped in at once), so a rotated token reaches the running controller
without a restart, and the reconciles and finalizers that failed with the old one succeed on their next try.
Without it, it is the environment (``WHITESKY_API_URL``, ``WHITESKY_CUSTOMER_ID``, ``WHITESKY_API_TOKEN``), read
once at start.  ``validate_certs`` and ``timeout`` come from the environment in both cases.

A credential the platform refuses (a 401) is named in the message, with where it comes from (:meth:`source`),
never with its value: every token the process has held is scrubbed out of what it says (:meth:`say`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import Connection
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.credentials import CHECK_EVERY, SecretFiles
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    HINTS,
    ApiError,
    WhiteskyError,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub

log = logging.getLogger(__name__)
#: The Secret's keys, each a file of the folder it is mounted at.
FILES = ("api_url", "customer_id", "api_token")


def refused(exc: BaseException) -> bool:
    """Whether the platform refused the credential (HTTP 401) somewhere in ``exc`` (a call's error, or a partial
    failure whose message carries one)."""
    if isinstance(exc, ApiError):
        return exc.status == 401
    return isinstance(exc, WhiteskyError) and (exc.details.get("status") == 401 or "HTTP 401" in str(exc))


class Credentials:
    """The credential the controller's platform clients use now, read from ``directory`` (again when its files
    change: the core's ``credentials.SecretFiles``) or from ``environ`` (once)."""

    def __init__(
        self,
        directory: str | None,
        environ: Mapping[str, str],
        check_every: float = CHECK_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = directory or None
        self.environ = dict(environ)
        self._lock = threading.RLock()
        #: how many times the credential changed since the start (a thread's client of another one is made anew)
        self.generation = 0
        self._files: SecretFiles | None = None
        if self.directory is None:
            self._connection = Connection.from_options({}, self.environ, where=" in the controller's environment")
        else:
            self._files = SecretFiles(self.directory, FILES, "of the controller's credential", check_every, clock)
            self._connection = self._connect(self._files.values)
        self._seen = 0  # the files' generation the connection was made of
        self._tokens: list[str] = [self._connection.api_token]

    def source(self) -> str:
        """Which credential the controller uses, and where it comes from (never its value)."""
        if self._files is None:
            return (
                "the controller's platform credential, for customer %s, from its environment (WHITESKY_API_URL, "
                "WHITESKY_CUSTOMER_ID and WHITESKY_API_TOKEN, read once at start: restart the controller after "
                "changing them)" % self._connection.customer_id
            )
        return "the controller's platform credential, for customer %s, from %s" % (
            self._connection.customer_id,
            self._files.source(),
        )

    def current(self, force: bool = False) -> tuple[Connection, int]:
        """``(connection, generation)``: the credential now, the files looked at again when ``check_every``
        seconds have passed since they last were (at once with ``force``).  A folder that cannot be read, or holds
        a credential that is not valid, keeps the one the controller has (logged)."""
        with self._lock:
            if self._files is None:
                return self._connection, self.generation
            values, seen = self._files.current(force)
            if self._files.error is not None:
                log.warning("keeping the platform credential read before: %s", self.say(self._files.error))
            if seen != self._seen:
                self._seen = seen
                try:
                    connection = self._connect(values)
                except WhiteskyError as exc:
                    log.warning("keeping the platform credential read before: %s", self.say(exc))
                else:
                    self._connection = connection
                    self._tokens.append(connection.api_token)
                    self.generation += 1
                    log.info(
                        "the platform credential in %s changed: the reconciles use the new one from now on",
                        self.directory,
                    )
            return self._connection, self.generation

    @property
    def connection(self) -> Connection:
        return self.current()[0]

    def say(self, exc: BaseException, limit: int = 4096) -> str:
        """``exc`` fit to be shown: without any token the process has held, through the one scrubber; a refused
        credential (401) is named, with where it comes from."""
        text = str(exc)
        if refused(exc):
            before = self.generation
            self.current(force=True)  # a rotated Secret may be there already: the next try then uses it
            # the collection's hint names the options of a module, which the controller does not read
            text = text.replace(HINTS[401], "") + "; the platform refused %s" % self.source()
            if self.generation != before:
                text += "; a new credential was found there since, and the next try uses it"
        return scrub(text, limit, secrets=tuple(self._tokens))

    def _connect(self, files: tuple[str, ...]) -> Connection:
        return Connection.from_options(
            dict(zip(FILES, files, strict=True)), self.environ, where=" in %s" % self.directory
        )
