"""The netlink work of the node agent, with pyroute2 (imported here, never in the CNI plugin).

All of it runs on one worker thread, which holds the node's netlink socket
for the agent's life (pyroute2's sockets belong to the thread that made them).
A socket in a pod's network namespace is made on that thread: ``setns`` into
the namespace, create the socket, ``setns`` back (a socket stays in the
namespace it was made in); pyroute2's own ``NetNS`` forks a helper process for
that, about three times the cost.  Waiting for a hot-plugged NIC sleeps on the
node's link notifications (``RTMGRP_LINK``), not on a timer, and off the worker.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import select
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from pyroute2 import IPRoute
from pyroute2.netns import setns

if TYPE_CHECKING:
    from capvco_sriov.commands import LinkState
    from capvco_sriov.wire import Route

OWN = "/proc/self/ns/net"
RTMGRP_LINK = 1
IFF_LOWER_UP = 0x10000
#: Seconds an ADD waits, once the pod's interface is up, for the kernel to say it runs (carrier, and operstate UP:
#: until then a packet the pod sends is dropped); a link that never runs (a VF without a cable) is answered anyway.
RUNNING_WAIT = 3.0

T = TypeVar("T")


def in_netns(path: str, make: Callable[[], T]) -> T:
    """``make()``, run with this thread in the network namespace at ``path`` (the agent's own: as it is)."""
    if path == OWN:
        return make()
    back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(path, os.O_RDONLY)
        try:
            setns(target)
        finally:
            os.close(target)
        try:
            return make()
        finally:
            setns(back)
    finally:
        os.close(back)


@contextlib.contextmanager
def netns_socket(path: str) -> Iterator[IPRoute]:
    """A pyroute2 handle in the network namespace at ``path``, closed after use."""
    handle = in_netns(path, IPRoute)
    try:
        yield handle
    finally:
        handle.close()


class Netlink:
    """Move hot-plugged NICs between the node's network namespace and pods'.

    ``host_netns`` is the node's namespace: None for the agent's own (a
    hostNetwork pod), or a path (tests run one "node" per netns).
    """

    def __init__(self, host_netns: str | None = None) -> None:
        self.host_netns = host_netns or OWN
        self._host_handle: IPRoute | None = None  # made and used on the worker only
        # MAC -> the node's ifindex of it, as the wait found it (configure takes it from here)
        self._index: dict[str, int] = {}
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="netlink")

    def _run(self, work: Callable[..., T], *args: Any) -> T:
        """``work(host, *args)`` on the worker, with the node's handle."""

        def call() -> T:
            if self._host_handle is None:
                self._host_handle = in_netns(self.host_netns, IPRoute)
            return work(self._host_handle, *args)

        return self._worker.submit(call).result()

    def wait_for(self, mac: str, timeout: float) -> bool:
        """Wait, up to ``timeout`` seconds, for the hot-plugged NIC to show up in the node: the link notifications
        wake the wait, so it ends as soon as the NIC is there (the listener is up before the look it waits after)."""
        deadline = time.monotonic() + timeout
        if self._run(self._find, mac):  # already there (no listener needed)
            return True
        events = in_netns(
            self.host_netns, lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        )
        try:
            events.bind((0, RTMGRP_LINK))
            events.setblocking(False)
            while not self._run(self._find, mac):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if select.select([events], [], [], left)[0]:
                    with contextlib.suppress(BlockingIOError):
                        while events.recv(65536):
                            pass
            return True
        finally:
            events.close()

    def _find(self, host: IPRoute, mac: str) -> bool:
        found = host.link_lookup(address=mac)
        if found:
            self._index[mac] = found[0]
        return bool(found)

    def configure(
        self, mac: str, netns: str, ifname: str, address: str, prefixlen: int, mtu: int | None, routes: list[Route]
    ) -> bool:
        """Move and set up the NIC in the pod; whether the kernel said it runs within :data:`RUNNING_WAIT`."""
        return self._run(_configure, self._index.pop(mac, None), mac, netns, ifname, address, prefixlen, mtu, routes)

    def release(self, netns: str, ifname: str, mac: str | None) -> None:
        """Move the interface with ``mac`` back to the node (a VF returns to its host); absent is fine.  Found by its
        MAC only, never by its name: an entry whose MAC was never known (its attach's answer never came) put nothing
        into the pod, and the pod's ``net1`` may by now be another attachment's (a retried ADD's)."""
        if not mac or not netns or not os.path.exists(netns):
            return
        self._run(_release, self.host_netns, netns, ifname, mac)

    def inspect(self, netns: str, ifname: str) -> LinkState | None:
        return self._run(_inspect, netns, ifname)


