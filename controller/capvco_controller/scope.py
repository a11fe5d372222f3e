"""A reconcile's writes to its object: its status, its conditions, its providerID and its Events, computed in memory
while it runs and written once, at its end (a merge patch of the status subresource, only when something changed),
as Cluster API providers' scopes and patch helpers do (``defer scope.Close()``).

The scope also holds the contract's fields, so that a reconcile says what it found and never where the contract
keeps it: ``status.initialization.provisioned`` (v1beta2, set once and never taken back), the v1beta1 contract's
``status.ready`` and a terminal error's ``failureReason`` and ``failureMessage`` while Cluster API serves v1beta1
(``kube.ClusterAPI.v1beta1``), and the ``Ready`` condition that summarises the others (``faces/conditions.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import conditions as conds
from ansible_collections.whitesky.capvco.plugins.module_utils.faces.conditions import Condition
from capvco_controller.context import Context
from capvco_controller.objects import TERMINAL

#: The v1beta1 contract's status fields, removed once Cluster API no longer serves v1beta1.
V1BETA1_FIELDS = ("ready", "failureReason", "failureMessage", "deprecated")


def combine(first: dict[str, Any], then: Mapping[str, Any]) -> dict[str, Any]:
    """Two merge patches as one (pure): ``then``'s values win, nested objects combined, a None kept (a removal)."""
    out = dict(first)
    for key, value in then.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = combine(out[key], value)
        else:
            out[key] = dict(value) if isinstance(value, Mapping) else value
    return out


class Scope:
    """What one reconcile writes to ``obj`` (of ``kind``), written by :meth:`close` (a ``with`` block closes it,
    an exception too: what a failed reconcile found is recorded before the failure goes on).

    ``summary`` are the condition types ``Ready`` summarises (none: no ``Ready``, as a template has)."""

    def __init__(self, ctx: Context, kind: str, obj: Mapping[str, Any], summary: Sequence[str] = ()) -> None:
        self.ctx, self.kind, self.obj = ctx, kind, obj
        self.summary = tuple(summary)
        self.fields: dict[str, Any] = {}
        self.conditions: dict[str, Condition] = {}
        self.events: list[dict[str, Any]] = []
        self.provider_id: str | None = None
        self.vm_id: int | None = None
        self.reservations: list[Mapping[str, Any]] | None = None
        self.orphans: Mapping[str, Any] | None = None
        self.deleting = ""
        self.closed = False

    # what the reconcile found
    def set(self, **fields: Any) -> None:
        """Status fields (a merge patch: a None removes one)."""
        self.fields = combine(self.fields, fields)

    def condition(self, *given: Condition) -> None:
        for cond in given:
            self.conditions[cond.type] = cond

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        self.events.append({"type": "Warning" if warning else "Normal", "reason": reason, "message": message})

    def provisioned(self, ok: bool) -> None:
        """The contract's "initialization completed": ``status.initialization.provisioned`` once it is (never taken
        back: Cluster API ignores any change after), and the v1beta1 contract's ``status.ready`` as it is now."""
        if ok:
            self.set(initialization={"provisioned": True})
        self.set(ready=ok)

    def terminal(self, reason: str, message: str) -> None:
        """A terminal error: the v1beta1 contract's ``failureReason`` and ``failureMessage`` (in v1beta2 it is the
        reason of a condition, and so of ``Ready``)."""
        self.set(failureReason=reason, failureMessage=message)

    def recovered(self) -> None:
        """No terminal error (the v1beta1 fields removed)."""
        self.set(failureReason=None, failureMessage=None)

    def reserved(self, items: Iterable[Mapping[str, Any]]) -> None:
        """``status.gpu.reservations``, from the reservations the GPU core returns."""
        self.reservations = list(items)

    # the write
    def ready(self) -> Condition | None:
        """``Ready`` of the conditions the object will hold after the write (None without a summary)."""
        if not self.summary:
            return None
        held = {
            str(c.get("type")): conds.read(c)
            for c in (self.obj.get("status") or {}).get("conditions") or []
            if isinstance(c, Mapping)
        }
        held.update(self.conditions)
        return conds.summary(held, self.summary, TERMINAL, self.deleting)

    def close(self) -> dict[str, Any] | None:
        """The one write (``Context.status``: nothing when it would change nothing and there is no Event)."""
        if self.closed:
            return None
        self.closed = True
        given = list(self.conditions.values())
        ready = self.ready()
        if ready is not None:
            given.append(ready)
        fields = dict(self.fields)
        if not self.ctx.capi.v1beta1:
            fields.update(dict.fromkeys(V1BETA1_FIELDS))
        return self.ctx.status(
            self.kind,
            self.obj,
            status=fields or None,
            conditions=given,
            gpu_reservations=self.reservations,
            vm_id=self.vm_id,
            gpu_orphans=self.orphans,
            provider_id=self.provider_id,
            events=self.events,
        )

    def __enter__(self) -> Scope:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
