"""The netlink work of the node agent, with pyroute2 (imported here, never in the CNI plugin)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import threading
import time

from pyroute2 import NetNS


def _ns(path):
    return _Namespace(path)


class Netlink:
    """Move hot-plugged NICs between the node's network namespace and pods'.

    ``host_netns`` is the node's namespace: None for the agent's own (a
    hostNetwork pod), or a path (tests run one "node" per netns).
    """

    def __init__(self, host_netns=None, poll=0.01):
        self.host_netns = host_netns or "/proc/self/ns/net"
        self.poll = poll
        self._host_ns = None
        self._host_lock = threading.Lock()

    @contextlib.contextmanager
    def _host(self):
        """The node's namespace: one netlink handle for the agent's life, one user at a time."""
        with self._host_lock:
            if self._host_ns is None:
                self._host_ns = _Namespace(self.host_netns).__enter__()
            yield self._host_ns

    def wait_for(self, mac, timeout):
        """Wait, up to ``timeout`` seconds, for the hot-plugged NIC to show up in the node."""
        deadline = time.monotonic() + timeout
        while True:
            with self._host() as host:
                if host.link_lookup(address=mac):
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.poll)

    def configure(self, mac, netns, ifname, address, prefixlen, mtu, routes):
        with self._host() as host:
            idx = host.link_lookup(address=mac)[0]
            host.link("set", index=idx, state="down")
            fd = os.open(netns, os.O_RDONLY)
            try:
                host.link("set", index=idx, net_ns_fd=fd)
            finally:
                os.close(fd)
        with _ns(netns) as pod:
            idx = pod.link_lookup(address=mac)[0]
            settings = {"ifname": ifname}
            if mtu:
                settings["mtu"] = mtu
            pod.link("set", index=idx, **settings)
            pod.addr("add", index=idx, address=address, prefixlen=prefixlen)
            pod.link("set", index=idx, state="up")
            for route in routes:
                net = ipaddress.ip_network(route["dst"], strict=False)
                pod.route("add", dst=str(net.network_address), dst_len=net.prefixlen, gateway=route["gw"], oif=idx)

    def release(self, netns, ifname, mac):
        """Move the interface back to the node (a VF returns to its host); absent is fine."""
        if not netns or not os.path.exists(netns):
            return
        with _ns(netns) as pod:
            found = pod.link_lookup(address=mac) if mac else pod.link_lookup(ifname=ifname)
            if not found:
                return
            idx = found[0]
            pod.link("set", index=idx, state="down")
            fd = os.open(self.host_netns, os.O_RDONLY)
            try:
                pod.link("set", index=idx, net_ns_fd=fd)
            finally:
                os.close(fd)

    def inspect(self, netns, ifname):
        with _ns(netns) as pod:
            found = pod.link_lookup(ifname=ifname)
            if not found:
                return None
            idx = found[0]
            link = pod.get_links(idx)[0]
            addrs = ["%s/%d" % (a.get_attr("IFA_ADDRESS"), a["prefixlen"]) for a in pod.get_addr(index=idx, family=2)]
            routes = []
            for r in pod.get_routes(family=2, table=254):
                if r.get_attr("RTA_OIF") != idx:
                    continue  # only this interface's routes (eth0's default route is the primary CNI's)
                dst = r.get_attr("RTA_DST")
                routes.append("%s/%d" % (dst or "0.0.0.0", r["dst_len"]))
            return {"mac": link.get_attr("IFLA_ADDRESS"), "addresses": addrs, "routes": routes}


class _Namespace:
    """A network namespace as a context manager: a NetNS on a path, or the agent's own."""

    def __init__(self, path):
        self.path = path
        self.ns = None

    def __enter__(self):
        if self.path == "/proc/self/ns/net":
            from pyroute2 import IPRoute

            self.ns = IPRoute()
        else:
            self.ns = NetNS(self.path)
        return self.ns

    def __exit__(self, *exc):
        self.ns.close()
