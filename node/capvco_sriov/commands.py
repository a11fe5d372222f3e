"""The CNI commands (ADD, DEL, CHECK, GC, STATUS) for one VM's pods: :class:`NicAgent`, one command per attachment
at a time (``Attachments.key_lock``), on the platform side of its attachments (``attachments.Attachments``: the
attach with its ledger steps, settling an entry), the pod's side (netlink: the interface configured, inspected,
moved back) and the CNI result (``results``).

An ADD attaches (``Attachments.attach``), waits for the NIC on the node, configures the pod's interface and writes
the entry "ready"; a failure halfway is rolled back (the entry settled).  A saved result is answered again while it
is still true.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError, WhiteskyError
from capvco_sriov import results
from capvco_sriov.attachments import Attachments, ReleaseFailed
from capvco_sriov.config import CniRequest
from capvco_sriov.ledger import LedgerEntry, stray_key
from capvco_sriov.results import CniResult
from capvco_sriov.settle import Decision
from capvco_sriov.wire import (
    INVALID_CONFIG,
    IO_FAILURE,
    PLUGIN_NOT_AVAILABLE,
    TRY_AGAIN_LATER,
    UNKNOWN_CONTAINER,
    CniError,
)

if TYPE_CHECKING:
    from capvco_sriov.wire import Route

LOG = logging.getLogger("capvco-sriov-agent")


class NicAgent(Attachments):
    """Attach, configure, release and reclaim pod NICs for one VM: the CNI commands, on :class:`Attachments`."""

    # -- CNI commands --------------------------------------------------------
    def handle(self, req: CniRequest) -> CniResult:
        """Run one CNI command (``config.parse_request`` has refused any other); an attachment's commands one at a
        time."""
        commands: dict[str, Callable[[CniRequest], CniResult]] = {
            "ADD": self.cmd_add,
            "DEL": self.cmd_del,
            "CHECK": self.cmd_check,
            "GC": self.cmd_gc,
            "STATUS": self.cmd_status,
        }
        run = commands[req.command]
        if req.command in ("ADD", "DEL", "CHECK"):
            with self.key_lock(req.key):  # a runtime retrying a slow ADD waits, then gets the same outcome
                return run(req)
        return run(req)

    def cmd_add(self, req: CniRequest) -> CniResult:
        """Attach a NIC for the pod and configure its interface; the saved result when it is still true."""
        existing = self.ledger.get(req.key)
        if existing is not None:
            if existing["state"] == "ready" and "release_failed" not in existing and self.still_in_place(req, existing):
                return results.result(req, existing)
            self.clear(req.key, existing)  # a stale entry (a new netns, the old one gone), or an ADD's leftover
        net = self.network(req.conf.network or "")
        prefixlen = ipaddress.ip_network("0.0.0.0/%s" % net["subnet_mask"]).prefixlen
        routes: list[Route] = [{"dst": r["dst"], "gw": r.get("gw") or net["gateway"]} for r in req.conf.routes]
        entry: LedgerEntry = {
            "state": "chosen",
            "pod_uid": req.pod_uid,
            "netns": req.netns,
            "ifname": req.ifname,
            "network": req.conf.network or "",
            "config_name": req.conf.name,
            "network_id": net["external_network_id"],
            "since": self.clock(),
            "prefixlen": prefixlen,
            "routes": routes,
            "mtu": req.conf.mtu,
            "ip": "",
        }
        self.attach(req.key, entry, req.conf.model or self.model)
        mac = entry["mac"]
        try:
            if not self.netlink.wait_for(mac, self.wait_timeout):
                raise CniError(IO_FAILURE, "the NIC %s did not appear within %ss" % (mac, self.wait_timeout))
            if not self.netlink.configure(mac, req.netns, req.ifname, entry["ip"], prefixlen, entry["mtu"], routes):
                LOG.warning("%s: %s is up but not running (no carrier) after the wait: answered anyway", req.key, mac)
        except Exception as exc:
            released = self.rollback(req.key, entry)
            kept = "the NIC could not be shown released: it stays in the ledger, reported"
            if isinstance(exc, CniError):
                raise CniError(exc.code, exc.msg + ("" if released else "; " + kept), exc.details) from None
            outcome = "the NIC was released" if released else kept
            raise CniError(IO_FAILURE, "configuring the pod's interface failed; " + outcome, exc) from None
        entry["state"] = "ready"
        self.ledger.put(req.key, entry)
        return results.result(req, entry)

    def clear(self, key: str, entry: LedgerEntry) -> None:
        """Make room under ``key`` for a fresh ADD: release a stale ready entry, settle an ADD's leftover, and keep
        aside (:func:`stray_key`) one that stays unsettled, for the reclaimer."""
        decision, _why = self.release(key, entry)
        if decision in ("wait", "hold"):
            current = self.ledger.get(key) or entry
            self.ledger.put(stray_key(key, current["ip"]), current)
            self.ledger.delete(key)

    def still_in_place(self, req: CniRequest, entry: LedgerEntry) -> bool:
        """Whether a saved result is still true: the same netns, with the entry's NIC in it under the ifname."""
        if entry.get("netns") != req.netns:
            return False
        try:
            live = self.netlink.inspect(req.netns, req.ifname)
        except Exception:  # cannot tell (netlink trouble): the saved result stands, as before
            return True
        return live is not None and live.get("mac") == entry.get("mac")

    def rollback(self, key: str, entry: LedgerEntry) -> bool:
        """Undo a half-done ADD: the interface back to the node, the NIC detached, the entry gone; True when so.
        An entry whose NIC the platform cannot be shown to have let go stays, for the reclaimer (False)."""
        try:
            decision, _why = self.settle(key, entry)
        except (WhiteskyError, ReleaseFailed):
            return False
        return decision in ("drop", "detach")

    def cmd_del(self, req: CniRequest) -> CniResult:
        """Release the attachment's NIC (nothing when the agent does not know it)."""
        entry = self.ledger.get(req.key)
        if entry is None:
            return {}  # never ours, already released, or a late DEL after the NIC was reclaimed
        self.release(req.key, entry)
        return {}

    def release(self, key: str, entry: LedgerEntry) -> tuple[Decision, str]:
        """Move the pod's NIC back to the node and detach it from the VM, as far as the entry's state proves it the
        agent's (:meth:`settle`); a platform failure, or a move that failed (the entry kept for the reclaimer), is a
        CNI error: 11, try again later."""
        try:
            return self.settle(key, entry)
        except ApiError as exc:
            raise self.platform_error(exc) from None
        except ReleaseFailed as exc:
            raise CniError(
                TRY_AGAIN_LATER, "moving the NIC back to the node failed; the agent tries again", exc
            ) from None

    def cmd_check(self, req: CniRequest) -> CniResult:
        """Compare the live interface with ``prevResult`` (or the entry); 100 naming the first difference
        (``results.check``)."""
        entry = self.ledger.get(req.key)
        if entry is None or entry["state"] != "ready":
            raise CniError(
                UNKNOWN_CONTAINER, "no attachment for container %s, ifname %s" % (req.container_id, req.ifname)
            )
        results.check(req, entry, self.netlink.inspect(req.netns, req.ifname))
        return {}

    def cmd_gc(self, req: CniRequest) -> CniResult:
        """Release the attachments of this network configuration (by its ``name``, as the spec scopes GC) that the
        runtime no longer lists; other configurations' attachments, on the same platform network or not, stay."""
        valid = req.conf.valid_attachments
        if valid is None:  # parse_request refuses a GC without the list; never read its absence as "none valid"
            raise CniError(INVALID_CONFIG, "invalid cni.dev/valid-attachments: a list of objects")
        failed: list[CniError] = []
        for key, entry in self.ledger.items().items():
            if key not in valid and entry["state"] == "ready" and entry["config_name"] == req.conf.name:
                try:
                    self.release(key, entry)
                except CniError as exc:  # the others are released all the same
                    failed.append(exc)
        if failed:
            raise CniError(failed[0].code, "%d attachment(s) not released: %s" % (len(failed), failed[0].msg))
        return {}

    def cmd_status(self, req: CniRequest) -> CniResult:
        """50 when the platform cannot be reached."""
        try:
            self.client.external_networks(self.location)
        except ApiError as exc:
            raise CniError(PLUGIN_NOT_AVAILABLE, "the platform is not reachable", exc) from None
        return {}
