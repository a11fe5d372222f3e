# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vGPU plans the GPU core makes (``vgpus.plan_machine``, ``vgpus.plan_groups``), frozen, and the capacity they
take (pure Python)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import Reservation


class Capacity(TypedDict):
    """A GPU type's vGPUs in a plan: the slots it reserves, and the free instances of the profiles it may take."""

    needed: int
    available: int


@dataclass(frozen=True)
class MachinePlan:
    """What one machine's vGPUs need (``gpu.plan_machine``): the reservations to ``release``, those to ``fix``
    (restore from the recycle bin, attach), the ``missing`` slots to reserve, and the reservations ``kept``."""

    releases: list[Reservation]
    fixes: list[Reservation]
    missing: list[int]
    kept: list[Reservation]


@dataclass(frozen=True)
class VgpuPlan:
    """Each machine's :class:`MachinePlan` by name, and the profile id its new slots come from (``gpu.plan``)."""

    machines: dict[str, MachinePlan]
    alloc: dict[str, str]

    @property
    def changed(self) -> bool:
        """Whether carrying it out calls the platform to change anything."""
        return any(pl.releases or pl.fixes or pl.missing for pl in self.machines.values())

    def view(self) -> dict[str, dict[str, int]]:
        """Each machine's counts: slots to reserve, reservations to release, reservations to fix."""
        return {
            name: {"reserve": len(pl.missing), "release": len(pl.releases), "fix": len(pl.fixes)}
            for name, pl in self.machines.items()
        }
