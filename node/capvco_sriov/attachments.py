"""An attachment's NIC on the platform, for one VM: attached at a chosen address, and let go, with what the ledger
records at each step (:class:`Attachments`; the CNI commands are ``commands.NicAgent``'s, which is one).

On the collection's own platform client and NIC operations:

- NIC identity by address: the agent chooses a free address (``addresses.Addresses``) and attaches at it, so its
  NIC is the VM's NIC at that address, whatever else is on the network; one platform mutation per ADD, then one
  read for the MAC;
- the ledger (``ledger.Ledger``) written at each step of an ADD ("chosen", "sent", "attached"; "ready" is the
  command's, once the pod's interface is configured);
- one lock per VM around each platform mutation (not the reads): concurrent pods queue, none fails for
  contention;
- settling an entry (:meth:`Attachments.settle`, by ``settle.settle_decision``), which DEL, an ADD's rollback,
  recovery and the reclaimer share.

``netlink`` is any object with ``wait_for(mac, timeout)``, ``configure(mac, netns, ifname, address, prefixlen,
mtu, routes)``, ``release(netns, ifname, mac)``, ``inspect(netns, ifname)`` (:class:`NetlinkOps`).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from ansible_collections.whitesky.capvco.plugins.module_utils.machines import nics
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError, LogicError, WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.retry import RETRY_STATUSES
from capvco_sriov.addresses import Addresses
from capvco_sriov.config import is_mac
from capvco_sriov.ledger import Ledger, LedgerEntry
from capvco_sriov.settle import Decision, settle_decision
from capvco_sriov.wire import INVALID_CONFIG, IO_FAILURE, TRY_AGAIN_LATER, CniError, plain, shown

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from capvco_sriov.results import LinkState
    from capvco_sriov.wire import Route

LOG = logging.getLogger("capvco-sriov-agent")

#: How many addresses one ADD tries when the platform says the chosen one is taken (by another VM's agent, an
#: operator, the platform itself) before it answers "try again later".
ADDRESS_TRIES = 5


class ReleaseFailed(Exception):
    """Moving an attachment's NIC back to the node failed: its entry is kept (``release_failed``), for the next DEL
    or the reclaimer to finish; the NIC is where the failed move left it (in the pod, its steps undone)."""


class NetlinkOps(Protocol):
    """What the agent needs of netlink (``netlink.Netlink``; the tests' fakes)."""

    def wait_for(self, mac: str, timeout: float) -> bool: ...

    def configure(
        self, mac: str, netns: str, ifname: str, address: str, prefixlen: int, mtu: int | None, routes: list[Route]
    ) -> bool: ...

    def release(self, netns: str, ifname: str, mac: str | None) -> None: ...

    def inspect(self, netns: str, ifname: str) -> LinkState | None: ...


class Attachments:
    """Attach and let go of pod NICs on the platform for one VM, each step written into the ledger, one operation
    per attachment at a time (:meth:`key_lock`)."""

    def __init__(
        self,
        client: WhiteskyClient,
        location: str,
        cloudspace_id: str,
        vm_id: int,
        ledger: Ledger,
        netlink: NetlinkOps,
        model: str = "virtio",
        wait_timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        in_flight: float | None = None,
    ) -> None:
        self.client = client
        self.location = location
        self.cloudspace_id = cloudspace_id
        self.vm_id = vm_id
        self.ledger = ledger
        self.netlink = netlink
        #: the NIC model attached when the network configuration names none
        self.model = model
        #: how long an attached NIC may take to appear on the node
        self.wait_timeout = wait_timeout
        self.clock = clock
        #: How long after it was sent an attach with no answer may still land: twice the most a call may take.
        deadlines = client.transport.deadlines
        self.in_flight = in_flight if in_flight is not None else 2 * (deadlines.timeout + deadlines.retry_budget)
        self.vm_lock = threading.Lock()  # every platform mutation of this VM, in turn
        self.addresses = Addresses(client, location, rng)
        self._key_guard = threading.Lock()
        # ledger key -> [lock, users]: one operation per attachment at a time
        self._key_locks: dict[str, list[Any]] = {}
        self._networks: list[Any] | None = None

    @contextlib.contextmanager
    def key_lock(self, key: str, blocking: bool = True) -> Iterator[bool]:
        """One operation per attachment at a time; yields False (and holds nothing) when ``blocking`` is off
        and another operation holds it."""
        with self._key_guard:
            held = self._key_locks.setdefault(key, [threading.Lock(), 0])
            held[1] += 1
        got = held[0].acquire(blocking)
        try:
            yield got
        finally:
            if got:
                held[0].release()
            with self._key_guard:
                held[1] -= 1
                if not held[1]:
                    del self._key_locks[key]

    def network(self, wanted: str | int) -> dict[str, Any]:
        if self._networks is None:
            self._networks = self.client.external_networks(self.location)
        try:
            net: dict[str, Any] = nics.find_network(self._networks, wanted, self.location)
        except ValueError:  # its message shows the name as given: this one shows only a plain one
            name = str(wanted)
            names = ", ".join("%s (%s)" % (n.get("name"), n.get("external_network_id")) for n in self._networks)
            raise CniError(
                INVALID_CONFIG,
                "external network %s not found in location %s"
                % (shown(name) if plain(name) else "(a name not shown)", shown(self.location)),
                "it has: %s" % (names or "none"),
            ) from None
        return net

    @staticmethod
    def platform_error(exc: WhiteskyError) -> CniError:
        """A platform failure as a CNI error: try again later (11) when the platform said "not now"."""
        status = getattr(exc, "status", None)
        later = isinstance(exc, ApiError) and (status is None or status == 409 or status in RETRY_STATUSES)
        return CniError(TRY_AGAIN_LATER if later else IO_FAILURE, "platform call failed", exc)

    @contextlib.contextmanager
    def _sending(self, key: str, entry: LedgerEntry) -> Iterator[str]:
        """The VM's lock around the attach call: once it is held, the address is confirmed against a fresh list
        (:meth:`Addresses.confirm`; another one when it was taken meanwhile), and "sent" is written with it, right
        before the call, which attaches at the address yielded; once the platform has answered, the entry is
        "attached" (in memory; written with the MAC)."""
        with self.vm_lock:
            try:
                entry["ip"] = self.addresses.confirm(entry["network_id"], entry["ip"])
            except (WhiteskyError, CniError) as exc:  # nothing was sent: the choice is dropped
                self.ledger.delete(key)
                raise self.platform_error(exc) if isinstance(exc, WhiteskyError) else exc from None
            entry["state"] = "sent"
            entry["sent_at"] = self.clock()
            self.ledger.put(key, entry)
            yield entry["ip"]
            entry["state"] = "attached"

    def attach(self, key: str, entry: LedgerEntry, model: str) -> None:
        """Choose an address, write it down ("chosen"), attach there ("sent", then "attached" with the NIC's MAC);
        another address when it is taken.

        A refusal (the platform answered, nothing attached) drops the entry.  An outcome that is not known (no
        answer, or the read of the new NIC failed) is settled at once when the platform answers, else left to the
        reclaimer, by what the entry's state proves (:func:`settle_decision`).
        """
        net_id = entry["network_id"]
        refresh = False
        for _ in range(ADDRESS_TRIES):
            try:
                entry["ip"] = self.addresses.choose(net_id, refresh=refresh)
            except WhiteskyError as exc:
                raise self.platform_error(exc) from None
            entry["state"] = "chosen"
            entry.pop("sent_at", None)
            # the choice, before waiting for the VM's lock (for the reclaimer and the metrics to see); no fsync: a
            # "chosen" entry proves nothing was sent, so a crash that loses it loses nothing ("sent" is durable)
            self.ledger.put(key, entry, durable=False)
            try:
                nic = nics.attach_at(
                    self.client,
                    self.cloudspace_id,
                    self.vm_id,
                    net_id,
                    entry["ip"],
                    model=model,
                    lock=self._sending(key, entry),
                )
            except nics.AddressTaken:
                self.ledger.delete(key)
                refresh = True  # the list was stale: read it again for the next choice
                continue
            except WhiteskyError as exc:
                self.unknown_outcome(key, entry, exc)
            mac = nic.get("mac_address") if isinstance(nic, dict) else None
            if not is_mac(mac):  # as a read that failed: the first read that gives one names the NIC
                self.unknown_outcome(key, entry, LogicError("the platform gave no MAC for the NIC at %s" % entry["ip"]))
            entry["mac"] = mac.lower()
            self.ledger.put(key, entry)  # "attached", with the MAC
            return
        raise CniError(
            TRY_AGAIN_LATER,
            "the platform refused %d free-looking addresses on external network %s in turn" % (ADDRESS_TRIES, net_id),
        )

    def unknown_outcome(self, key: str, entry: LedgerEntry, exc: WhiteskyError) -> NoReturn:
        """The attach failed: a refusal (an answer to the POST) drops the entry; anything else is settled now if the
        platform answers, else by the reclaimer."""
        if isinstance(exc, ApiError) and exc.status is not None and exc.method == "POST":
            self.ledger.delete(key)  # refused: nothing was attached
        else:
            if entry["state"] == "attached":
                self.ledger.put(key, entry)  # the platform answered: write that down before anything else
            with contextlib.suppress(WhiteskyError, ReleaseFailed):
                self.settle(key, entry)
        raise self.platform_error(exc) from None

    # -- settling: DEL, rollback, recovery and the reclaimer ---------------------------
    def settle(self, key: str, entry: LedgerEntry) -> tuple[Decision, str]:
        """Settle an entry by :func:`settle_decision` on a fresh read of its address: detach what is proven the
        agent's, drop what the platform shows gone, keep (and, for a person, report) the rest.  An entry goes only
        when the platform shows its NIC gone.  A platform failure propagates; the entry stays as it was.

        A NIC proven the agent's is detached where it is: the hot-unplug takes the device out of the pod with it,
        and billing stops at once.  A NIC that stays attached (kept, held, waited on, or a detach that failed), or a
        device the unplug left behind (a platform whose detach keeps it on the node, an unplug still under way),
        goes back to the node under its original name (:meth:`move_back`; after a detach that took it, one look
        finds nothing).  A move that fails is logged, written into the entry (``release_failed``) and raised
        (:class:`ReleaseFailed`); the entry is kept, for the next DEL or the reclaimer."""
        mac = entry.get("mac")
        sent = entry["state"] != "chosen"  # an entry without a MAC put nothing into the pod
        nic = None
        if sent:
            nic = nics.nic_at(self.client, self.cloudspace_id, self.vm_id, entry["ip"], entry["network_id"])
        decision, why = settle_decision(entry, nic, self.clock(), self.in_flight)
        net_id, ip = entry["network_id"], entry["ip"]
        if decision == "detach":
            try:
                with self.vm_lock:
                    nics.detach(self.client, self.cloudspace_id, self.vm_id, ip, net_id)
            except WhiteskyError:
                if sent and mac:  # it may still be attached: on the node, under its name
                    with contextlib.suppress(ReleaseFailed):  # written into the entry; the platform's error answers
                        self.move_back(key, entry, mac)
                raise
        if sent and mac:
            self.move_back(key, entry, mac)
        if decision in ("detach", "drop"):
            self.ledger.delete(key)
            self.addresses.keep(net_id, ip, kept=False)
            if nic is None or decision == "detach":
                self.addresses.give_back(net_id, ip)
            return decision, why
        self.addresses.keep(net_id, ip)
        if decision == "hold" and entry.get("held") != why:
            entry["held"] = why
            LOG.warning("%s: left for a person: %s", key, why)
        if self.ledger.get(key) != entry:
            self.ledger.put(key, entry)
        return decision, why

    def move_back(self, key: str, entry: LedgerEntry, mac: str) -> None:
        """The entry's NIC back on the node under its original name, wherever it is (nothing when it is gone); a
        move that fails is logged, written into the entry (``release_failed``, its address kept from other ADDs)
        and raised as :class:`ReleaseFailed`."""
        try:
            self.netlink.release(entry["netns"], entry["ifname"], mac)
        except Exception as exc:
            why = "moving its NIC (MAC %s) back to the node failed: %s" % (mac, exc)
            LOG.warning("%s: %s; kept, tried again later", key, why)
            entry["release_failed"] = why
            self.ledger.put(key, entry)
            self.addresses.keep(entry["network_id"], entry["ip"])
            raise ReleaseFailed(why) from exc
        entry.pop("release_failed", None)
