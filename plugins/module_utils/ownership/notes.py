# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cloudspace a cluster creates is owned by a note written on it at once (the platform keeps notes on
cloudspaces): title ``capvco/v1``, content ``creator cluster=<cluster>`` (:func:`creator_note`).  A cluster that has
machines in a cloudspace it did not create says so with a note ``member cluster=<cluster>`` (:func:`member_note`),
written the first time it holds its lease there: with the creator notes, the clusters a cloudspace holds are read
with one call, so the inventory reads the markers of those clusters' VMs only.  Neither note is proof that a
machine is a cluster's: the marker is (``markers``).  A creator torn down while other clusters' machines remain
hands the cloudspace over (:func:`handover_note`).

A cluster's run also records its pools on the cloudspace (:func:`pools_note`, ``pools cluster=<cluster> ...``: each
pool's replicas, size, vGPUs and boot disk, one note per cluster and cloudspace, updated in place), so that the
inventory can show a pool with no machine (scaled to zero) and its price per machine.  That note is information,
never proof: nothing is deleted or released because of it, and one that does not parse whole (:func:`note_pools`)
is nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple
from urllib.parse import quote, unquote

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.markers import MARKER
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.naming import NAME, check_name
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError

NOTE_TITLE = MARKER


def creator_note(cluster: str) -> tuple[str, str]:
    """``(title, content)`` of the note that records ``cluster`` as the creator of a cloudspace."""
    check_name("cluster", cluster)
    return NOTE_TITLE, "creator cluster=" + cluster


def member_note(cluster: str) -> tuple[str, str]:
    """``(title, content)`` of the note that records ``cluster`` as having machines in a cloudspace."""
    check_name("cluster", cluster)
    return NOTE_TITLE, "member cluster=" + cluster


def handover_note(creator: str, successor: str) -> tuple[str, str]:
    """``(title, content)`` of the note by which the cloudspace's creator ``creator``, torn down while the machines
    of cluster ``successor`` are still in the cloudspace, hands it over: ``successor``'s teardown deletes it."""
    check_name("cluster", creator)
    check_name("cluster", successor)
    return NOTE_TITLE, "handover from=%s to=%s" % (creator, successor)


def note_handover(title: object, content: object) -> tuple[str, str] | None:
    """``(creator, successor)`` of a handover note, or None (the whole note must match)."""
    if title != NOTE_TITLE or not isinstance(content, str) or not content.startswith("handover from="):
        return None
    head, sep, successor = content[len("handover from=") :].partition(" to=")
    if not sep or not NAME.fullmatch(head) or not NAME.fullmatch(successor):
        return None
    return head, successor


def note_cluster(title: object, content: object) -> str | None:
    """The cluster a creator or member note names, or None (the whole note must match)."""
    if title != NOTE_TITLE or not isinstance(content, str):
        return None
    head, sep, cluster = content.partition("=")
    if head not in ("creator cluster", "member cluster") or not sep or not NAME.fullmatch(cluster):
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
    if head != "creator cluster" or not sep or not NAME.fullmatch(cluster):
        return None
    return cluster


# --- the pools note: what a cluster's pools are, information only -------------------------------------------------

#: The most pools a note records: the control plane and the spec's 20 worker pools (``clusterspec.MAX_POOLS``).
POOLS_MAX = 21
#: The bounds of a pool as the cluster spec has them (``clusterspec``; a unit test compares the two): replicas,
#: vCPUs, memory in MiB, vGPUs per machine (0: no GPU), and the longest pool name and GPU type.
REPLICAS = (0, 100)
VCPUS = (1, 256)
MEMORY = (512, 4194304)
GPU_COUNT = (1, 16)
#: A machine's boot disk in GiB (the spec's ``diskSize``).
DISK = (1, 65536)
POOL_NAME_MAX = 20
GPU_TYPE_MAX = 64
#: The longest cluster name a pools note carries (a spec's is at most 32).
CLUSTER_MAX = 64
#: The longest pools note read: one of the most pools, each at its longest, is shorter (about 5,000 characters).
POOLS_NOTE_MAX = 8192

_POOLS_HEAD = "pools cluster="
_POOL_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")  # the spec's LABEL
_GPU_TYPE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9 ._-]*[A-Za-z0-9])?")  # the spec's GPU_TYPE
_COUNT = re.compile(r"0|[1-9][0-9]{0,6}")


class NotedPool(NamedTuple):
    """One pool as a pools note records it: its name, how many machines the spec asks for (0 included), each
    machine's vCPUs and memory (MiB), its vGPUs per machine by type (``gpu_type`` None and ``gpu_count`` 0 for
    a pool without GPUs), and the GiB of each machine's boot disk (None: not recorded; a note written before it
    was has none)."""

    name: str
    replicas: int
    vcpus: int
    memory: int
    gpu_type: str | None
    gpu_count: int
    disk: int | None = None