def _index_of(handle: IPRoute, idx: int | None, mac: str) -> int:
    """The ifindex of the link with ``mac``: ``idx`` when that link still has it (one get), else a lookup."""
    if idx is not None:
        try:
            if handle.get_links(idx)[0].get_attr("IFLA_ADDRESS") == mac:
                return idx
        except Exception:  # gone, or renumbered: look it up
            pass
    found: list[int] = handle.link_lookup(address=mac)
    return found[0]


def _configure(
    host: IPRoute,
    idx: int | None,
    mac: str,
    netns: str,
    ifname: str,
    address: str,
    prefixlen: int,
    mtu: int | None,
    routes: list[Route],
) -> bool:
    """Move the NIC into the pod, renamed and with its MTU in the same request (the move takes it down), then
    address it, bring it up, wait until it runs (:func:`_running`) and add its routes there.  The kernel keeps the
    ifindex across the move when it is free in the pod, so the pod's side is one get, not a dump."""
    if idx is None:  # the wait found it a moment ago, else look it up now
        idx = host.link_lookup(address=mac)[0]
    fd = os.open(netns, os.O_RDONLY)
    try:
        settings: dict[str, int | str] = {"net_ns_fd": fd, "ifname": ifname}
        if mtu:
            settings["mtu"] = mtu
        host.link("set", index=idx, **settings)
    finally:
        os.close(fd)
    with netns_socket(netns) as pod:
        idx = _index_of(pod, idx, mac)
        pod.addr("add", index=idx, address=address, prefixlen=prefixlen)
        pod.link("set", index=idx, state="up")
        running = _running(pod, idx, time.monotonic() + RUNNING_WAIT)
        for route in routes:
            net = ipaddress.ip_network(route["dst"], strict=False)
            pod.route("add", dst=str(net.network_address), dst_len=net.prefixlen, gateway=route["gw"], oif=idx)
    return running


def _running(pod: IPRoute, idx: int, deadline: float) -> bool:
    """Wait until the link runs: carrier (``IFF_LOWER_UP``) and operstate UP (or UNKNOWN, for a link that reports
    none), which the kernel sets once it has given the link its queue; before that the pod's first packets are
    dropped.  Usually true at the first look (one get); polled every 2 ms until ``deadline``."""
    while True:
        link = pod.get_links(idx)[0]
        if link["flags"] & IFF_LOWER_UP and link.get_attr("IFLA_OPERSTATE") in ("UP", "UNKNOWN"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002)


def _release(_host: IPRoute, host_netns: str, netns: str, ifname: str, mac: str) -> None:
    with netns_socket(netns) as pod:
        found = pod.link_lookup(address=mac)
        if not found:
            return
        idx = found[0]
        pod.link("set", index=idx, state="down")
        fd = os.open(host_netns, os.O_RDONLY)
        try:
            pod.link("set", index=idx, net_ns_fd=fd)
        finally:
            os.close(fd)


def _inspect(_host: IPRoute, netns: str, ifname: str) -> LinkState | None:
    with netns_socket(netns) as pod:
        found = pod.link_lookup(ifname=ifname)
        if not found:
            return None
        idx = found[0]
        link = pod.get_links(idx)[0]
        addrs = ["%s/%d" % (a.get_attr("IFA_ADDRESS"), a["prefixlen"]) for a in pod.get_addr(index=idx, family=2)]
        routes: list[str] = []
        for r in pod.get_routes(family=2, table=254):
            if r.get_attr("RTA_OIF") != idx:
                continue  # only this interface's routes (eth0's default route is the primary CNI's)
            dst = r.get_attr("RTA_DST")
            routes.append("%s/%d" % (dst or "0.0.0.0", r["dst_len"]))
        return {"mac": link.get_attr("IFLA_ADDRESS"), "addresses": addrs, "routes": routes}
