# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A credential held in files that change under a running process: a mounted Kubernetes Secret (plain Python, no
Ansible; the controller and the node agent use it).

The kubelet updates a mounted Secret in place: it writes the new version into a new hidden folder and swaps the
``..data`` link to it at once, each key's file being a link through ``..data``.  :func:`read_files` reads every
file of one version (through ``..data`` resolved once), so that a reader never mixes an old ``api_url`` with a new
``api_token``.  :class:`SecretFiles` reads them again, at most every ``check_every`` seconds, when asked; a folder
that cannot be read, or a file that is empty, keeps the values read before (the error is kept for the caller to
log).  :class:`TokenFile` is one token's file, as a :class:`~transport.Transport` asks for it before each request:
a rotated token reaches a running process without a restart, and a refusal names where the token comes from
(``source``), never the token.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, WhiteskyError

#: The longest file read (a JWT is a few KiB).
FILE_LIMIT = 64 * 1024
#: How often, at most, the files are looked at (a process asks for its credential before every request).
CHECK_EVERY = 1.0


def read_files(directory: str, names: Sequence[str], what: str) -> tuple[str, ...]:
    """The files ``names`` of ``directory``, each stripped, from one version of a mounted Secret (its ``..data``
    folder when there is one); :class:`InputError` names the file and ``what`` it holds, never its content."""
    base = directory
    data = os.path.join(directory, "..data")
    if os.path.isdir(data):
        base = os.path.realpath(data)
    out = []
    for name in names:
        try:
            with open(os.path.join(base, name), "rb") as fh:
                raw = fh.read(FILE_LIMIT + 1)
        except OSError as exc:
            raise InputError("cannot read %s (%s) in %s: %s" % (name, what, directory, exc.strerror or exc)) from None
        if len(raw) > FILE_LIMIT:
            raise InputError("%s (%s) in %s is longer than %d bytes" % (name, what, directory, FILE_LIMIT))
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise InputError("%s (%s) in %s is not UTF-8 text" % (name, what, directory)) from None
        if not text:
            raise InputError("%s (%s) in %s is empty" % (name, what, directory))
        out.append(text)
    return tuple(out)


class SecretFiles:
    """The files ``names`` of ``directory`` (a mounted Secret), read at start (:class:`InputError` when they cannot
    be) and again, at most every ``check_every`` seconds, by :meth:`current`; ``generation`` counts the changes."""

    def __init__(
        self,
        directory: str,
        names: Sequence[str],
        what: str,
        check_every: float = CHECK_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory, self.names, self.what = directory, tuple(names), what
        self.check_every, self.clock = check_every, clock
        self._lock = threading.Lock()
        self.values = read_files(directory, self.names, what)
        self.generation = 0
        #: the last reading's error, while the values read before are kept (None once a reading succeeds)
        self.error: WhiteskyError | None = None
        self._checked = clock()

    def current(self, force: bool = False) -> tuple[tuple[str, ...], int]:
        """``(values, generation)`` now: the files read again when ``check_every`` seconds have passed since they
        last were (at once with ``force``)."""
        with self._lock:
            if force or self.clock() - self._checked >= self.check_every:
                self._checked = self.clock()
                try:
                    values = read_files(self.directory, self.names, self.what)
                except WhiteskyError as exc:
                    self.error = exc
                else:
                    self.error = None
                    if values != self.values:
                        self.values, self.generation = values, self.generation + 1
            return self.values, self.generation

    def source(self) -> str:
        if len(self.names) == 1:
            where = "the file %s" % os.path.join(self.directory, self.names[0])
        else:
            where = "the files %s in %s" % (", ".join(self.names), self.directory)
        return "%s (a mounted Secret's, read again when it changes, without a restart)" % where


class TokenFile:
    """A platform token in one file of a mounted Secret, for :class:`~transport.Transport`'s ``credential``: the
    token now (:meth:`token`) and where it comes from (:meth:`source`)."""

    def __init__(self, path: str, what: str, check_every: float = CHECK_EVERY) -> None:
        self.what = what
        self.files = SecretFiles(os.path.dirname(path) or ".", (os.path.basename(path),), what, check_every)

    def token(self, force: bool = False) -> str:
        return self.files.current(force)[0][0]

    def source(self) -> str:
        return "%s, from %s" % (self.what, self.files.source())
