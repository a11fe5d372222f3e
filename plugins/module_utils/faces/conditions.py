# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CAPVCO kinds' conditions, in the shape Cluster API's v1beta2 contract reads (plain Python, no Ansible).

A condition is Kubernetes' ``metav1.Condition``: ``type``, ``status`` (True, False, Unknown), ``reason`` (required,
of the form ``^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$``), ``message``, ``lastTransitionTime`` (which moves only when
the status does) and ``observedGeneration`` (the object's generation the controller saw), and nothing else: the
contract pages ("InfraCluster: conditions", "InfraMachine: conditions",
https://cluster-api.sigs.k8s.io/developer/providers/contracts/infra-machine) say the core considers those fields
only, and mirrors a ``Ready`` condition into the Cluster's or the Machine's ``InfrastructureReady``.  ``Ready``
summarises an object's other conditions as Cluster API's own do (reasons ``Ready``, ``NotReady``, ``ReadyUnknown``,
``Deleting``; a message of ``* Type: message`` lines), and carries a terminal error as its reason: v1beta2 has no
``failureReason`` ("InfraMachine: terminal failures").

The v1beta1 shape (with a ``severity``, and no ``observedGeneration``) is kept beside them, where the migration notes
put the old conditions (v1.10-to-v1.11, "How to start using metav1.conditions", stage 2:
``status.deprecated.v1beta1.conditions``), while Cluster API serves v1beta1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub

#: metav1.Condition's reason, as the API server validates it.
REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
#: metav1.Condition's type (a qualified name).
TYPE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
STATUSES = ("True", "False", "Unknown")
#: The v1beta1 shape's severities (of a condition that is not True).
SEVERITIES = ("Error", "Warning", "Info")
#: The longest message a condition carries (metav1 allows 32768, the v1beta1 shape 10240).
MESSAGE_LIMIT = 4096
#: The keys a condition given as a mapping may have (``vco_status``'s ``conditions``).
KEYS = ("type", "status", "reason", "message", "severity")
READY = "Ready"
#: Cluster API's reasons of a summary (api/core/v1beta2/condition_consts.go).
READY_REASON, NOT_READY, READY_UNKNOWN, DELETING = "Ready", "NotReady", "ReadyUnknown", "Deleting"


@dataclass(frozen=True)
class Condition:
    """One condition, checked (:func:`make`); ``severity`` is the v1beta1 shape's, and is written there only."""

    type: str
    status: str
    reason: str
    message: str = ""
    severity: str = ""

    def doc(self, generation: int | None) -> dict[str, Any]:
        """The ``metav1.Condition`` without its time."""
        out: dict[str, Any] = {"type": self.type, "status": self.status, "reason": self.reason, "message": self.message}
        if generation is not None:
            out["observedGeneration"] = generation
        return out

    def v1beta1(self) -> dict[str, Any]:
        """The v1beta1 shape without its time (a message only when there is one: it is at least one character)."""
        out: dict[str, Any] = {"type": self.type, "status": self.status, "reason": self.reason}
        if self.status != "True" and self.severity:
            out["severity"] = self.severity
        if self.message:
            out["message"] = self.message
        return out


def make(ctype: str, status: str, reason: str, message: str = "", severity: str = "") -> Condition:
    """A condition, refused (:class:`InputError`) unless it is one the API server admits; its message scrubbed
    (what it says may come from outside: the platform, a machine)."""
    if not isinstance(ctype, str) or not TYPE.match(ctype) or len(ctype) > 316:
        raise InputError("a condition's type must be a qualified name, got %r" % (ctype,))
    if status not in STATUSES:
        raise InputError("condition %r needs status True, False or Unknown, got %r" % (ctype, status))
    if not isinstance(reason, str) or not REASON.match(reason) or len(reason) > 1024:
        raise InputError(
            "condition %r needs a reason of the form Kubernetes requires (a letter, then letters, digits, _ , or :, "
            "in CamelCase: WaitingForBootstrapData), got %r" % (ctype, reason)
        )
    if severity and severity not in SEVERITIES:
        raise InputError("condition %r: severity must be one of Error, Warning, Info, got %r" % (ctype, severity))
    return Condition(
        ctype, status, reason, scrub(str(message or ""), MESSAGE_LIMIT), "" if status == "True" else severity
    )


def true(ctype: str, reason: str, message: str = "") -> Condition:
    return make(ctype, "True", reason, message)


def false(ctype: str, reason: str, message: str, severity: str = "Warning") -> Condition:
    return make(ctype, "False", reason, message, severity)


def unknown(ctype: str, reason: str, message: str, severity: str = "Info") -> Condition:
    return make(ctype, "Unknown", reason, message, severity)


def given(item: Mapping[str, Any]) -> Condition:
    """A condition given as a mapping (``vco_status``'s ``conditions``): ``type``, ``status``, ``reason`` and
    optionally ``message`` and ``severity`` (the v1beta1 shape's)."""
    unknown_keys = sorted(set(item) - set(KEYS))
    if unknown_keys or not item.get("type"):
        raise InputError("a condition has the keys %s (type required), got %r" % (", ".join(KEYS), dict(item)))
    return make(
        str(item["type"]),
        str(item.get("status")),
        str(item.get("reason") or ""),
        str(item.get("message") or ""),
        str(item.get("severity") or ""),
    )


def read(item: Mapping[str, Any]) -> Condition:
    """A condition as an object holds it (of either shape; one written by an older controller may lack a
    reason), for a summary: never refused."""
    status = str(item.get("status") or "Unknown")
    return Condition(
        str(item.get("type") or ""),
        status if status in STATUSES else "Unknown",
        str(item.get("reason") or ""),
        str(item.get("message") or ""),
        str(item.get("severity") or ""),
    )


def summary(
    conditions: Mapping[str, Condition],
    of: Sequence[str],
    terminal: Iterable[str] = (),
    deleting: str = "",
) -> Condition:
    """``Ready``, the summary of ``conditions``' types ``of`` (pure): True (``Ready``) when each is True; False with
    a terminal reason (``terminal``) one of them carries, with its message; else False (``NotReady``) when one is
    False, Unknown (``ReadyUnknown``) when one is Unknown or not reported yet, the message a ``* Type: message``
    line of each that is not True; False (``Deleting``) while the object is deleted, with ``deleting`` as the
    message.  Its v1beta1 severity is the gravest of theirs."""
    if deleting:
        return make(READY, "False", DELETING, deleting, "Info")
    seen = [conditions.get(t) or Condition(t, "Unknown", "NotReported", "not reported yet", "Info") for t in of]
    down = [c for c in seen if c.status != "True"]
    if not down:
        return make(READY, "True", READY_REASON, "")
    grave = min((c.severity for c in down if c.severity), key=SEVERITIES.index, default="Info")
    stops = set(terminal)
    final = next((c for c in down if c.status == "False" and c.reason in stops), None)
    if final is not None:
        return make(READY, "False", final.reason, final.message, "Error")
    lines = "\n".join("* %s: %s" % (c.type, c.message or c.reason) for c in down)
    if any(c.status == "False" for c in down):
        return make(READY, "False", NOT_READY, lines, grave)
    return make(READY, "Unknown", READY_UNKNOWN, lines, grave)


def _merged(
    existing: Iterable[Mapping[str, Any]] | None,
    updates: Iterable[tuple[Condition, dict[str, Any]]],
    now: str,
) -> list[dict[str, Any]]:
    merged = [dict(c) for c in existing or [] if isinstance(c, Mapping)]
    index = {c.get("type"): i for i, c in enumerate(merged)}
    for cond, doc in updates:
        old = merged[index[cond.type]] if cond.type in index else None
        keep = old is not None and old.get("status") == cond.status and old.get("lastTransitionTime")
        doc["lastTransitionTime"] = old.get("lastTransitionTime") if keep and old else now
        if old is None:
            index[cond.type] = len(merged)
            merged.append(doc)
        else:
            merged[index[cond.type]] = doc
    return merged


def merge(
    existing: Iterable[Mapping[str, Any]] | None, updates: Iterable[Condition], now: str, generation: int | None
) -> list[dict[str, Any]]:
    """``status.conditions`` with ``updates`` (by type: replaced or added, the others kept in their order), each
    update's ``lastTransitionTime`` kept while its status is the one it had (pure)."""
    return _merged(existing, ((c, c.doc(generation)) for c in updates), now)


def merge_v1beta1(
    existing: Iterable[Mapping[str, Any]] | None, updates: Iterable[Condition], now: str
) -> list[dict[str, Any]]:
    """``status.deprecated.v1beta1.conditions`` with ``updates``, in the v1beta1 shape (pure)."""
    return _merged(existing, ((c, c.v1beta1()) for c in updates), now)
