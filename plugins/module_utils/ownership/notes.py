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
pool's replicas, size, image and vGPUs, and what a new machine's first boot installs; one note per cluster and
cloudspace, updated in place), so that the inventory can show a pool with no machine (scaled to zero) and its price
per machine, and a scale of one pool (``cluster`` with ``scale``, the pool_scale playbook) keeps the others as the
cluster's last converge left them.  That note is information, never proof: no machine is deleted or reservation
released because of it (a scale changes the one pool it names), and one that does not parse whole
(:func:`note_pools`) is nothing.
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
POOL_NAME_MAX = 20
GPU_TYPE_MAX = 64
#: The longest cluster name a pools note carries (a spec's is at most 32).
CLUSTER_MAX = 64
#: The longest pools note read: one of the most pools, each at its longest, with the longest first boot (100
#: packages of 128 characters, each quoted at its longest), is shorter (about 44,000 characters; a spec's is
#: rarely above a few hundred).
POOLS_NOTE_MAX = 49152
#: The most packages, and the longest package, a first boot records, and its attempts, delay and lock's wait (the
#: spec's bounds).
BOOT_PACKAGES = 100
PACKAGE_MAX = 128
BOOT_ATTEMPTS = (1, 20)
BOOT_DELAY = (0, 600)
BOOT_LOCK = (0, 7200)
#: The longest driver version and GPU profile a pool records (the spec's), the image ids and the disk sizes.
DRIVER_MAX = 32
PROFILE_MAX = 64
IMAGE = (1, 10**12 - 1)
DISK = (1, 65536)
_BOOT_HEAD = " boot="

_POOLS_HEAD = "pools cluster="
_POOL_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")  # the spec's LABEL
_GPU_TYPE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9 ._-]*[A-Za-z0-9])?")  # the spec's GPU_TYPE
_COUNT = re.compile(r"0|[1-9][0-9]{0,11}")
_PROFILE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")  # the spec's GPU_PROFILE
_DRIVER = re.compile(r"([0-9]+(\.[0-9]+)*)?")  # the spec's DRIVER_VERSION
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.:=~*-]*")  # the spec's PACKAGE


class NotedPool(NamedTuple):
    """One pool as a pools note records it: its name, how many machines the spec asks for (0 included), each
    machine's vCPUs and memory (MiB), and its vGPUs per machine by type (``gpu_type`` None and ``gpu_count`` 0 for
    a pool without GPUs); then what its machines are made from: the image id and the boot disk (GiB; None: not
    given), the driver version its first boot installs (``""``: none) and its ``gpu.profile`` (None: any)."""

    name: str
    replicas: int
    vcpus: int
    memory: int
    gpu_type: str | None
    gpu_count: int
    image: int | None = None
    disk_size: int | None = None
    driver_version: str = ""
    profile: str | None = None


class NotedBoot(NamedTuple):
    """What a pools note records of the cluster's first boot (the spec's ``first_boot``): the packages, the
    attempts of each install, the first retry's delay and the dpkg lock's wait, in seconds."""

    packages: tuple[str, ...]
    attempts: int
    delay: int
    lock_timeout: int


class NotedCluster(NamedTuple):
    """A pools note read whole (:func:`note_record`): its cluster, its pools and its first boot (None: the
    note records none, the spec's defaults)."""

    cluster: str
    pools: tuple[NotedPool, ...]
    boot: NotedBoot | None


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
        return None if pool.gpu_count == 0 else "gpu count %r without a type" % (pool.gpu_count,)
    if (
        not isinstance(pool.gpu_type, str)
        or len(pool.gpu_type) > GPU_TYPE_MAX
        or not _GPU_TYPE.fullmatch(pool.gpu_type)
    ):
        return "gpu type %r" % (pool.gpu_type,)
    count = pool.gpu_count
    if isinstance(count, bool) or not isinstance(count, int) or not _within(count, GPU_COUNT):
        return "gpu count %r" % (count,)
    return None


def _is_int(value: object, low: int, high: int, none: bool = False) -> bool:
    if value is None:
        return none
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _made_problem(pool: NotedPool) -> str | None:
    """Why what a pool's machines are made from cannot be written in a pools note (None: it can)."""
    if not _is_int(pool.image, *IMAGE, none=True):
        return "image %r" % (pool.image,)
    if not _is_int(pool.disk_size, *DISK, none=True):
        return "disk size %r" % (pool.disk_size,)
    driver, profile = pool.driver_version, pool.profile
    if not isinstance(driver, str) or len(driver) > DRIVER_MAX or not _DRIVER.fullmatch(driver):
        return "driver version %r" % (driver,)
    if profile is not None and (
        not isinstance(profile, str) or len(profile) > PROFILE_MAX or not _PROFILE.fullmatch(profile)
    ):
        return "gpu profile %r" % (profile,)
    return None


