"""The CNI result of an attachment (pure): what an ADD answers, from its ledger entry, and how CHECK compares the
live interface (``netlink.inspect``, :class:`LinkState`) with what was answered (``prevResult``, or the entry)."""

from __future__ import annotations

import ipaddress
from typing import Any, TypedDict

from capvco_sriov.config import CniRequest, PrevResult
from capvco_sriov.ledger import LedgerEntry
from capvco_sriov.wire import CHECK_MISMATCH, CniError

#: A CNI result (or an empty answer), as the plugin prints it.
CniResult = dict[str, Any]


class LinkState(TypedDict):
    """A pod's interface as netlink finds it (``inspect``): its MAC, ``address/prefix`` list and route list."""

    mac: str
    addresses: list[str]
    routes: list[str]


def result(req: CniRequest, entry: LedgerEntry) -> CniResult:
    """What an ADD answers for a ready entry: the pod's interface, its address and its routes, in the request's
    CNI version."""
    net = ipaddress.ip_network("%s/%s" % (entry["ip"], entry["prefixlen"]), strict=False)
    routes = [{"dst": r["dst"], **({"gw": r["gw"]} if r.get("gw") else {})} for r in entry["routes"]]
    return {
        "cniVersion": req.version,
        "interfaces": [{"name": req.ifname, "mac": entry.get("mac"), "sandbox": entry["netns"]}],
        "ips": [{"address": "%s/%d" % (entry["ip"], net.prefixlen), "interface": 0}],
        "routes": routes,
        "dns": {},
    }


def check(req: CniRequest, entry: LedgerEntry, live: LinkState | None) -> None:
    """Compare the live interface with ``prevResult`` (or the entry): a :class:`CniError` 100 naming the first
    difference (its MAC, an address, a route, a default route the primary CNI owns), nothing when they agree."""
    prev = req.conf.prev_result or PrevResult((), (), ())
    if live is None:
        raise CniError(CHECK_MISMATCH, "interface %s is missing in %s" % (req.ifname, req.netns))
    want_mac = {i.mac for i in prev.interfaces if i.name == req.ifname and i.mac} or {entry.get("mac", "")}
    if str(live["mac"]).lower() not in want_mac:
        raise CniError(
            CHECK_MISMATCH,
            "interface %s has MAC %s, expected %s" % (req.ifname, live["mac"], sorted(map(str, want_mac))),
        )
    mine = [ip.address for ip in prev.ips if ip.interface is None or prev.interfaces[ip.interface].name == req.ifname]
    for address in mine if prev.ips else ["%s/%s" % (entry["ip"], entry["prefixlen"])]:
        if address not in live["addresses"]:
            raise CniError(CHECK_MISMATCH, "address %s is missing on %s" % (address, req.ifname))
    for dst in prev.routes:
        if dst not in live["routes"]:
            raise CniError(CHECK_MISMATCH, "route %s is missing in %s" % (dst, req.netns))
    if "0.0.0.0/0" in live["routes"]:
        raise CniError(CHECK_MISMATCH, "a default route points at %s; the primary CNI owns it" % req.ifname)
