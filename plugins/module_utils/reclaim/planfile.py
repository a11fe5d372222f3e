# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A reviewed reclaim's plan file: where it is, who may have written it, and how it is written once and read back.

Plan, then act.  A plan is written in check mode only (:func:`check_new` refuses a plan file before anything is
read: outside check mode, over a file that exists, in a folder that does not), whole or not at all, mode 0600, never
over another (:func:`write`).  :func:`read` takes it back only from a regular file of the user applying it (or
root) that its group and others cannot write, within :data:`MAX_BYTES`, then checks the document
(``planload.loads``).  What a plan holds and how it is made is ``plandoc``'s; which of its entries are still
released, ``planmatch``'s.  The reclaims reach a plan through this module: the names they use of ``plandoc`` and
``planmatch`` are named here too.
"""

from __future__ import annotations

import errno
import functools
import os
import stat

from ansible_collections.whitesky.capvco.plugins.module_utils.platform import files
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.plandoc import (
    Plan,
    PlanScope,
    build,
    dumps,
    entry,
    scope_of,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.planload import loads, refuse
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.planmatch import GONE, match

__all__ = [
    "GONE",
    "MAX_BYTES",
    "Plan",
    "PlanScope",
    "build",
    "check_new",
    "entry",
    "match",
    "read",
    "resolve",
    "scope_of",
    "write",
]

#: The largest plan file read (a plan of 100,000 reservations is about 50 MB).
MAX_BYTES = 128 * 1024 * 1024


def resolve(path: str) -> str:
    """A plan file's path as the module uses it: ``~`` expanded, absolute.  A relative path is refused: a module
    works in the playbook's folder (for a playbook run by its name, inside the installed collection), never where the
    person ran ``ansible-playbook``; the collection's playbooks make a relative path absolute against that
    directory before they call the module."""
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        raise InputError(
            "plan file %r is a relative path: give an absolute one (the playbooks gpu_orphans and cluster_delete take "
            "a relative one from the directory ansible-playbook was started in)" % path
        )
    return os.path.normpath(path)


def read(path: str, location: str) -> Plan:
    """The plan in file ``path``, made for ``location`` (:func:`loads`); an unreadable file is refused, naming it.

    Who can write the plan decides what is released, and its digest can be recomputed by whoever edits it (it
    detects accidents, not forgery).  So, as ssh does with its keys, a plan file is refused when it is a symbolic
    link, not a regular file, writable by its group or by others, or owned by another user than the one applying
    it (or root)."""
    path = resolve(path)
    try:
        raw = files.read_bounded(path, MAX_BYTES, follow=False, check=functools.partial(_check_file, path))
    except files.TooLarge:
        raise refuse(path, "is over %d bytes: not a plan this collection wrote" % MAX_BYTES) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refuse(path, "is a symbolic link: give the plan file itself") from None
        raise refuse(path, "cannot be read (%s)" % (exc.strerror or exc)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse(path, "is not a plan: it is not UTF-8 text") from None
    return loads(text, path, location)


def _check_file(path: str, st: os.stat_result) -> None:
    """Refuse a plan file that another user could have written (see :func:`read`)."""
    if not stat.S_ISREG(st.st_mode):
        raise refuse(path, "is not a regular file")
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        raise refuse(path, "is owned by uid %d, not by the user applying it (uid %d)" % (st.st_uid, me))
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise refuse(
            path,
            "is writable by %s (mode %04o): anyone who can write it decides what is released; chmod go-w it, "
            "or make the plan again" % ("others" if st.st_mode & stat.S_IWOTH else "its group", st.st_mode & 0o7777),
        )


def check_new(path: str, check_mode: bool) -> None:
    """Refuse, before anything is read, a plan file that cannot be written: outside check mode (a plan is made for
    review, not with a release), over a file that exists, or in a folder that does not."""
    if not check_mode:
        raise InputError(
            "plan_file %s: a plan is written in check mode only (check_mode: true, or --check), to be reviewed, then "
            "applied with plan=FILE; nothing was read or changed" % resolve(path)
        )
    path = resolve(path)
    if os.path.lexists(path):
        raise InputError(
            "plan file %s exists: a plan is never overwritten (the plan that was reviewed must be the one applied); "
            "remove it, or give another path" % path
        )
    if not os.path.isdir(os.path.dirname(path)):
        raise InputError("plan file %s cannot be written: folder %s does not exist" % (path, os.path.dirname(path)))


def write(path: str, plan: Plan) -> str:
    """Write the plan to ``path`` (on the machine the module runs on: the controller) and return its absolute path.

    Mode 0600, written whole or not at all (``files.write_whole``: a temporary file in the same folder, then linked
    into place), so a reader never sees half a plan.  A file that exists is never replaced (a plan that was reviewed
    is the one applied): refused, naming it."""
    path = resolve(path)
    if os.path.lexists(path):
        raise InputError(
            "plan file %s exists: a plan is never overwritten (the plan that was reviewed must be the one applied); "
            "remove it, or give another path" % path
        )
    try:
        files.write_whole(path, dumps(plan), replace=False)
    except FileExistsError:
        raise InputError(
            "plan file %s exists: a plan is never overwritten; remove it, or give another path" % path
        ) from None
    except OSError as exc:
        raise WhiteskyError("plan file %s could not be written (%s)" % (path, exc.strerror or exc)) from None
    return path