def _boot_problem(boot: NotedBoot) -> str | None:
    """Why a first boot cannot be written in a pools note (None: it can)."""
    packages = boot.packages
    if not isinstance(packages, tuple) or len(packages) > BOOT_PACKAGES:
        return "packages %r" % (packages,)
    if any(not isinstance(p, str) or len(p) > PACKAGE_MAX or not _PACKAGE.fullmatch(p) for p in packages):
        return "packages %r" % (packages,)
    for what, value, bounds in (
        ("attempts", boot.attempts, BOOT_ATTEMPTS),
        ("delay", boot.delay, BOOT_DELAY),
        ("lock_timeout", boot.lock_timeout, BOOT_LOCK),
    ):
        if not _is_int(value, *bounds):
            return "%s %r" % (what, value)
    return None


def _opt(value: object) -> str:
    return "-" if value is None else quote(str(value), safe="")


def pools_note(cluster: str, pools: Iterable[NotedPool], boot: NotedBoot | None = None) -> tuple[str, str]:
    """``(title, content)`` of the note that records ``cluster``'s pools on its cloudspace:
    ``pools cluster=<cluster> <pool>:<replicas>:<vcpus>:<memory>:<gpu count>:<gpu type>[:<image>:<disk>:<driver>:
    <profile>];... [boot=<attempts>:<delay>:<lock timeout>:<package>,...]``, the GPU type, driver, profile and each
    package URL-quoted (``NVIDIA%20A100``), ``-`` for what is not given (a pool without GPUs has a count of 0); the
    four fields of what a pool's machines are made from only when one is given, the first boot only when ``boot``
    is.  Information only (what the inventory shows of a pool with no machine, what a scale of one pool keeps of
    the others), never proof of anything."""
    check_name("cluster", cluster)
    if len(cluster) > CLUSTER_MAX:
        raise InputError("cluster name %r is longer than %d characters" % (cluster, CLUSTER_MAX))
    pools = list(pools)
    names = [p.name for p in pools]
    if not 1 <= len(pools) <= POOLS_MAX or len(set(names)) != len(names):
        raise InputError("a pools note holds 1 to %d pools of distinct names, got %r" % (POOLS_MAX, names))
    parts = []
    for pool in pools:
        problem = _pool_problem(pool) or _made_problem(pool)
        if problem is not None:
            raise InputError("pool %r cannot be recorded in a pools note: %s" % (pool.name, problem))
        kind = quote(pool.gpu_type, safe="") if pool.gpu_type is not None else "-"
        part = "%s:%d:%d:%d:%d:%s" % (pool.name, pool.replicas, pool.vcpus, pool.memory, pool.gpu_count, kind)
        made = (pool.image, pool.disk_size, pool.driver_version or None, pool.profile)
        if any(v is not None for v in made):
            part += ":%s:%s:%s:%s" % (_opt(pool.image), _opt(pool.disk_size), quote(pool.driver_version, safe=""),
                                      _opt(pool.profile))  # fmt: skip
        parts.append(part)
    content = "%s%s %s" % (_POOLS_HEAD, cluster, ";".join(parts))
    if boot is not None:
        problem = _boot_problem(boot)
        if problem is not None:
            raise InputError("the first boot cannot be recorded in a pools note: %s" % problem)
        content += "%s%d:%d:%d:%s" % (
            _BOOT_HEAD,
            boot.attempts,
            boot.delay,
            boot.lock_timeout,
            ",".join(quote(p, safe="") for p in boot.packages),
        )
    return NOTE_TITLE, content


def pools_note_cluster(title: object, content: object) -> str | None:
    """The cluster whose pools note this is, by its head alone (``pools cluster=<cluster>`` and a space, or the
    end), or None: the note a cluster's run updates in place, whether the rest parses or not."""
    if title != NOTE_TITLE or not isinstance(content, str) or not content.startswith(_POOLS_HEAD):
        return None
    cluster = content[len(_POOLS_HEAD) : len(_POOLS_HEAD) + CLUSTER_MAX + 1].partition(" ")[0]
    return cluster if len(cluster) <= CLUSTER_MAX and NAME.fullmatch(cluster) else None


def _number(text: str, bounds: tuple[int, int], digits: int = 7) -> int | None:
    if not _COUNT.fullmatch(text) or len(text) > digits:
        return None
    value = int(text)
    return value if _within(value, bounds) else None


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
    return pool if _pool_problem(pool) is None and _made_problem(pool) is None else None


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
    return boot if _boot_problem(boot) is None else None


def note_record(title: object, content: object) -> NotedCluster | None:
    """A pools note (:func:`pools_note`) read whole: its cluster, pools and first boot, or None: the whole note
    must match, every number within the spec's bounds, every name and type the spec's, each pool once, at most
    :data:`POOLS_MAX` of them.  Anyone may write a note: what does not parse is nothing."""
    cluster = pools_note_cluster(title, content)
    if cluster is None or not isinstance(content, str) or len(content) > POOLS_NOTE_MAX:
        return None
    head = "%s%s " % (_POOLS_HEAD, cluster)
    if not content.startswith(head):
        return None
    body, sep, boot_text = content[len(head) :].partition(_BOOT_HEAD)
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
