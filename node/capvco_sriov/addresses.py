"""The addresses the agent may choose for a pod's NIC on each external network (NIC identity by address: the agent
chooses the address and attaches there, so its NIC is the VM's NIC at that address)."""

from __future__ import annotations

import contextlib
import ipaddress
import random
import threading
import time
from typing import TYPE_CHECKING

from capvco_sriov.wire import TRY_AGAIN_LATER, CniError

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

#: The oldest free-address list an ADD confirms its choice against, once it holds the VM's lock (seconds): one read
#: per agent in that time at most, and a list no older than that when many agents share a network.
FRESH_SECONDS = 2.0


class Addresses:
    """The addresses this agent may choose on each external network: what the platform last listed as free
    (``getExternalNetworkAddresses``), less what this agent has chosen since, and less the addresses of entries it
    keeps unsettled (:meth:`keep`: an attach that may still land, a NIC left for a person).  The list is read once
    per network and again only when it runs dry or an address turns out taken, so an ADD costs no read for it.
    The choice is random, so agents on different nodes rarely choose the same address at once; an ADD confirms its
    choice once it holds the VM's lock (:meth:`confirm`), against a list at most :data:`FRESH_SECONDS` old, so that
    the choices of many agents sharing a network meet the platform's list as it is, not as it was when the ADDs
    arrived (a taken address costs a refused attach: a mutating call of the credential's budget)."""

    def __init__(self, client: WhiteskyClient, location: str, rng: random.Random | None = None) -> None:
        self.client = client
        self.location = location
        self.rng = rng or random.SystemRandom()
        self._lock = threading.Lock()
        self._free: dict[int, set[str]] = {}  # network id -> set of addresses
        self._read_at: dict[int, float] = {}  # network id -> when its list was read (time.monotonic)
        #: network id -> {address chosen by an ADD not yet confirmed: when the list it came from was read}; such an
        #: address is never chosen again
        self._pending: dict[int, dict[str, float]] = {}
        self._kept: dict[int, set[str]] = {}  # network id -> addresses of unsettled entries: never chosen

    def _read(self, net_id: int) -> set[str]:
        self._read_at[net_id] = time.monotonic()
        listed = self.client.free_addresses(self.location, net_id)
        free: set[str] = set()
        for ip in listed if isinstance(listed, list) else []:
            with contextlib.suppress(ValueError, TypeError):  # what is no address is not a free one
                free.add(str(ipaddress.ip_address(ip)))
        return free

    def choose(self, net_id: int, refresh: bool = False) -> str:
        """An address for an ADD that has just arrived (it is confirmed once the ADD holds the VM's lock)."""
        with self._lock:  # one read for a burst of first ADDs
            ip = self._choose(net_id, refresh)
            self._pending.setdefault(net_id, {})[ip] = self._read_at[net_id]
            return ip

    def confirm(self, net_id: int, ip: str) -> str:
        """The address to attach at, for an ADD that chose ``ip`` and now holds the VM's lock: the agent's list is
        read again when it is older than :data:`FRESH_SECONDS`; ``ip`` stands when that list is the one it was
        chosen from, or has it free; else another choice from it."""
        with self._lock:
            chosen_from = self._pending.get(net_id, {}).pop(ip, None)
            read_at = self._read_at.get(net_id)
            if read_at is None or time.monotonic() - read_at > FRESH_SECONDS:
                self._free[net_id] = self._read(net_id)
            elif chosen_from == read_at:  # chosen from this very list, which is fresh
                return ip
            free = self._free[net_id]
            if ip in free and ip not in self._kept.get(net_id, set()):
                free.discard(ip)
                return ip
            return self._choose(net_id, False)

    def _choose(self, net_id: int, refresh: bool) -> str:
        kept = self._kept.get(net_id, set()) | set(self._pending.get(net_id, ()))
        free = self._free.get(net_id)
        if free is None or refresh or not free - kept:
            free = self._free[net_id] = self._read(net_id)
        candidates = free - kept
        if not candidates:
            raise CniError(TRY_AGAIN_LATER, "no free address on external network %s" % net_id)
        ip = self.rng.choice(sorted(candidates))  # in a fixed order (a seeded rng chooses the same); as text: cheap
        free.discard(ip)
        return ip

    def give_back(self, net_id: int, ip: str) -> None:
        """An address this agent released is free again (as far as it knows)."""
        with self._lock:
            if ip and net_id in self._free:
                self._free[net_id].add(ip)

    def keep(self, net_id: int, ip: str, kept: bool = True) -> None:
        """Never choose ``ip`` while an unsettled entry holds it (``kept=False``: settled, choosable again)."""
        with self._lock:
            if kept:
                self._kept.setdefault(net_id, set()).add(ip)
            else:
                self._kept.get(net_id, set()).discard(ip)
