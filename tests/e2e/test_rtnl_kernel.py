"""The agent's rtnetlink requests (``capvco_sriov.rtnl``) against the kernel, checked with iproute2 (``ip -j``): what
it sets is what ``ip`` shows, what it reads is what ``ip`` shows, and a refusal is the kernel's errno."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import uuid

import pytest

from capvco_lab.netlab import NETNS_DIR, missing, sh
from capvco_sriov.netlink import in_netns
from capvco_sriov.rtnl import IPRoute, NetlinkError

from helpers import require

MAC = "52:54:00:38:0a:01"


@pytest.fixture
def netns():
    require(not missing(), "needs %s" % missing())
    names = ["rt%s" % uuid.uuid4().hex[:8] for _ in range(2)]
    for name in names:
        sh("ip", "netns", "add", name)
    yield names
    for name in names:
        subprocess.run(["ip", "netns", "del", name], check=False)


def ip_j(ns, *args):
    return json.loads(sh("ip", "-n", ns, "-j", *args).stdout or "[]")


def test_links_addresses_and_routes_as_ip_shows_them(netns):
    ns, other = netns
    sh("ip", "-n", ns, "link", "add", "rtv0", "address", MAC, "type", "veth", "peer", "name", "rtv0p")
    handle = in_netns(os.path.join(NETNS_DIR, ns), IPRoute)
    try:
        (idx,) = handle.link_lookup(address=MAC)
        assert handle.link_lookup(ifname="rtv0") == [idx]
        assert handle.link_lookup(ifname="nosuch0") == []
        handle.link("set", index=idx, ifalias="kept-name", ifname="rtmoved", mtu=1400)
        handle.link("set", index=handle.link_lookup(ifname="rtv0p")[0], state="up")
        handle.link("set", index=idx, state="up")
        handle.addr("add", index=idx, address="198.51.100.7", prefixlen=24)
        with pytest.raises(NetlinkError) as err:  # the kernel's refusal, as its errno
            handle.addr("add", index=idx, address="198.51.100.7", prefixlen=24)
        assert err.value.code == errno.EEXIST
        handle.route("add", dst="203.0.113.0", dst_len=24, gateway="198.51.100.1", oif=idx)
        (shown,) = [x for x in ip_j(ns, "link", "show") if x["ifindex"] == idx]
        assert (shown["ifname"], shown["ifalias"], shown["mtu"], "UP" in shown["flags"]) == (
            "rtmoved",
            "kept-name",
            1400,
            True,
        )
        (link,) = handle.get_links(idx)
        assert link.get_attr("IFLA_IFNAME") == "rtmoved" and link.get_attr("IFLA_IFALIAS") == "kept-name"
        assert link.get_attr("IFLA_ADDRESS") == MAC and link.get_attr("IFLA_MTU") == 1400
        addrs = ["%s/%d" % (a.get_attr("IFA_ADDRESS"), a["prefixlen"]) for a in handle.get_addr(index=idx, family=2)]
        assert addrs == ["198.51.100.7/24"]
        routes = {
            "%s/%d" % (r.get_attr("RTA_DST"), r["dst_len"])
            for r in handle.get_routes(family=socket.AF_INET, table=254)
            if r.get_attr("RTA_OIF") == idx
        }
        assert "203.0.113.0/24" in routes
        assert any(r.get("dst") == "203.0.113.0/24" and r.get("gateway") == "198.51.100.1" for r in ip_j(ns, "route"))
        handle.link("set", index=idx, ifalias="")  # cleared: no alias at all
        assert "ifalias" not in [x for x in ip_j(ns, "link", "show") if x["ifindex"] == idx][0]
        # a move to another namespace; the link is gone from this one
        handle.link("set", index=idx, state="down")
        fd = os.open(os.path.join(NETNS_DIR, other), os.O_RDONLY)
        try:
            handle.link("set", index=idx, net_ns_fd=fd)
        finally:
            os.close(fd)
        assert handle.link_lookup(address=MAC) == []
        assert [x["address"] for x in ip_j(other, "link", "show") if x["ifname"] == "rtmoved"] == [MAC]
        with pytest.raises(NetlinkError) as err:
            handle.link("set", index=idx, ifname="gone")
        assert err.value.code == errno.ENODEV
    finally:
        handle.close()