def _within(value: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= value <= bounds[1]


def _pool_problem(pool: NotedPool) -> str | None:
    """Why a pool cannot be written in a pools note (None: it can)."""
    if not isinstance(pool.name, str) or len(pool.name) > POOL_NAME_MAX or not _POOL_NAME.fullmatch(pool.name):
        return "name %r" % (pool.name,)
    for what, value, bounds in (
        ("replicas", pool.replicas, REPLICAS),
        ("vcpus", pool.vcpus, VCPUS),
        ("memory", pool.memory, MEMORY),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not _within(value, bounds):
            return "%s %r" % (what, value)
    if pool.gpu_type is None:
        return _disk_problem(pool.disk) if pool.gpu_count == 0 else "gpu count %r without a type" % (pool.gpu_count,)
    if (
        not isinstance(pool.gpu_type, str)
        or len(pool.gpu_type) > GPU_TYPE_MAX
        or not _GPU_TYPE.fullmatch(pool.gpu_type)
    ):
        return "gpu type %r" % (pool.gpu_type,)
    count = pool.gpu_count
    if isinstance(count, bool) or not isinstance(count, int) or not _within(count, GPU_COUNT):
        return "gpu count %r" % (count,)
    return _disk_problem(pool.disk)


def _disk_problem(disk: object) -> str | None:
    if disk is None or (isinstance(disk, int) and not isinstance(disk, bool) and _within(disk, DISK)):
        return None
    return "disk %r" % (disk,)


def pools_note(cluster: str, pools: Iterable[NotedPool]) -> tuple[str, str]:
    """``(title, content)`` of the note that records ``cluster``'s pools on its cloudspace:
    ``pools cluster=<cluster> <pool>:<replicas>:<vcpus>:<memory>:<gpu count>:<gpu type>[:<disk>];...``, the GPU
    type URL-quoted (``NVIDIA%20A100``), ``-`` with a count of 0 for a pool without GPUs, and the boot disk's GiB
    when it is known.  Information only (what the inventory shows of a pool with no machine, and prices), never
    proof of anything."""
    check_name("cluster", cluster)
    if len(cluster) > CLUSTER_MAX:
        raise InputError("cluster name %r is longer than %d characters" % (cluster, CLUSTER_MAX))
    pools = list(pools)
    names = [p.name for p in pools]
    if not 1 <= len(pools) <= POOLS_MAX or len(set(names)) != len(names):
        raise InputError("a pools note holds 1 to %d pools of distinct names, got %r" % (POOLS_MAX, names))
    parts = []
    for pool in pools:
        problem = _pool_problem(pool)
        if problem is not None:
            raise InputError("pool %r cannot be recorded in a pools note: %s" % (pool.name, problem))
        kind = quote(pool.gpu_type, safe="") if pool.gpu_type is not None else "-"
        part = "%s:%d:%d:%d:%d:%s" % (pool.name, pool.replicas, pool.vcpus, pool.memory, pool.gpu_count, kind)
        parts.append(part if pool.disk is None else "%s:%d" % (part, pool.disk))
    return NOTE_TITLE, "%s%s %s" % (_POOLS_HEAD, cluster, ";".join(parts))


def pools_note_cluster(title: object, content: object) -> str | None:
    """The cluster whose pools note this is, by its head alone (``pools cluster=<cluster>`` and a space, or the
    end), or None: the note a cluster's run updates in place, whether the rest parses or not."""
    if title != NOTE_TITLE or not isinstance(content, str) or not content.startswith(_POOLS_HEAD):
        return None
    cluster = content[len(_POOLS_HEAD) : len(_POOLS_HEAD) + CLUSTER_MAX + 1].partition(" ")[0]
    return cluster if len(cluster) <= CLUSTER_MAX and NAME.fullmatch(cluster) else None


def _number(text: str, bounds: tuple[int, int]) -> int | None:
    if not _COUNT.fullmatch(text):
        return None
    value = int(text)
    return value if _within(value, bounds) else None


def _noted_pool(part: str) -> NotedPool | None:
    fields = part.split(":")
    if len(fields) not in (6, 7):
        return None
    name, replicas_text, vcpus_text, memory_text, count_text, kind = fields[:6]
    disk = _number(fields[6], DISK) if len(fields) == 7 else None
    if len(fields) == 7 and disk is None:
        return None
    replicas, vcpus = _number(replicas_text, REPLICAS), _number(vcpus_text, VCPUS)
    memory, gpu_count = _number(memory_text, MEMORY), _number(count_text, (0, GPU_COUNT[1]))
    if replicas is None or vcpus is None or memory is None or gpu_count is None:
        return None
    gpu_type = None if kind == "-" else unquote(kind)
    if gpu_type is not None and quote(gpu_type, safe="") != kind:  # one spelling only: the writer's
        return None
    pool = NotedPool(name, replicas, vcpus, memory, gpu_type, gpu_count, disk)
    return pool if _pool_problem(pool) is None else None


def note_pools(title: object, content: object) -> tuple[str, tuple[NotedPool, ...]] | None:
    """``(cluster, pools)`` of a pools note (:func:`pools_note`), or None: the whole note must match, every number
    within the spec's bounds, every name and type the spec's, each pool once, at most :data:`POOLS_MAX` of them.
    Anyone may write a note: what does not parse is nothing."""
    cluster = pools_note_cluster(title, content)
    if cluster is None or not isinstance(content, str) or len(content) > POOLS_NOTE_MAX:
        return None
    head = "%s%s " % (_POOLS_HEAD, cluster)
    if not content.startswith(head):
        return None
    parts = content[len(head) :].split(";")
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
    return cluster, tuple(pools)


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
