# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pool of machines, typed (pure Python): the one record the machines core converges and the cluster spec is
made of, and the one shape of a pool as a person is shown it.

:class:`Pool` is what the machines core (``machines.pools``, ``machines.machine``, ``machines.userdata``,
``machines.catalog``) is handed: a pool's name, its machines' names, their size (None: not given, refused only for a
machine to create) and their vGPUs (:class:`GpuSpec`).  A ``machine_pool`` call builds them from its options, the
``machine`` module one of a single machine; a checked cluster spec's pools are :class:`Pool` records already
(``typed.PoolSpec``, whose name and size are known), handed on as they are.

:class:`PoolShown` and :class:`PoolGpu` are what is shown of a pool, priced: the cluster's plan (``cluster.plan``'s
``PoolView``: the spec's pools) and the inventory (``vm_inventory.PoolRecord``: the pools a cluster's pools note
records) each extend them with what only they know.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TypedDict


@dataclass(frozen=True)
class GpuSpec:
    """A pool's vGPUs: the type by the platform's name (vendor and model), how many per machine, and the driver
    branch or version the first boot installs (empty: the image has the driver)."""

    type: str
    count: int = 1
    driver_version: str = ""
    #: ``gpu.profile``: ``full``, a profile id or ``any``; None: whole cards, as ``full`` (``gpu.profiles.choose``)
    profile: str | None = None


@dataclass(frozen=True)
class Pool:
    """A pool of identical machines: its name (None: a pool without one, whose machines' markers name no pool), its
    machines' names in order, their size (vCPUs, MiB of memory, the image they boot, GiB of their boot disk; None:
    not given) and their vGPUs (None: none)."""

    name: str | None
    names: tuple[str, ...]
    vcpus: int | None = None
    memory: int | None = None
    image: int | None = None
    disk_size: int | None = None
    gpu: GpuSpec | None = None

    def only(self, names: Iterable[str]) -> Pool:
        """The same pool with only ``names`` (those a plan creates)."""
        return replace(self, names=tuple(names))


class PoolGpu(TypedDict):
    """A pool's vGPUs as they are shown: the type, how many per machine."""

    type: str
    count: int


class PoolShown(TypedDict):
    """What is shown of every pool: its name, how many machines it asks for (0: scaled to zero), each machine's size
    (vCPUs, MiB of memory), and what one machine of it costs per hour, whole, at the location's prices (its vCPUs,
    memory, boot disk and vGPUs; None when a price is not known)."""

    name: str
    replicas: int
    vcpus: int
    memory: int
    per_machine_hourly: float | None
