# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ownership is in the name: a vGPU reservation's ``vgpu_name`` encoded and decoded, and the rule every name of
the collection's follows.

``capvco.<cluster>.<machine>.<slot:2 digits>.<created: 7 base-36 digits>``

- cluster and machine are names of letters, digits and ``-`` (no ``.`` or ``_``),
  so the ``.`` separators decode without ambiguity;
- a part too long for the platform's 64-character limit is shortened to a
  prefix, ``_`` and 8 hex digits of its SHA-256: still unique, still matched;
- ``created`` (epoch seconds) gives the reservation's age, which the platform
  does not report, so the orphan sweep can honour a grace period.

A name that does not decode is not ours and is never touched.  Every name is matched whole (``fullmatch``): ``$``
would match before a final newline, and ``"web\n"`` is not a name.  Machines are owned by their marker
(``markers``), cloudspaces by a note (``notes``).
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import NamedTuple

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError

PREFIX = "capvco"
MAX_NAME = 64
MAX_SLOT = 99
CLUSTER_MAX = 20
_TIME_DIGITS = 7
#: A cluster, machine or pool name, matched whole.
NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?")
_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_P = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:_[0-9a-f]{8})?"
#: A whole reservation name, matched once (the orphan scan decodes every reservation of a location).
_ENCODED = re.compile(r"%s\.(%s)\.(%s)\.([0-9]{2})\.([0-9a-z]{%d})" % (PREFIX, _P, _P, _TIME_DIGITS), re.ASCII)


class Owner(NamedTuple):
    """Who a reservation's name says owns it: the cluster and machine parts as they stand in the name (shortened
    when long), the slot, and when it was made (epoch seconds)."""

    cluster: str
    machine: str
    slot: int
    created: int


def _b36(n: int, width: int = _TIME_DIGITS) -> str:
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = _B36[r] + out
    return out.rjust(width, "0")[-width:]


def _shorten(value: str, limit: int) -> str:
    if len(value) <= limit:
        return value
    return value[: limit - 9].rstrip("-") + "_" + hashlib.sha256(value.encode()).hexdigest()[:8]


def check_name(kind: str, value: object) -> None:
    """Refuse a ``kind`` (cluster, machine, pool) name that is not letters, digits and '-' (not at either end)."""
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise InputError("invalid %s name %r: use letters, digits and '-' (not at either end)" % (kind, value))


def check_pool(pool: object) -> None:
    """Refuse a pool name that a machine's marker cannot carry (checked before anything is created)."""
    check_name("pool", pool)


def cluster_part(cluster: str) -> str:
    check_name("cluster", cluster)
    return _shorten(cluster, CLUSTER_MAX)


def machine_part(cluster: str, machine: str) -> str:
    """The machine as it stands in names of this cluster (shortened the same way every time)."""
    return machine_key(cluster_part(cluster), machine)


def machine_key(encoded_cluster: str, machine: str) -> str:
    """Like :func:`machine_part`, from a cluster as it stands in a decoded name (only its length matters: the room
    it leaves to the machine's part; ``reclaim.orphans.OrphanCheck`` relies on that)."""
    check_name("machine", machine)
    return _shorten(machine, MAX_NAME - (len(PREFIX) + 4 + 2 + _TIME_DIGITS + len(encoded_cluster)))


def encode(cluster: str, machine: str, slot: int, created: float | None = None) -> str:
    """The ``vgpu_name`` of slot ``slot`` of ``machine`` in ``cluster``."""
    if not isinstance(slot, int) or not 0 <= slot <= MAX_SLOT:
        raise InputError("invalid slot %r: an integer from 0 to %d" % (slot, MAX_SLOT))
    created = int(time.time() if created is None else created)
    return ".".join((PREFIX, cluster_part(cluster), machine_part(cluster, machine), "%02d" % slot, _b36(created)))


def decode(name: object) -> Owner | None:
    """The :class:`Owner` of a name, or None when the name is not ours."""
    if not isinstance(name, str) or len(name) > MAX_NAME:
        return None
    found = _ENCODED.fullmatch(name)
    if found is None:
        return None
    cluster, machine, slot, created = found.groups()
    return Owner(cluster, machine, int(slot), int(created, 36))


def owned_by(owner: Owner | None, cluster: str, machine: str | None = None) -> bool:
    """True when a decoded owner is ``cluster`` (and ``machine``, when given)."""
    if owner is None or owner.cluster != cluster_part(cluster):
        return False
    return machine is None or owner.machine == machine_part(cluster, machine)
