# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files the collection keeps (plain Python, standard library only; the node agent imports it too): one way to write
a file safely, one way to read a file that anyone may have put there.

- :func:`write_whole`: a temporary file in the same folder (mode 0600), written, flushed and fsynced, then put in
  place in one step (renamed over the file, or linked where no file may be replaced): a reader, or a crash, sees
  the old file or the new one, never half of one.
- :func:`read_bounded`: at most ``limit`` bytes, the file opened without blocking (a FIFO does not hang the
  reader), optionally without following a symbolic link, and checked (``check``: its owner, its mode, that it is a
  regular file) on the open file, before a byte is read: what was checked is what is read.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import TooLarge


def read_bounded(
    path: str, limit: int, *, follow: bool = True, check: Callable[[os.stat_result], None] | None = None
) -> bytes:
    """The bytes of file ``path``, at most ``limit`` of them: :class:`TooLarge` when it holds more, ``OSError`` when
    it cannot be read (``ELOOP`` for a symbolic link, unless ``follow``).  ``check(stat)`` runs on the open file
    before it is read, and may raise to refuse it."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    try:
        if check is not None:
            check(os.fstat(fd))
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            raw = fh.read(limit + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(raw) > limit:
        raise TooLarge(path, limit)
    return raw


def write_whole(path: str, text: str, *, replace: bool = True, sync_folder: bool = False, sync: bool = True) -> None:
    """Write ``text`` (UTF-8) to ``path``, whole or not at all, mode 0600 (see the module's documentation).

    ``replace``: rename it over a file that is there (``os.replace``); without, ``path`` must not exist: the new
    file is linked into place (renamed, after a check, where the file system has no hard links), and
    ``FileExistsError`` is raised when a file is there.  ``sync_folder``: the folder is fsynced too (the rename is
    durable then on any file system, not only where a journal commits it).  ``sync`` off: no fsync at all (still
    whole or not at all: for a file that a crash may lose without harm).  Any other failure is the ``OSError``; the
    temporary file never stays behind."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(text)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        if replace:
            os.replace(tmp, path)
            tmp = ""  # renamed into place: nothing left to remove
        else:
            _place(tmp, path)  # linked (the temporary name then removed below), or renamed
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    if sync_folder:
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _place(tmp: str, path: str) -> None:
    """``tmp`` becomes ``path``, which must not exist (a link refuses an existing file at once)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError:  # no hard links here: a rename, after the check that the file is not there
        if os.path.lexists(path):
            raise FileExistsError(path) from None
        os.rename(tmp, path)
