"""What a location's vGPUs cost, in seconds: no SQL here.

A reservation bills from its reservation until it is deleted permanently (attached, detached or in the recycle
bin alike).  While attached, its seconds are the VM's; the rest of them are the reservation's own (the report's
``unassigned_vgpus``).  The consumption report counts in unit-hours (:data:`VGU_SECONDS`).  One report is made at
one instant, ``now``: a span still open ends there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

#: Seconds of one vGU in the consumption report: consumption is in unit-hours.
VGU_SECONDS = 3600.0
#: Fewer seconds than this left over from a reservation's attachments are rounding, not an unassigned vGPU.
EPSILON = 1e-9


class Reservation(Protocol):
    @property
    def vgpu_id(self) -> str: ...

    @property
    def reserved_at(self) -> float: ...

    @property
    def deleted_at(self) -> float | None: ...


class Attachment(Protocol):
    @property
    def vgpu_id(self) -> str: ...

    @property
    def vm_id(self) -> int: ...

    @property
    def start(self) -> float: ...

    @property
    def end(self) -> float | None: ...


def reserved_seconds(vgpu: Reservation, now: float, start: float | None = None, end: float | None = None) -> float:
    """Billed seconds of one reservation within [start, end] (each bound: the reservation's own when None)."""
    lo = max(vgpu.reserved_at, start if start is not None else vgpu.reserved_at)
    hi = min(vgpu.deleted_at or now, end if end is not None else now)
    return max(0.0, hi - lo)


def attached_seconds(
    attachments: Iterable[Attachment], start: float, end: float, now: float
) -> dict[str, dict[int, float]]:
    """Seconds of [start, end] during which each vGPU was attached, per VM: ``{vgpu_id: {vm_id: seconds}}``."""
    out: dict[str, dict[int, float]] = {}
    for att in attachments:
        lo, hi = max(att.start, start), min(att.end or now, end)
        if hi > lo:
            per_vm = out.setdefault(att.vgpu_id, {})
            per_vm[att.vm_id] = per_vm.get(att.vm_id, 0.0) + hi - lo
    return out


@dataclass
class Consumption:
    """A location's vGPU seconds over [start, end]: all of them, each VM's, and each reservation's own."""

    seconds: float = 0.0
    per_vm: defaultdict[int, float] = field(default_factory=lambda: defaultdict(float))
    unassigned: list[tuple[str, float]] = field(default_factory=list)  # (vgpu_id, seconds), in reservation order

    def vm_units(self, vm_id: int) -> float:
        """A VM's consumption in unit-hours."""
        return self.per_vm.get(vm_id, 0.0) / VGU_SECONDS


def consumption(
    reservations: Iterable[Reservation], attachments: Iterable[Attachment], start: float, end: float, now: float
) -> Consumption:
    """The report's figures from every reservation the location ever had and every attachment of them."""
    attached = attached_seconds(attachments, start, end, now)
    report = Consumption()
    for vgpu in reservations:
        billed = reserved_seconds(vgpu, now, start, end)
        if billed <= 0:
            continue
        report.seconds += billed
        spans = attached.get(vgpu.vgpu_id, {})
        for vm_id, secs in spans.items():
            report.per_vm[vm_id] += secs
        rest = billed - sum(spans.values())
        if rest > EPSILON:
            report.unassigned.append((vgpu.vgpu_id, rest))
    return report
