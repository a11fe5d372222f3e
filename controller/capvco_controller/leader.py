"""Leader election on a coordination.k8s.io/v1 Lease: a replica takes the Lease when it has no holder or is expired
(:func:`expired`), renews it every ``retry_period``, and gives leadership up (the process exits, as
controller-runtime's managers do) when it could not renew for ``renew_deadline``.  Each write carries the
resourceVersion it read, so two replicas never both win.

Expiry is judged unlike client-go's leaderelection (which times, on its own clock, how long it has seen the same
record, and compares no clocks): :func:`expired` compares the holder's ``renewTime`` plus ``leaseDurationSeconds``
with this replica's own clock, so the replicas' clocks must agree to well within the lease's duration."""

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


def parse_time(text: object) -> datetime.datetime | None:
    if not isinstance(text, str):
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.datetime.strptime(text, fmt).replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            continue
    return None


def expired(spec: dict[str, Any], now: datetime.datetime) -> bool:
    """Whether a Lease's holder let it lapse (or there is none)."""
    if not spec.get("holderIdentity"):
        return True
    renewed = parse_time(spec.get("renewTime"))
    duration = spec.get("leaseDurationSeconds")
    if renewed is None or not isinstance(duration, int):
        return True
    return renewed + datetime.timedelta(seconds=duration) < now


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
    ) -> None:
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.on_lost = on_lost
        self.leading = threading.Event()
        self._transitions = 0

    def _try(self) -> bool:
        """One attempt to take or renew the Lease: whether this replica holds it now."""
        now = _now()
        lease = self.kube.lease(self.namespace, self.name)
        spec_now = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_duration,
            "renewTime": micro_time(now),
        }
        if lease is None:
            body = {
                "apiVersion": LEASE.api_version,
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": dict(spec_now, acquireTime=micro_time(now), leaseTransitions=0),
            }
            return self.kube.create_lease(self.namespace, body) is not None
        spec = dict(lease.get("spec") or {})
        mine = spec.get("holderIdentity") == self.identity
        if not mine and not expired(spec, now):
            return False
        if not mine:
            spec["acquireTime"] = micro_time(now)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(spec_now)
        body = dict(lease, spec=spec)
        return self.kube.replace_lease(self.namespace, body) is not None

    def acquire(self, stop: threading.Event) -> bool:
        """Block until this replica leads (True) or ``stop`` is set (False)."""
        while not stop.is_set():
            try:
                if self._try():
                    log.info("leading as %s (Lease %s/%s)", self.identity, self.namespace, self.name)
                    self.leading.set()
                    return True
            except Exception as exc:
                log.warning("leader election: %s", exc)
            stop.wait(self.retry_period)
        return False

    def renew_forever(self, stop: threading.Event) -> None:
        """Renew the Lease until ``stop``; call ``on_lost`` when it could not for ``renew_deadline``."""
        last = time.monotonic()
        while not stop.wait(self.retry_period):
            try:
                ok = self._try()
            except Exception as exc:
                log.warning("renewing the Lease: %s", exc)
                ok = False
            if ok:
                last = time.monotonic()
            elif time.monotonic() - last > self.renew_deadline or not self._still_mine():
                log.error("lost the Lease %s/%s", self.namespace, self.name)
                self.leading.clear()
                if self.on_lost is not None:
                    self.on_lost()
                return

    def _still_mine(self) -> bool:
        try:
            lease = self.kube.lease(self.namespace, self.name)
        except Exception:
            return True  # unknown: the deadline decides
        return lease is not None and (lease.get("spec") or {}).get("holderIdentity") == self.identity

    def release(self) -> None:
        """Give the Lease up at a clean stop, so that a standby takes over at once instead of after its duration."""
        if not self.leading.is_set():
            return
        try:
            lease = self.kube.lease(self.namespace, self.name)
            if lease is not None and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = dict(lease["spec"], holderIdentity=None, leaseDurationSeconds=1)
                self.kube.replace_lease(self.namespace, dict(lease, spec=spec))
        except Exception as exc:
            log.warning("releasing the Lease: %s", exc)
        self.leading.clear()
