# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checked spec, typed and frozen: what the cluster core plans from (pure Python).

``speccheck.check`` returns a :class:`ClusterSpec` made here (:func:`from_document`) of the document it checked:
who the cluster is and where, its pools (the control plane first) as :class:`PoolSpec` records, ``spec/pool.py``'s
``Pool`` whose name and size are known, which the machines core takes as they are, what its machines' first boot
installs, and the checked document whole (what the module returns).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.spec.clusterspec import CONTROL_PLANE
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import GpuSpec, Pool
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.schema import copy_value


def pools(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every pool of a checked spec, the control plane first, with its machines' names: ``[{name, names, vcpus,
    memory, image, diskSize, gpu}]`` (``gpu`` None for a pool without GPUs)."""
    out: list[dict[str, Any]] = []
    name = spec["cluster"]["name"]
    for pool in [dict(spec["control_plane"], name=CONTROL_PLANE)] + spec["pools"]:
        machines = ["%s-%s-%d" % (name, pool["name"], i) for i in range(pool["replicas"])]
        out.append(dict(pool, names=machines, gpu=pool.get("gpu")))
    return out


@dataclass(frozen=True)
class PoolSpec(Pool):
    """One pool of a checked spec, the control plane's (``cp``) included: a :class:`~spec.pool.Pool` whose name and
    size are known (the spec requires them), its machines' names in order."""

    name: str
    vcpus: int
    memory: int


@dataclass(frozen=True)
class ClusterSpec:
    """A cluster spec, checked (``speccheck.check``): who the cluster is, where, its pools (the control plane
    first), what its machines' first boot installs, and ``document``, the checked spec whole (the module's
    ``spec``)."""

    name: str
    location: str
    cloudspace: str
    pools: tuple[PoolSpec, ...]
    first_boot: Mapping[str, Any]
    document: Mapping[str, Any]
    #: ``remove_pools``: the pools no longer listed whose machines a converge deletes
    remove_pools: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """Every machine's name, pool by pool."""
        return [n for pool in self.pools for n in pool.names]

    def as_dict(self) -> dict[str, Any]:
        """The checked spec as a new plain dict (what the module returns and a spec file holds)."""
        return copy_value(self.document)


def from_document(doc: dict[str, Any]) -> ClusterSpec:
    """The :class:`ClusterSpec` of a checked spec's document (``speccheck.check``'s, with its defaults)."""
    out = []
    for pool in pools(doc):
        g = pool.get("gpu")
        out.append(
            PoolSpec(
                name=pool["name"],
                names=tuple(pool["names"]),
                vcpus=pool["vcpus"],
                memory=pool["memory"],
                image=pool.get("image"),
                disk_size=pool.get("diskSize"),
                gpu=GpuSpec(g["type"], g["count"], g["driverVersion"], g.get("profile")) if g else None,
            )
        )
    c = doc["cluster"]
    return ClusterSpec(
        name=c["name"],
        location=c["location"],
        cloudspace=c["cloudspace"],
        pools=tuple(out),
        first_boot=MappingProxyType(copy_value(doc["first_boot"])),
        document=MappingProxyType(doc),
        remove_pools=tuple(doc.get("remove_pools") or ()),
    )
