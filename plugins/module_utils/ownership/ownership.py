# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ownership is in the name: encode and decode a vGPU reservation's ``vgpu_name``.

``capvco.<cluster>.<machine>.<slot:2 digits>.<created: 7 base-36 digits>``

- cluster and machine are names of letters, digits and ``-`` (no ``.`` or ``_``),
  so the ``.`` separators decode without ambiguity;
- a part too long for the platform's 64-character limit is shortened to a
  prefix, ``_`` and 8 hex digits of its SHA-256: still unique, still matched;
- ``created`` (epoch seconds) gives the reservation's age, which the platform
  does not report, so the orphan sweep can honour a grace period.

A name that does not decode is not ours and is never touched.

Machines are owned by a marker in the VM's ``description``, written when the
collection creates the VM (the platform has no tags):

``capvco/v1 cluster=<cluster> [pool=<pool>]``

It is read back with ``getVirtualMachineInfo`` (listings do not carry the
description) and compared whole: cluster ``web`` never matches ``web-gpu``'s
machines, nor a VM made by hand.

A cluster's machines are also named ``<cluster>-<rest>`` (:func:`check_machine_name`; the collection creates no
other): a read of a cluster's machines describes only the VMs of such names, so that it costs one call per VM of
the cluster, never one per VM of its neighbours.  The name is a filter, never proof: ``web-gpu-cp-0`` is read for
cluster ``web`` too, and its marker (``web-gpu``) says it is not ``web``'s.

A cloudspace a cluster creates is owned by a note written on it at once (the
platform keeps notes on cloudspaces): title ``capvco/v1``, content
``creator cluster=<cluster>`` (:func:`creator_note`).  A cluster that has machines in a cloudspace it did not
create says so with a note ``member cluster=<cluster>`` (:func:`member_note`), written the first time it holds its
lease there: with the creator notes, the clusters a cloudspace holds are read with one call, so the inventory
reads the markers of those clusters' VMs only.  Neither note is proof that a machine is a cluster's: the marker is.

Every name is matched whole (``fullmatch``): ``$`` would match before a final
newline, and ``"web\n"`` is not a name.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterable
from typing import NamedTuple

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError

PREFIX = "capvco"
MAX_NAME = 64
MAX_SLOT = 99
CLUSTER_MAX = 20
_TIME_DIGITS = 7
_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?")
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


class Marker(NamedTuple):
    """What a machine's marker says: its cluster, and its pool (None when it names none)."""

    cluster: str
    pool: str | None


MARKER = "capvco/v1"


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


def _check(kind: str, value: object) -> None:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise InputError("invalid %s name %r: use letters, digits and '-' (not at either end)" % (kind, value))


def check_pool(pool: object) -> None:
    """Refuse a pool name that a machine's marker cannot carry (checked before anything is created)."""
    _check("pool", pool)


def cluster_part(cluster: str) -> str:
    _check("cluster", cluster)
    return _shorten(cluster, CLUSTER_MAX)


def machine_part(cluster: str, machine: str) -> str:
    """The machine as it stands in names of this cluster (shortened the same way every time)."""
    return machine_key(cluster_part(cluster), machine)


def machine_key(encoded_cluster: str, machine: str) -> str:
    """Like :func:`machine_part`, from a cluster as it stands in a decoded name."""
    _check("machine", machine)
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


def machine_marker(cluster: str, pool: str | None = None) -> str:
    """The ``description`` a machine of ``cluster`` is created with."""
    _check("cluster", cluster)
    parts = [MARKER, "cluster=" + cluster]
    if pool:
        _check("pool", pool)
        parts.append("pool=" + pool)
    return " ".join(parts)


def machine_name_prefix(cluster: str) -> str:
    """What every machine name of ``cluster`` starts with: the cluster's name and ``-``."""
    _check("cluster", cluster)
    return cluster + "-"


def may_own(cluster: str, name: object) -> bool:
    """True when a VM named ``name`` may be one of ``cluster``'s machines (its name follows the rule); only its
    marker says whether it is."""
    prefix = machine_name_prefix(cluster)
    return isinstance(name, str) and name.startswith(prefix) and len(name) > len(prefix)


