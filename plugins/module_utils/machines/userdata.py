# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a new machine boots with: its user data, the first-boot script for its options (a GPU pool's with its
driver step), checked to fit the platform's query string (pure Python)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool


@dataclass(frozen=True)
class Boot:
    """What new machines boot with: the first-boot options (``first_boot``), the cluster's ``bootstrap_data``, the
    node's ``provider_id`` and ``node_labels``, or raw ``user_data`` instead of all of them."""

    first_boot: dict[str, Any] = field(default_factory=dict)
    bootstrap_data: str | None = None
    provider_id: str | None = None
    user_data: str | None = None
    node_labels: dict[str, str] = field(default_factory=dict)


def user_data(boot: Boot, what: str) -> str:
    """The VM's user data: the first-boot script for ``boot`` (or its raw ``user_data``), checked to fit the
    platform's query string (``what`` names the machine or pool in the error)."""
    return render.check_user_data(boot.user_data or _render(boot, boot.first_boot or {}), what)


def _render(boot: Boot, fb: Mapping[str, Any]) -> str:
    retries = {k: fb[k] for k in ("attempts", "delay", "lock_timeout") if fb.get(k) is not None}
    return render.render(
        fb.get("packages") or [],
        boot.bootstrap_data,
        provider_id=boot.provider_id,
        gpu_driver=fb.get("gpu_driver"),
        node_labels=boot.node_labels,
        **retries,
    )


def pool_first_boot(first_boot: Mapping[str, Any] | None, pool: Pool) -> dict[str, Any]:
    """A pool's first boot: with ``gpu`` (a count above 0), the driver step for its ``driver_version`` (pinned
    install and verification; empty: the verification of a driver the image has) and its GPU count."""
    fb = dict(first_boot or {})
    count = pool.gpu.count if pool.gpu else 0
    if pool.gpu and count > 0:
        driver = dict(fb.get("gpu_driver") or {})
        fb["gpu_driver"] = dict(driver, version=pool.gpu.driver_version, count=count)
    return fb


def pool_boot(boot: Boot, pool: Pool) -> Boot:
    """What a pool's new machines boot with: its first boot (a GPU pool's has its driver step), and a GPU pool's node
    label (:data:`render.GPU_LABEL`, its GPU type) beside the cluster's."""
    labels = dict(boot.node_labels, **render.gpu_node_labels(pool.gpu.type if pool.gpu else None))
    return replace(boot, first_boot=pool_first_boot(boot.first_boot, pool), node_labels=labels)


def pool_user_data(boot: Boot, pools: Sequence[Pool]) -> dict[int, str]:
    """``{index: user data}`` of the pools with machines to create (:func:`pool_boot`), checked to fit."""
    return {
        i: user_data(pool_boot(boot, pool), "pool %r" % (pool.name or "")) for i, pool in enumerate(pools) if pool.names
    }
