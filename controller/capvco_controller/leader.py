"""Leader election on a coordination.k8s.io/v1 Lease, judged as client-go's leaderelection judges it: by how long
this replica, on its own clock, has seen the same record, never by the times written in it.

A replica takes the Lease when it has no holder, or when its record has not changed for its
``leaseDurationSeconds`` since this replica first read that record (:func:`expired`); it renews it every
``retry_period``, and gives leadership up (the process exits, as controller-runtime's managers do) when it could not
renew for ``renew_deadline``.  Each write carries the resourceVersion it read, so two replicas never both win.

As client-go bounds each renewal by the renew deadline (its ``renew`` runs ``tryAcquireOrRenew`` under a context
with that timeout), every request of an attempt times out at the attempt's deadline (``Kube``'s Lease calls, made
once each): the deadline of a renewal is ``renew_deadline`` after the start of the last attempt that took or renewed
the Lease, so an API server gone silent mid-request leaves the leader waiting no longer than that, and it stops
leading before a standby, which counts the lease from when it saw that record written (after the attempt began),
could take it.  An attempt that took the Lease counts from its start, however late its answer came.

The times the Lease holds (``acquireTime``, ``renewTime``, from ``wall_clock``) are written for a person and for
other tools, and never compared with a clock: the replicas' clocks may be apart by any amount.  What is assumed is
that they run at about the same rate: the holder gives up once it has not renewed for ``renew_deadline`` (10 s,
checked every ``retry_period``), by its clock; a standby takes over no sooner than ``lease_duration`` (15 s) after
it saw that renewal, by its own.  Every duration is read on ``clock`` (monotonic by default; both clocks can be given,
as the tests give a replica one far ahead)."""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from capvco_controller.kube import LEASE, Kube

log = logging.getLogger(__name__)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def micro_time(when: datetime.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def held_for(spec: dict[str, Any]) -> int | None:
    """The seconds a Lease's record holds once seen, or None when it has no holder (or no duration)."""
    duration = spec.get("leaseDurationSeconds")
    if not spec.get("holderIdentity") or not isinstance(duration, int) or isinstance(duration, bool):
        return None
    return duration


def expired(spec: dict[str, Any], seen_at: float, now: float) -> bool:
    """Whether a Lease's record, first seen unchanged at ``seen_at`` (this replica's ``clock``), has lapsed at
    ``now`` (or has no holder, or no duration).  Its ``renewTime`` is not read: it is another replica's clock."""
    duration = held_for(spec)
    return duration is None or now >= seen_at + duration


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: int = 15,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_lost: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime.datetime] = _now,
    ) -> None:
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.on_lost = on_lost
        self.clock, self.wall_clock = clock, wall_clock
        self.leading = threading.Event()
        #: the Lease's spec as this replica last saw it change (read or written), and when, by ``clock``
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        #: when the last attempt that took or renewed the Lease began, by ``clock``
        self._renewed_at = 0.0

    def _observe(self, spec: dict[str, Any]) -> None:
        """Note the Lease's record as read or written; its time restarts only when it changed."""
        if spec != self._observed:
            self._observed, self._observed_at = spec, self.clock()

    def _left(self, deadline: float) -> float:
        """The seconds a request may take to end by ``deadline`` (``clock``); none left is a failed attempt."""
        left = deadline - self.clock()
        if left <= 0:
            raise TimeoutError("the renew deadline passed")
        return left

    def _try(self, deadline: float) -> bool:
        """One attempt to take or renew the Lease, each request ending by ``deadline``: whether this replica holds
        it now."""
        wall = micro_time(self.wall_clock())
        lease = self.kube.lease(self.namespace, self.name, timeout=self._left(deadline))
        spec_now = {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_duration, "renewTime": wall}
        if lease is None:
            body = {
                "apiVersion": LEASE.api_version,
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": dict(spec_now, acquireTime=wall, leaseTransitions=0),
            }
            return self._wrote(self.kube.create_lease(self.namespace, body, timeout=self._left(deadline)))
        spec = dict(lease.get("spec") or {})
        self._observe(spec)
        mine = spec.get("holderIdentity") == self.identity
        if not mine and not expired(spec, self._observed_at, self.clock()):
            return False
        if not mine:
            spec["acquireTime"] = wall
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(spec_now)
        return self._wrote(
            self.kube.replace_lease(self.namespace, dict(lease, spec=spec), timeout=self._left(deadline))
        )

    def _wrote(self, lease: dict[str, Any] | None) -> bool:
        """Whether a write took (None: another replica wrote first); what it wrote is what this replica saw last."""
        if lease is None:
            return False
        self._observe(dict(lease.get("spec") or {}))
        return True

    def acquire(self, stop: threading.Event) -> bool:
        """Block until this replica leads (True) or ``stop`` is set (False)."""
        while not stop.is_set():
            started = self.clock()
            try:
                if self._try(started + self.renew_deadline) and self.clock() < started + self.renew_deadline:
                    self._renewed_at = started
                    log.info("leading as %s (Lease %s/%s)", self.identity, self.namespace, self.name)
                    self.leading.set()
                    return True
            except Exception as exc:
                log.warning("leader election: %s", exc)
            stop.wait(self._until_next_try())
        return False

    def _until_next_try(self) -> float:
        """The retry period, or less when the Lease as last seen lapses sooner (taken as soon as it lapses)."""
        duration = held_for(self._observed or {})
        if duration is None:
            return self.retry_period
        left = self._observed_at + duration - self.clock()
        return left if 0 < left < self.retry_period else self.retry_period

    def renew_forever(self, stop: threading.Event) -> None:
        """Renew the Lease every ``retry_period`` until ``stop``; stop leading (``leading`` cleared, then
        ``on_lost``) when no attempt renewed it within ``renew_deadline`` of the last one that did (each attempt's
        requests time out at that deadline), or another replica holds it."""
        while True:
            deadline = self._renewed_at + self.renew_deadline
            if stop.wait(min(self.retry_period, max(0.0, deadline - self.clock()))):
                return
            started = self.clock()
            if started >= deadline:
                break
            try:
                ok = self._try(deadline)
            except Exception as exc:
                log.warning("renewing the Lease: %s", exc)
                ok = False
            if ok and self.clock() < deadline:
                self._renewed_at = started
            elif self.clock() >= deadline or not self._still_mine(deadline):
                break
        log.error("lost the Lease %s/%s", self.namespace, self.name)
        self.leading.clear()
        if self.on_lost is not None:
            self.on_lost()

    def _still_mine(self, deadline: float) -> bool:
        try:
            lease = self.kube.lease(self.namespace, self.name, timeout=self._left(deadline))
        except Exception:
            return True  # unknown: the deadline decides
        return lease is not None and (lease.get("spec") or {}).get("holderIdentity") == self.identity

    def release(self) -> None:
        """Give the Lease up at a clean stop, so that a standby takes over at once instead of after its duration."""
        if not self.leading.is_set():
            return
        deadline = self.clock() + self.renew_deadline
        try:
            lease = self.kube.lease(self.namespace, self.name, timeout=self._left(deadline))
            if lease is not None and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = dict(lease["spec"], holderIdentity=None, leaseDurationSeconds=1)
                self.kube.replace_lease(self.namespace, dict(lease, spec=spec), timeout=self._left(deadline))
        except Exception as exc:
            log.warning("releasing the Lease: %s", exc)
        self.leading.clear()