def check_machine_name(cluster: str, name: object) -> None:
    """Refuse a machine name of ``cluster`` that does not start with ``<cluster>-``."""
    if not may_own(cluster, name):
        raise InputError(
            "machine name %r does not start with the cluster's name and '-' (%r): a cluster's machines are named "
            "<cluster>-<rest>, e.g. %r, so that reading a cluster costs one call per machine of its own, not per VM "
            "of the cloudspace" % (name, machine_name_prefix(cluster), machine_name_prefix(cluster) + "gpu-0")
        )


def check_machine_names(cluster: str, names: Iterable[object]) -> None:
    """Refuse, naming every one, the machine names of ``cluster`` that do not start with ``<cluster>-``."""
    bad = [name for name in names if not may_own(cluster, name)]
    if len(bad) == 1:
        check_machine_name(cluster, bad[0])
    if bad:
        raise InputError(
            "machine names %s do not start with the cluster's name and '-' (%r): a cluster's machines are named "
            "<cluster>-<rest>, so that reading a cluster costs one call per machine of its own, not per VM of the "
            "cloudspace" % (", ".join(repr(n) for n in bad), machine_name_prefix(cluster))
        )


def parse_marker(description: object) -> Marker | None:
    """The :class:`Marker` a VM's description carries, or None when it carries none."""
    if not isinstance(description, str):
        return None
    tokens = description.split(" ")
    if tokens[0] != MARKER:
        return None
    fields: dict[str, str] = {}
    for token in tokens[1:]:
        key, sep, value = token.partition("=")
        if not sep or key in fields or key not in ("cluster", "pool"):
            return None
        fields[key] = value
    if not _NAME.fullmatch(fields.get("cluster", "")):
        return None
    if "pool" in fields and not _NAME.fullmatch(fields["pool"]):
        return None
    return Marker(fields["cluster"], fields.get("pool"))


def machine_owned(description: object, cluster: str) -> bool:
    """True when a VM's description says it is ``cluster``'s (the whole name, never a prefix)."""
    marker = parse_marker(description)
    return marker is not None and marker.cluster == cluster


NOTE_TITLE = MARKER


def creator_note(cluster: str) -> tuple[str, str]:
    """``(title, content)`` of the note that records ``cluster`` as the creator of a cloudspace."""
    _check("cluster", cluster)
    return NOTE_TITLE, "creator cluster=" + cluster


def member_note(cluster: str) -> tuple[str, str]:
    """``(title, content)`` of the note that records ``cluster`` as having machines in a cloudspace."""
    _check("cluster", cluster)
    return NOTE_TITLE, "member cluster=" + cluster


def handover_note(creator: str, successor: str) -> tuple[str, str]:
    """``(title, content)`` of the note by which the cloudspace's creator ``creator``, torn down while the machines
    of cluster ``successor`` are still in the cloudspace, hands it over: ``successor``'s teardown deletes it."""
    _check("cluster", creator)
    _check("cluster", successor)
    return NOTE_TITLE, "handover from=%s to=%s" % (creator, successor)


def note_handover(title: object, content: object) -> tuple[str, str] | None:
    """``(creator, successor)`` of a handover note, or None (the whole note must match)."""
    if title != NOTE_TITLE or not isinstance(content, str) or not content.startswith("handover from="):
        return None
    head, sep, successor = content[len("handover from=") :].partition(" to=")
    if not sep or not _NAME.fullmatch(head) or not _NAME.fullmatch(successor):
        return None
    return head, successor


def note_cluster(title: object, content: object) -> str | None:
    """The cluster a creator or member note names, or None (the whole note must match)."""
    if title != NOTE_TITLE or not isinstance(content, str):
        return None
    head, sep, cluster = content.partition("=")
    if head not in ("creator cluster", "member cluster") or not sep or not _NAME.fullmatch(cluster):
        return None
    return cluster


def clusters_in(notes: Iterable[object]) -> set[str]:
    """The clusters a cloudspace's notes (``[{title, content, ...}]``) name as its creator or as having machines in
    it (:func:`note_cluster`): where the inventory reads markers."""
    found = (note_cluster(n.get("title"), n.get("content")) for n in notes if isinstance(n, dict))
    return {c for c in found if c is not None}


def note_creator(title: object, content: object) -> str | None:
    """The cluster a cloudspace note records as the cloudspace's creator, or None (the whole note must match)."""
    if title != NOTE_TITLE or not isinstance(content, str):
        return None
    head, sep, cluster = content.partition("=")
    if head != "creator cluster" or not sep or not _NAME.fullmatch(cluster):
        return None
    return cluster
