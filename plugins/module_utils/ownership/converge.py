# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way a core converges (plain Python, no Ansible): read, make the pure plan, show it in check mode, take
the cluster's lease, read and plan again once it holds it, apply; then the result, or the failure with what was
done.

A concern (a whole cluster and its teardown, ``machine_pool``'s machines, one ``machine``, ``vgpu``'s slots, the
reclaims) is a :class:`Concern`: its read (:meth:`Concern.read`, every platform read its plan needs), its pure plan
(:meth:`Concern.plan`, a :class:`Plan`: ``changed`` and ``view()``), its apply (:meth:`Concern.apply`, exactly the
plan, recording in ``done`` what it did) and the lease its writes need (:meth:`Concern.lease`: the cluster's, on a
cloudspace; None: none, as the reclaims, which release only what the orphan rule or a reviewed plan names).
:func:`converge` does the rest, the same for all:

- check mode, or a plan that changes nothing: the concern's result of the plan (:meth:`Concern.result`), and no
  lease;
- otherwise the lease (:func:`lease.held`), taken on the cloudspace the plan names, or on the one the concern makes
  first (:meth:`Concern.make`: the cluster's new cloudspace, claimed); once this call took it, what it read before
  may be stale, so it reads and plans again (a plan made again must need the same lease, else the cloudspace is gone:
  :class:`CloudspaceGone`); the plan applied;
- the concern's result of what was done, with the warning that this run waited for another run
  (:func:`lease.waited_message`);
- a failure: :meth:`Concern.failed` of the error and what was done (the cluster's says it, a ``PartialFailure``);
- :class:`CloudspaceGone` (a teardown deleted the cloudspace while this run waited on it): the run starts again from
  its reads, :attr:`Concern.restarts` times at the most, then fails (:meth:`Concern.gone`).

A new concern (the control plane's load balancer) is a subclass with its read, plan, apply and lease, and one call
of :func:`converge`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.errors import CloudspaceGone
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    LogicError,
    PartialFailure,
    WhiteskyError,
)

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient


class Plan(Protocol):
    """What a concern's pure plan offers the runner: whether applying it writes anything, and its view (what check
    mode shows)."""

    @property
    def changed(self) -> bool: ...

    def view(self) -> Mapping[str, Any]: ...


#: what a concern reads (its world), and its plan
W = TypeVar("W")
P = TypeVar("P", bound=Plan)


@dataclass(frozen=True)
class Where:
    """The lease a plan's writes are made under: ``cluster``'s, on the cloudspace ``cloudspace_id`` (None: on the
    cloudspace the concern makes first, :meth:`Concern.make`)."""

    cloudspace_id: str | None
    cluster: str


class Concern(Generic[W, P]):
    """One thing a core converges: its read, its pure plan, its apply, the lease they need, and how its result and
    its failure read.  What is not overridden: no lease, a result that is the plan's view with ``changed`` and what
    was done, a failure that is the error itself."""

    #: how many times a run reads and plans again from the start when the cloudspace of its lease is deleted
    #: meanwhile (:class:`CloudspaceGone`, a teardown ran); 1: it fails with that error
    restarts = 1

    def read(self) -> W:
        """Every platform read the plan needs (the checks that need reads refuse here)."""
        raise NotImplementedError

    def plan(self, world: W) -> P:
        """The plan, from what :meth:`read` returned (pure: no platform call); every check of the input refuses
        here, before the first write."""
        raise NotImplementedError

    def apply(self, plan: P, done: dict[str, Any]) -> None:
        """Carry out exactly ``plan``, recording what was done in ``done`` as it goes (also when it fails)."""
        raise NotImplementedError

    def lease(self, plan: P) -> Where | None:
        """The cluster's lease ``plan`` is applied under (None: none)."""
        return None

    def make(self, plan: P, done: dict[str, Any]) -> str:
        """Make the cloudspace the lease is taken on, when :meth:`lease` names none (the cluster's new one); its
        id."""
        raise LogicError("a plan whose lease names no cloudspace, and nothing that makes one")

    def nothing_done(self) -> dict[str, Any]:
        """The record of what a run did, before it did anything."""
        return {}

    def result(self, plan: P, done: dict[str, Any] | None, check_mode: bool) -> dict[str, Any]:
        """The call's result: of the plan (``done`` None: check mode, or nothing to change), or of what was done."""
        out = dict(plan.view())
        out["changed"] = plan.changed
        out.update(done or {})
        return out

    def failed(self, exc: WhiteskyError, done: dict[str, Any]) -> WhiteskyError:
        """The error a run that failed halfway raises: ``exc`` (the appliers' ``PartialFailure`` says what they did)."""
        return exc

    def gone(self, exc: CloudspaceGone) -> WhiteskyError:
        """The error once :attr:`restarts` runs found the cloudspace deleted: the last one's."""
        return exc


def done_sorted(done: Mapping[str, Any]) -> dict[str, Any]:
    """What a run did, its lists sorted (the platform answers in its own order), each name once."""
    return {k: sorted(set(v)) if isinstance(v, list) else v for k, v in done.items()}


def halfway(exc: WhiteskyError, done: Mapping[str, Any]) -> PartialFailure:
    """A failure halfway (a concern's :meth:`Concern.failed`, the cluster's): the error, with what the run did
    before it (:func:`done_sorted`; ``changed`` true when it did anything), in its message and its details."""
    done = done_sorted(done)
    details = dict(exc.details, **done)
    details["changed"] = any(done.values())
    what = "; ".join("%s %s" % (k, ", ".join(v) if isinstance(v, list) else v) for k, v in done.items() if v)
    return PartialFailure("%s; before it failed, this run did: %s" % (exc, what or "nothing"), details)


def converge(client: WhiteskyClient, concern: Concern[W, P], check_mode: bool = False) -> dict[str, Any]:
    """Read, plan, and in check mode (or when the plan changes nothing) return the plan's result; otherwise apply
    it holding its lease, planned again from fresh reads once this call took the lease, and return the result of
    what was done (see the module's docstring)."""
    gone: CloudspaceGone | None = None
    for _attempt in range(max(1, concern.restarts)):
        plan = concern.plan(concern.read())
        if check_mode or not plan.changed:
            return concern.result(plan, None, check_mode)
        done = concern.nothing_done()
        try:
            plan, took = _held(client, concern, plan, done)
        except CloudspaceGone as exc:  # a teardown deleted the cloudspace while this run waited: read again
            gone = exc
            continue
        except WhiteskyError as exc:
            raise concern.failed(exc, done) from None
        out = concern.result(plan, done, False)
        if took is not None and took.holders:
            out["warnings"] = list(out.get("warnings") or []) + [lease.waited_message(took)]
        return out
    raise concern.gone(gone if gone is not None else CloudspaceGone("the cloudspace is gone", {}))


def _held(
    client: WhiteskyClient, concern: Concern[W, P], plan: P, done: dict[str, Any]
) -> tuple[P, lease.Lease | None]:
    """``plan`` applied under its lease, made again from fresh reads when this call took the lease; the plan
    applied, and the lease taken (None: none, or one this run held already)."""
    where = concern.lease(plan)
    if where is None:
        concern.apply(plan, done)
        return plan, None
    cloudspace_id = where.cloudspace_id or concern.make(plan, done)
    with lease.held(client, cloudspace_id, where.cluster) as took:
        if took is not None:  # what was read before this run held the cluster may be stale
            plan = concern.plan(concern.read())
            again = concern.lease(plan)
            if again is None or again.cloudspace_id != cloudspace_id:
                raise CloudspaceGone("cloudspace %s is no longer the cluster's" % cloudspace_id, {})
        if plan.changed:
            concern.apply(plan, done)
    return plan, took
