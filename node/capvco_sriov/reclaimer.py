"""Recovery and reclamation: settle what a crash left short of ready (on start, and on every pass for an entry no
ADD is working on), and release the NICs of pods that went away without a DEL, once they have been gone for the
grace period (their netns gone, or their UID no longer on this node in the Kubernetes API)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TypedDict

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError
from capvco_sriov.attachments import ReleaseFailed
from capvco_sriov.commands import NicAgent
from capvco_sriov.ledger import LedgerEntry
from capvco_sriov.wire import CniError

LOG = logging.getLogger("capvco-sriov-agent")

#: ``pods()``: the UIDs of the pods on this node, or None when unknown (``pods.KubePods``).
Pods = Callable[[], set[str] | None]


class Reclaimed(TypedDict):
    """What one reclaimer pass released: the ledger key, why, and the address."""

    key: str
    reason: str
    ip: str | None


class Reclaimer:
    """Settles and releases, for one :class:`NicAgent`, what no CNI command will."""

    def __init__(
        self,
        agent: NicAgent,
        pods: Pods | None = None,
        grace_period: float = 30.0,
        count: Callable[[str], None] = lambda action: None,
    ) -> None:
        self.agent = agent
        self.pods = pods
        self.grace_period = grace_period
        #: told each action: ``recovered``, ``settled``, ``released``, ``release_finished``, ``failed`` (metrics)
        self.count = count
        self._gone_since: dict[str, float] = {}  # ledger key -> when its pod was first seen gone

    def held(self) -> dict[str, str]:
        """The entries left for a person: key -> why."""
        return {key: entry["held"] for key, entry in self.agent.ledger.items().items() if entry.get("held")}

    def recover(self) -> list[str]:
        """Settle what a crash left short of ready; return the keys settled.  What stays (an attach that may still
        land, a NIC left for a person) is kept, its address never chosen, and the reclaimer settles it later."""
        agent = self.agent
        resolved: list[str] = []
        for key, entry in agent.ledger.items().items():
            if entry["state"] == "ready":
                continue
            agent.addresses.keep(entry["network_id"], entry["ip"])
            try:
                decision, _why = agent.settle(key, entry)
            except (WhiteskyError, ReleaseFailed) as exc:
                LOG.warning("%s: settling it failed, the reclaimer tries again: %s", key, exc)
                self.count("failed")
                continue
            if decision in ("drop", "detach"):
                resolved.append(key)
                self.count("recovered")
        for key, why in self.held().items():
            LOG.warning("%s: left for a person: %s", key, why)
        return resolved

    def gone(self, entry: LedgerEntry, uids: set[str] | None) -> str | None:
        """Why the entry's pod is gone (its netns, or its UID no longer on this node), or None."""
        if not os.path.exists(entry["netns"]):
            return "netns %s is gone" % entry["netns"]
        if uids is not None and entry.get("pod_uid") and entry["pod_uid"] not in uids:
            return "pod %s is no longer on this node" % entry["pod_uid"]
        return None

    def settle_leftover(self, key: str) -> Reclaimed | None:
        """Settle an entry short of ready that no ADD is working on; what was released, if anything."""
        agent = self.agent
        with agent.key_lock(key, blocking=False) as free:
            current = agent.ledger.get(key) if free else None
            if current is None or current["state"] == "ready":
                return None  # an ADD is on it, or it is done
            try:
                decision, why = agent.settle(key, current)
            except (WhiteskyError, ReleaseFailed) as exc:
                LOG.warning("%s: settling it failed, tried again next pass: %s", key, exc)
                self.count("failed")
                return None
        if decision not in ("drop", "detach"):
            return None
        self.count("settled")
        return {"key": key, "reason": "an ADD left it short of ready: " + why, "ip": current["ip"]}

    def reclaim_once(self) -> list[Reclaimed]:
        """Settle entries short of ready that no ADD is working on, finish the releases that failed (a DEL's, a
        GC's, this reclaimer's), and release ready NICs whose pod has been gone for the grace period; return what
        was released.  One entry that cannot be released now stops none of the others."""
        agent = self.agent
        uids = self.pods() if self.pods else None
        now = agent.clock()
        released: list[Reclaimed] = []
        entries = agent.ledger.items()
        for key in set(self._gone_since) - set(entries):
            del self._gone_since[key]  # settled meanwhile (a DEL, GC)
        for key, entry in entries.items():
            if entry["state"] != "ready":
                leftover = self.settle_leftover(key)
                if leftover is not None:
                    released.append(leftover)
                continue
            why = self.due(key, entry, uids, now)
            if why is None:
                continue
            item = self.release(key, why)
            if item is not None:
                released.append(item)
        return released

    def due(self, key: str, entry: LedgerEntry, uids: set[str] | None, now: float) -> str | None:
        """Why a ready entry is to be released now: its release failed before (a DEL or a GC asked for it), or its
        pod has been gone for the grace period; None when it is not (yet)."""
        if "release_failed" in entry:
            return "its release failed: " + entry["release_failed"]
        why = self.gone(entry, uids)
        if why is None:
            self._gone_since.pop(key, None)
            return None
        since = self._gone_since.setdefault(key, now)
        return why if now - since >= self.grace_period else None

    def release(self, key: str, why: str) -> Reclaimed | None:
        """Release a ready entry (as a DEL would) unless an operation on it is running; what was released."""
        agent = self.agent
        with agent.key_lock(key, blocking=False) as free:
            current = agent.ledger.get(key) if free else None
            if current is None or current["state"] != "ready":
                return None  # a DEL or an ADD is on it, or it went
            try:
                agent.release(key, current)
            except CniError as exc:
                LOG.warning("%s: releasing it failed, tried again next pass: %s", key, exc.msg)
                self.count("failed")
                return None
        self._gone_since.pop(key, None)
        self.count("release_finished" if "release_failed" in current else "released")
        return {"key": key, "reason": why, "ip": current.get("ip")}
