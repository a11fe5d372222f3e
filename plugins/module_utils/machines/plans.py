# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan of converging pools of machines (``pools.plan_machines``), frozen (pure Python); a pool is the typed
record ``spec.pool.Pool``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import Diff
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import DescribedVM


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
