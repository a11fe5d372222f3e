# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster's run records its pools on the cloudspace (:func:`pools_note`, ``pools cluster=<cluster> ...``: each
pool's replicas, size, image and vGPUs, and what a new machine's first boot installs; one note per cluster and
cloudspace, updated in place), so that the inventory can show a pool with no machine (scaled to zero) and its price
per machine, and a scale of one pool (``cluster`` with ``scale``, the pool_scale playbook) keeps the others as the
cluster's last converge left them.  That note is information, never proof: no machine is deleted or reservation
released because of it (a scale changes the one pool it names), and one that does not parse whole
(``poolsread.note_pools``) is nothing.

Here: what a pools note records (:class:`NotedCluster`, its pools and first boot, within the cluster spec's
bounds), the checks its writer and its reader (``poolsread``) both make of a record, and the writer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple
from urllib.parse import quote

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.naming import check_name
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.notes import NOTE_TITLE
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError

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
#: How a pools note and its first boot begin (the writer's spelling, which the reader finds).
POOLS_HEAD = "pools cluster="
BOOT_HEAD = " boot="

_POOL_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")  # the spec's LABEL
_GPU_TYPE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9 ._-]*[A-Za-z0-9])?")  # the spec's GPU_TYPE
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
    """A pools note read whole (``poolsread.note_record``): its cluster, its pools and its first boot (None: the
    note records none, the spec's defaults)."""

    cluster: str
    pools: tuple[NotedPool, ...]
    boot: NotedBoot | None


def within(value: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= value <= bounds[1]


def pool_problem(pool: NotedPool) -> str | None:
    """Why a pool cannot be written in a pools note (None: it can)."""
    if not isinstance(pool.name, str) or len(pool.name) > POOL_NAME_MAX or not _POOL_NAME.fullmatch(pool.name):
        return "name %r" % (pool.name,)
    for what, value, bounds in (
        ("replicas", pool.replicas, REPLICAS),
        ("vcpus", pool.vcpus, VCPUS),
        ("memory", pool.memory, MEMORY),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not within(value, bounds):
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
    if isinstance(count, bool) or not isinstance(count, int) or not within(count, GPU_COUNT):
        return "gpu count %r" % (count,)
    return None


def _is_int(value: object, low: int, high: int, none: bool = False) -> bool:
    if value is None:
        return none
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def made_problem(pool: NotedPool) -> str | None:
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


def boot_problem(boot: NotedBoot) -> str | None:
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
        problem = pool_problem(pool) or made_problem(pool)
        if problem is not None:
            raise InputError("pool %r cannot be recorded in a pools note: %s" % (pool.name, problem))
        kind = quote(pool.gpu_type, safe="") if pool.gpu_type is not None else "-"
        part = "%s:%d:%d:%d:%d:%s" % (pool.name, pool.replicas, pool.vcpus, pool.memory, pool.gpu_count, kind)
        made = (pool.image, pool.disk_size, pool.driver_version or None, pool.profile)
        if any(v is not None for v in made):
            part += ":%s:%s:%s:%s" % (_opt(pool.image), _opt(pool.disk_size), quote(pool.driver_version, safe=""),
                                      _opt(pool.profile))  # fmt: skip
        parts.append(part)
    content = "%s%s %s" % (POOLS_HEAD, cluster, ";".join(parts))
    if boot is not None:
        problem = boot_problem(boot)
        if problem is not None:
            raise InputError("the first boot cannot be recorded in a pools note: %s" % problem)
        content += "%s%d:%d:%d:%s" % (
            BOOT_HEAD,
            boot.attempts,
            boot.delay,
            boot.lock_timeout,
            ",".join(quote(p, safe="") for p in boot.packages),
        )
    return NOTE_TITLE, content
