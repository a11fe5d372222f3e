# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a cluster records of its spec on its cloudspace (its pools note, ``poolsnote``), and the spec made from that
record (pure Python): a scale of one pool (``cluster`` with ``scale``) keeps the other pools as the cluster's last
converge left them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import poolsnote
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.clusterspec import CONTROL_PLANE, FIRST_BOOT

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.typed import ClusterSpec


def record(spec: ClusterSpec) -> poolsnote.NotedCluster:
    """What the cluster's pools note records of ``spec``: every pool (the control plane first) with what its
    machines are made from, and the first boot when it is not the default one (``poolsnote.pools_note``)."""
    pools = tuple(
        poolsnote.NotedPool(
            p.name,
            len(p.names),
            p.vcpus,
            p.memory,
            p.gpu.type if p.gpu else None,
            p.gpu.count if p.gpu else 0,
            p.image,
            p.disk_size,
            p.gpu.driver_version if p.gpu else "",
            p.gpu.profile if p.gpu else None,
        )
        for p in spec.pools
    )
    fb = spec.first_boot
    defaults = {k: f.default for k, f in FIRST_BOOT.items()}
    boot = None
    if any(fb.get(k) != v for k, v in defaults.items()):
        boot = poolsnote.NotedBoot(tuple(fb["packages"]), fb["attempts"], fb["delay"], fb["lock_timeout"])
    return poolsnote.NotedCluster(spec.name, pools, boot)


def from_record(cluster: Mapping[str, Any], recorded: poolsnote.NotedCluster) -> dict[str, Any]:
    """The spec (as a user writes it, to ``speccheck.check``) of ``cluster`` (its ``cluster`` key) that its pools note
    ``recorded``: the control plane and every pool as the cluster's last converge left them, and its first boot."""
    out: dict[str, Any] = {"cluster": dict(cluster), "pools": []}
    for p in recorded.pools:
        pool: dict[str, Any] = {"replicas": p.replicas, "vcpus": p.vcpus, "memory": p.memory}
        pool.update({k: v for k, v in (("image", p.image), ("diskSize", p.disk_size)) if v is not None})
        if p.gpu_type is not None:
            pool["gpu"] = {"type": p.gpu_type, "count": p.gpu_count, "driverVersion": p.driver_version}
            if p.profile is not None:
                pool["gpu"]["profile"] = p.profile
        if p.name == CONTROL_PLANE:
            out["control_plane"] = pool
        else:
            out["pools"].append(dict(name=p.name, **pool))
    if recorded.boot is not None:
        b = recorded.boot
        out["first_boot"] = {
            "packages": list(b.packages),
            "attempts": b.attempts,
            "delay": b.delay,
            "lock_timeout": b.lock_timeout,
        }
    return out
