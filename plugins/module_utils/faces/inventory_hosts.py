# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventory plugin's contract (plain Python, no Ansible): what a host is called (:func:`hostname`), the groups
it is in (:func:`groups`) and its variables (:func:`host_vars`); a pool's group and its variables (:func:`pool_group`,
:func:`pool_vars`) and a cluster's (:func:`cluster_vars`).  Every string that reaches Ansible is scrubbed: what the
platform said (a VM's name, a currency) is shown with its controls escaped."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.inventory_records import HostRecord, PoolRecord
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub, scrub_tree

#: What ``hostnames`` may name, in the order the user gives: the VM's name, its first private address, the
#: address of its first external NIC.
HOSTNAME_SOURCES = ("name", "private_ip", "external_ip")
#: Every host variable is a key of :class:`HostRecord` with this prefix.
VAR_PREFIX = "whitesky_"
#: The group of the VMs no cluster owns.
UNOWNED = "unowned"
#: The names no host may take: Ansible's own groups and this plugin's fixed one.
RESERVED_GROUPS = ("all", "ungrouped", UNOWNED)
#: Every variable of a pool's group (:func:`pool_vars`) has this prefix.
POOL_VAR_PREFIX = "capvco_pool_"
#: The variable of a cluster's group that lists its pools (:func:`cluster_vars`).
POOLS_VAR = "capvco_pools"

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def hostname(host: HostRecord, order: Sequence[str] = ("name",)) -> str | None:
    """The host's name: the first of ``order`` (of :data:`HOSTNAME_SOURCES`) that gives a value, else None."""
    for source in order:
        if source == "name":
            value: str | None = host["name"] or None
        elif source == "private_ip":
            value = host["private_ips"][0] if host["private_ips"] else None
        elif source == "external_ip":
            value = host["external_ips"][0] if host["external_ips"] else None
        else:
            raise ValueError("unknown hostname source %r: use %s" % (source, ", ".join(HOSTNAME_SOURCES)))
        if value:
            return scrub(value)  # a VM's name is anyone's: shown (ansible-inventory --graph) with controls escaped
    return None


def safe_group(name: str) -> str:
    """A group name as Ansible makes it safe: each character that is not a letter, a digit or ``_`` becomes ``_``
    (``cluster_web-gpu`` is ``cluster_web_gpu``; cluster and pool names hold no ``_``, so two never meet)."""
    return _UNSAFE.sub("_", name)


def gpu_group(gpu_type: str) -> str:
    """The group of a GPU type: ``gpu_`` and the type in lower case, each run of other characters one ``_``
    (``NVIDIA A100`` is ``gpu_nvidia_a100``)."""
    return "gpu_" + re.sub(r"[^a-z0-9]+", "_", gpu_type.lower()).strip("_")


def groups(host: HostRecord) -> list[str]:
    """The groups of a host: ``cluster_<cluster>`` and ``pool_<pool>`` from its marker, or ``unowned``; a
    ``gpu_<type>`` per type of its vGPUs (the profile's id when the location no longer lists the profile)."""
    out = []
    if host["cluster"]:
        out.append(safe_group("cluster_" + host["cluster"]))
        if host["pool"]:
            out.append(safe_group("pool_" + host["pool"]))
    else:
        out.append(UNOWNED)
    types = {v["type"] or v["profile"] for v in host["vgpus"]}
    out.extend(sorted({gpu_group(t) for t in types if t}))
    return out


def host_vars(host: HostRecord) -> dict[str, Any]:
    """The host's variables: every key of the record, prefixed with :data:`VAR_PREFIX`, every string in it scrubbed
    (``scrub_tree``: what the platform said, a name or a currency, is shown with its controls escaped)."""
    return {VAR_PREFIX + key: scrub_tree(value) for key, value in host.items()}


def pool_group(pool: PoolRecord) -> str:
    """The group of a pool: ``pool_<pool>``, the group its machines are in (:func:`groups`), empty at zero."""
    return safe_group("pool_" + pool["name"])


def pool_vars(pool: PoolRecord) -> dict[str, Any]:
    """The variables of a pool's group: every key of the record but the pool's name, prefixed with
    :data:`POOL_VAR_PREFIX` (``capvco_pool_replicas``, ``capvco_pool_gpu``, ``capvco_pool_per_machine_hourly``,
    ``capvco_pool_currency``, ...)."""
    return {POOL_VAR_PREFIX + key: scrub_tree(value) for key, value in pool.items() if key != "name"}


def pools_by_group(pools: Iterable[PoolRecord]) -> dict[str, list[PoolRecord]]:
    """The pools of each pool group (by :func:`pool_group`): one pool, or several pools of one name (the control
    plane's ``cp`` of each cluster, two clusters' ``gpu``), whose group then holds no pool variables."""
    out: dict[str, list[PoolRecord]] = {}
    for pool in pools:
        out.setdefault(pool_group(pool), []).append(pool)
    return out


def cluster_vars(pools: Iterable[PoolRecord]) -> dict[str, dict[str, Any]]:
    """``{cluster group: its variables}``: :data:`POOLS_VAR`, the cluster's pools (each record but its cluster), in
    the notes' order."""
    out: dict[str, dict[str, Any]] = {}
    for pool in pools:
        group = out.setdefault(safe_group("cluster_" + pool["cluster"]), {POOLS_VAR: []})
        group[POOLS_VAR].append({k: scrub_tree(v) for k, v in pool.items() if k != "cluster"})
    return out
