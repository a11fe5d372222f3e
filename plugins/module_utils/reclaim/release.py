# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a reclaim releases what it planned (plain Python, no Ansible): :class:`Releases`, the pure plan of a reclaim
(``sweep.reclaim``'s, ``reviewed.apply_plan``'s), and :class:`Releasing`, the concern that carries it out through
the one runner (``ownership.converge``: check mode, the failure; no lease: a reclaim releases only what the orphan
rule or a reviewed plan names, by id); the refusal of a reservation of a cluster's on a VM that is not its own; the
releases themselves, one VM's in turn, different VMs at once (:func:`release`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.ops import Ops
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.converge import Concern
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import PartialFailure
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import run_parallel
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import attached_to, view
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import check_owned

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import VM, Reservation


@dataclass(frozen=True)
class Releases:
    """A reclaim's plan: the reservations it releases (``chosen``), whether a release deletes permanently, and the
    result that shows it (``shown``: what it releases, keeps and ignores, what that saves, the diff)."""

    chosen: tuple[Reservation, ...]
    permanently: bool
    shown: Mapping[str, Any]

    @property
    def changed(self) -> bool:
        return bool(self.chosen)

    def view(self) -> dict[str, Any]:
        return dict(self.shown, changed=self.changed)


#: what a reclaim reads
W = TypeVar("W")


class Releasing(Concern[W, Releases]):
    """A reclaim's concern: its read and its plan are its own; it releases exactly the plan's reservations
    (:func:`release`), under no lease."""

    def __init__(self, client: WhiteskyClient, location: str, parallel: int) -> None:
        self.client, self.location, self.parallel = client, location, parallel

    def apply(self, plan: Releases, done: dict[str, Any]) -> None:
        release(self.client, self.location, plan.chosen, plan.permanently, self.parallel)


def refuse_foreign_vms(client: WhiteskyClient, chosen: Iterable[Reservation], cluster: str, parallel: int) -> None:
    """Refuse, before anything is released, a reservation of ``cluster``'s attached to a VM that is not its own (as
    ``vgpu`` refuses it)."""
    for cs, vms in sorted(_attached_vms(chosen).items()):
        check_owned(client, cs, list(vms.values()), cluster, parallel)


def _attached_vms(items: Iterable[Reservation]) -> dict[str, dict[int, VM]]:
    """``{cloudspace id: {vm id: {vm_id, name}}}`` of the VMs the reservations are attached to."""
    on_vms: dict[str, dict[int, VM]] = {}
    for item in items:
        vm = item.get("virtual_machine")
        if vm and attached_to(item) is not None and vm.get("cloudspace_id"):
            on_vms.setdefault(vm["cloudspace_id"], {})[vm["id"]] = {"vm_id": vm["id"], "name": vm["name"]}
    return on_vms


def release(
    client: WhiteskyClient, location: str, items: Sequence[Reservation], permanently: bool, parallel: int
) -> None:
    """Release the reservations: one VM's in turn (its lock), different VMs at once."""
    ops = Ops(client, location, permanently=permanently)
    groups: dict[int | str, list[Reservation]] = {}
    for item in items:
        groups.setdefault(attached_to(item) or item["vgpu_id"], []).append(item)
    _done, errors = run_parallel({k: partial(_release_all, ops, g) for k, g in groups.items()}, parallel)
    if errors:
        failed = {i["vgpu_id"] for k in errors for i in groups[k]}
        raise PartialFailure(
            "%d of %d release(s) failed: %s" % (len(failed), len(items), "; ".join(str(e) for e in errors.values())),
            {"released": [view(i) for i in items if i["vgpu_id"] not in failed], "not_released": sorted(failed)},
        )


def _release_all(ops: Ops, items: Iterable[Reservation]) -> list[bool]:
    """Release one VM's reservations in turn (its lock)."""
    return [ops.release(i) for i in items]
