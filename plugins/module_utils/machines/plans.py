# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pool of machines in the machines core's shape, and the plan of converging pools (``pools.plan_machines``)
(pure Python)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import Diff
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import DescribedVM


class _Pool(TypedDict):
    name: str | None
    names: list[str]
    #: ``{type, count, driver_version}``, or None for a pool without vGPUs
    gpu: dict[str, Any] | None


class Pool(_Pool, total=False):
    """A pool of machines in the machines core's shape: its name, its machines' names, their size, their vGPUs."""

    vcpus: int | None
    memory: int | None
    image_id: int | None
    disk_size: int | None


@dataclass(frozen=True)
class MachinesPlan:
    """What converging the pools changes (``pools.plan_machines``): the machines to create (``(pool, name)``), the
    VMs to delete and the VMs ``listed`` in the result, the ``diff`` of the cluster's machine names, and size
    ``warnings``; ``owned``: the names of the cluster's machines there before (sorted)."""

    creates: list[tuple[Pool, str]]
    deletes: list[DescribedVM]
    listed: list[DescribedVM]
    diff: Diff
    warnings: list[str]
    owned: list[str]
