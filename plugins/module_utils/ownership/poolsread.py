# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pools note read back (``poolsnote`` writes it): anyone may write a note on a cloudspace, so what a note says
is read whole or not at all (:func:`note_record`: the writer's one spelling, every number within the spec's bounds,
each pool once), and a cloudspace's notes tell a cluster's pools only by its one pools note (:func:`pools_in`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, unquote

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.naming import NAME
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.notes import NOTE_TITLE
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.poolsnote import (
    BOOT_HEAD,
    CLUSTER_MAX,
    DISK,
    DRIVER_MAX,
    GPU_COUNT,
    IMAGE,
    MEMORY,
    PACKAGE_MAX,
    POOLS_HEAD,
    POOLS_MAX,
    PROFILE_MAX,
    REPLICAS,
    VCPUS,
    NotedBoot,
    NotedCluster,
    NotedPool,
    boot_problem,
    made_problem,
    pool_problem,
    within,
)

#: The longest pools note read: one of the most pools, each at its longest, with the longest first boot (100
#: packages of 128 characters, each quoted at its longest), is shorter (about 44,000 characters; a spec's is
#: rarely above a few hundred).
POOLS_NOTE_MAX = 49152
_COUNT = re.compile(r"0|[1-9][0-9]{0,11}")


def pools_note_cluster(title: object, content: object) -> str | None:
    """The cluster whose pools note this is, by its head alone (``pools cluster=<cluster>`` and a space, or the
    end), or None: the note a cluster's run updates in place, whether the rest parses or not."""
    if title != NOTE_TITLE or not isinstance(content, str) or not content.startswith(POOLS_HEAD):
        return None
    cluster = content[len(POOLS_HEAD) : len(POOLS_HEAD) + CLUSTER_MAX + 1].partition(" ")[0]
    return cluster if len(cluster) <= CLUSTER_MAX and NAME.fullmatch(cluster) else None


def _number(text: str, bounds: tuple[int, int], digits: int = 7) -> int | None:
    if not _COUNT.fullmatch(text) or len(text) > digits:
        return None
    value = int(text)
    return value if within(value, bounds) else None


class _Bad(ValueError):
    """A field of a pools note that is not as its writer writes it."""


def _text(text: str, longest: int) -> str:
    """A quoted field as the writer writes it (one spelling only, at most ``longest`` characters), or :class:`_Bad`."""
    value = unquote(text)
    if quote(value, safe="") != text or len(value) > longest:
        raise _Bad(text)
    return value


def _noted_pool(part: str) -> NotedPool | None:
    fields = part.split(":")
    if len(fields) not in (6, 10):
        return None
    name, replicas_text, vcpus_text, memory_text, count_text, kind = fields[:6]
    replicas, vcpus = _number(replicas_text, REPLICAS), _number(vcpus_text, VCPUS)
    memory, gpu_count = _number(memory_text, MEMORY), _number(count_text, (0, GPU_COUNT[1]))
    if replicas is None or vcpus is None or memory is None or gpu_count is None:
        return None
    gpu_type = None if kind == "-" else unquote(kind)
    if gpu_type is not None and quote(gpu_type, safe="") != kind:  # one spelling only: the writer's
        return None
    pool = NotedPool(name, replicas, vcpus, memory, gpu_type, gpu_count)
    if len(fields) == 10:
        image_text, disk_text, driver_text, profile_text = fields[6:]
        image = None if image_text == "-" else _number(image_text, IMAGE, 12)
        disk = None if disk_text == "-" else _number(disk_text, DISK)
        if (image is None) != (image_text == "-") or (disk is None) != (disk_text == "-"):
            return None
        try:
            driver = _text(driver_text, DRIVER_MAX)
            profile = None if profile_text == "-" else _text(profile_text, PROFILE_MAX)
        except _Bad:
            return None
        if image is None and disk is None and not driver and profile is None:
            return None  # the writer says nothing of what is not given: one spelling only
        pool = pool._replace(image=image, disk_size=disk, driver_version=driver, profile=profile)
    return pool if pool_problem(pool) is None and made_problem(pool) is None else None


def _noted_boot(text: str) -> NotedBoot | None:
    fields = text.split(":")
    if len(fields) != 4:
        return None
    attempts, delay, lock_timeout = (_number(f, (0, 7200)) for f in fields[:3])
    if attempts is None or delay is None or lock_timeout is None:
        return None
    try:
        packages = tuple(_text(p, PACKAGE_MAX) for p in fields[3].split(",")) if fields[3] else ()
    except _Bad:
        return None
    boot = NotedBoot(packages, attempts, delay, lock_timeout)
    return boot if boot_problem(boot) is None else None


def note_record(title: object, content: object) -> NotedCluster | None:
    """A pools note (:func:`pools_note`) read whole: its cluster, pools and first boot, or None: the whole note
    must match, every number within the spec's bounds, every name and type the spec's, each pool once, at most
    :data:`POOLS_MAX` of them.  Anyone may write a note: what does not parse is nothing."""
    cluster = pools_note_cluster(title, content)
    if cluster is None or not isinstance(content, str) or len(content) > POOLS_NOTE_MAX:
        return None
    head = "%s%s " % (POOLS_HEAD, cluster)
    if not content.startswith(head):
        return None
    body, sep, boot_text = content[len(head) :].partition(BOOT_HEAD)
    boot = _noted_boot(boot_text) if sep else None
    if sep and boot is None:
        return None
    parts = body.split(";")
    if len(parts) > POOLS_MAX:
        return None
    pools = []
    for part in parts:
        pool = _noted_pool(part)
        if pool is None:
            return None
        pools.append(pool)
    if len({p.name for p in pools}) != len(pools):
        return None
    return NotedCluster(cluster, tuple(pools), boot)


def note_pools(title: object, content: object) -> tuple[str, tuple[NotedPool, ...]] | None:
    """``(cluster, pools)`` of a pools note (:func:`note_record`), or None when it does not parse whole."""
    got = note_record(title, content)
    return (got.cluster, got.pools) if got is not None else None


def pools_in(notes: Iterable[object]) -> tuple[dict[str, tuple[NotedPool, ...]], list[str]]:
    """``({cluster: pools}, refused)`` of a cloudspace's notes (``[{title, content, ...}]``): the pools each
    cluster's one pools note records, and the clusters whose pools cannot be told (a pools note of theirs that does
    not parse, or more than one), sorted."""
    found: dict[str, list[tuple[NotedPool, ...] | None]] = {}
    for note in notes:
        if not isinstance(note, dict):
            continue
        title, content = note.get("title"), note.get("content")
        cluster = pools_note_cluster(title, content)
        if cluster is not None:
            got = note_pools(title, content)
            found.setdefault(cluster, []).append(got[1] if got is not None else None)
    pools = {c: got[0] for c, got in found.items() if len(got) == 1 and got[0] is not None}
    return pools, sorted(set(found) - set(pools))
