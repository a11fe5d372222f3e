"""The netlink work of the node agent, on rtnetlink sockets of its own (``rtnl``; never imported by the CNI plugin).

Every change runs on one worker thread, which holds the node's netlink socket
for the agent's life; the waits (for a hot-plugged NIC, for a pod's interface
to run) are the calling thread's, so that one pod's wait never holds up another.
A NIC goes into a pod and back as host-device moves a device: its node name kept
in its alias, a temporary name while it moves, each step undone when a later one
fails (:func:`_move_in`, :func:`_release`).  A socket in a pod's network
namespace is made on that thread: ``setns`` into the namespace, create the socket, ``setns`` back (a socket stays in the
namespace it was made in).  Waiting for a hot-plugged NIC sleeps on the
node's link notifications (``RTMGRP_LINK``), not on a timer, and off the worker.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
import select
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from capvco_sriov.rtnl import IPRoute, NetlinkError, setns

if TYPE_CHECKING:
    from capvco_sriov.results import LinkState
    from capvco_sriov.wire import Route

LOG = logging.getLogger("capvco-sriov-agent")
OWN = "/proc/self/ns/net"
RTMGRP_LINK = 1
IFF_UP = 0x1
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
    """A netlink handle in the network namespace at ``path``, closed after use."""
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
        """Move and set up the NIC in the pod (a failure leaves it on the node, as it was); whether the kernel said
        it runs within :data:`RUNNING_WAIT`.  The moves are the netlink worker's (:func:`_move_in`,
        :func:`_add_routes`, one pod at a time); the wait for carrier between them is this thread's, with a handle
        of its own in the pod, so that pods whose NICs have no carrier wait beside each other, never in turn."""
        idx = self._index.pop(mac, None)
        moved = self._run(_move_in, self.host_netns, idx, mac, netns, ifname, address, prefixlen, mtu)
        try:
            running = moved.running
            if not running:
                deadline = time.monotonic() + RUNNING_WAIT
                with netns_socket(netns) as pod:
                    running = _running(pod, moved.pidx, deadline)
            self._run(_add_routes, moved, routes)
        except BaseException:
            self._run(moved.undo)
            raise
        finally:
            self._run(moved.close)
        return running

    def release(self, netns: str, ifname: str, mac: str | None) -> None:
        """Move the interface with ``mac`` back to the node under its original name (:func:`_release`); absent is
        fine.  Found by its MAC, never by its name alone (``ifname`` is where it is looked for first, one get, and
        taken only when it has the MAC): an entry whose MAC was never known (its attach's answer never came) put
        nothing into the pod, and the pod's ``net1`` may by now be another attachment's (a retried ADD's).  A
        failure raises, the NIC where it was (in the pod, or on the node under a temporary name, which the next
        release renames)."""
        if not mac or not netns or not os.path.exists(netns):
            return
        self._run(_release, self.host_netns, netns, ifname, mac)

    def inspect(self, netns: str, ifname: str) -> LinkState | None:
        return self._run(_inspect, netns, ifname)


def _index_of(handle: IPRoute, idx: int | None, mac: str) -> int:
    """The ifindex of the link with ``mac``: ``idx`` when that link still has it (one get), else a lookup
    (IndexError when there is none)."""
    if idx is not None:
        try:
            if handle.get_links(idx)[0].get_attr("IFLA_ADDRESS") == mac:
                return idx
        except Exception:  # gone, or renumbered: look it up
            pass
    found: list[int] = handle.link_lookup(address=mac)
    return found[0]


def temp_name() -> str:
    """A name no link has, for a NIC between two names (``cvt`` and 8 random hexadecimal digits: 11 characters)."""
    return "cvt" + os.urandom(4).hex()


def _move(handle: IPRoute, idx: int, netns: str) -> None:
    """Move the link into the network namespace at ``netns`` (it keeps its name: a free one there)."""
    fd = os.open(netns, os.O_RDONLY)
    try:
        handle.link("set", index=idx, net_ns_fd=fd)
    finally:
        os.close(fd)


class Steps:
    """The steps done so far, each with its undo; :meth:`undo` runs them in reverse (each one tried, a failure
    logged), so that a change that fails halfway leaves the link as it found it."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._undo: list[tuple[str, Callable[[], object]]] = []

    def done(self, name: str, undo: Callable[[], object]) -> None:
        self._undo.append((name, undo))

    def undo(self) -> None:
        for name, step in reversed(self._undo):
            try:
                step()
            except Exception as exc:  # the next undo may still bring the NIC home
                LOG.warning("%s: undoing %s failed: %s", self.what, name, exc)
        self._undo.clear()


class Moved:
    """A NIC moved into a pod and up (:func:`_move_in`), its routes not added yet: the pod's handle, its ifindex
    there, the steps to undo, and whether it ran at the first look."""

    def __init__(self, pod: IPRoute, pidx: int, steps: Steps, running: bool) -> None:
        self.pod, self.pidx, self.steps, self.running = pod, pidx, steps, running

    def undo(self, _host: IPRoute) -> None:
        self.steps.undo()

    def close(self, _host: IPRoute) -> None:
        self.pod.close()


def _move_in(
    host: IPRoute,
    host_netns: str,
    idx: int | None,
    mac: str,
    netns: str,
    ifname: str,
    address: str,
    prefixlen: int,
    mtu: int | None,
) -> Moved:
    """Move the NIC into the pod as host-device does, one step at a time, each undone if a later one fails (the NIC
    is then on the node again, under its own name): on the node, down (a link is renamed only when down), its
    name kept in its alias, a temporary name; then moved into the pod, renamed ``ifname``, its MTU set, addressed,
    up, and one look whether it runs.  (Moving it out takes its addresses and routes away.)  The kernel keeps the
    ifindex across the move when it is free in the pod, so the pod's side is one get, not a dump.  The caller
    waits for it to run off the netlink worker (a NIC without carrier never holds up another pod's ADD), then adds
    its routes (:func:`_add_routes`)."""
    if idx is None:  # the wait found it a moment ago, else look it up now
        idx = host.link_lookup(address=mac)[0]
    link = host.get_links(idx)[0]
    original, alias = link.get_attr("IFLA_IFNAME"), link.get_attr("IFLA_IFALIAS") or ""
    mtu_before = link.get_attr("IFLA_MTU")
    temp = temp_name()
    steps = Steps("moving %s (%s) into %s" % (original, mac, netns))
    pod = in_netns(netns, IPRoute)

    def on_node() -> int:  # where the NIC is on the node again, after the steps in the pod are undone
        return _index_of(host, idx, mac)

    try:
        if link["flags"] & IFF_UP:
            host.link("set", index=idx, state="down")
            steps.done("down", lambda: host.link("set", index=on_node(), state="up"))
        host.link("set", index=idx, ifalias=original)
        steps.done("the alias", lambda: host.link("set", index=on_node(), ifalias=alias))
        host.link("set", index=idx, ifname=temp)
        steps.done("the temporary name", lambda: host.link("set", index=on_node(), ifname=original))
        _move(host, idx, netns)
        pidx = _index_of(pod, idx, mac)
        steps.done("the move", lambda: _move(pod, pidx, host_netns))
        pod.link("set", index=pidx, ifname=ifname)
        steps.done("the name", lambda: pod.link("set", index=pidx, ifname=temp))
        if mtu and mtu != mtu_before:
            pod.link("set", index=pidx, mtu=mtu)
            steps.done("the MTU", lambda: pod.link("set", index=pidx, mtu=mtu_before))
        pod.addr("add", index=pidx, address=address, prefixlen=prefixlen)
        pod.link("set", index=pidx, state="up")
        steps.done("up", lambda: pod.link("set", index=pidx, state="down"))
        return Moved(pod, pidx, steps, _running(pod, pidx, time.monotonic()))
    except BaseException:
        steps.undo()
        pod.close()
        raise


def _add_routes(_host: IPRoute, moved: Moved, routes: list[Route]) -> None:
    for route in routes:
        net = ipaddress.ip_network(route["dst"], strict=False)
        moved.pod.route("add", dst=str(net.network_address), dst_len=net.prefixlen, gateway=route["gw"], oif=moved.pidx)


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


def _release(host: IPRoute, host_netns: str, netns: str, ifname: str, mac: str) -> None:
    """Move the NIC with ``mac`` out of the pod as host-device does: down, a temporary name, back to the node (each
    step undone if a later one fails, so that a release may be tried again: the NIC is then in the pod as it
    was); then, on the node, its original name from its alias (:func:`_restore_name`)."""
    idx: int | None = None
    with netns_socket(netns) as pod:
        link = _link_with(pod, mac, name=ifname)
        if link is not None:
            idx, name = link["index"], link.get_attr("IFLA_IFNAME")
            steps = Steps("moving %s (%s) out of %s" % (name, mac, netns))
            try:
                if link["flags"] & IFF_UP:
                    pod.link("set", index=idx, state="down")
                    steps.done("down", lambda: pod.link("set", index=idx, state="up"))
                pod.link("set", index=idx, ifname=temp_name())
                steps.done("the temporary name", lambda: pod.link("set", index=idx, ifname=name))
                _move(pod, idx, host_netns)
            except NetlinkError as exc:
                if exc.code == errno.ENODEV and _link_with(pod, mac) is None and not host.link_lookup(address=mac):
                    return  # unplugged while it moved (a detach's unplug still under way): nothing left to release
                steps.undo()
                raise
            except BaseException:
                steps.undo()
                raise
    _restore_name(host, idx, mac)


def _link_with(handle: IPRoute, mac: str, name: str | None = None, idx: int | None = None) -> Any:
    """The link (its message) that has ``mac``, or None: the one named ``name`` or numbered ``idx`` when it has that
    MAC (one get: a hint, never trusted without the MAC), else the one a lookup by MAC finds (a dump)."""
    hint: dict[str, Any] = {"ifname": name} if name else {"index": idx} if idx is not None else {}
    if hint:
        try:
            (link,) = handle.link("get", **hint)
            if link.get_attr("IFLA_ADDRESS") == mac:
                return link
        except Exception:  # no such link (any more): look it up
            pass
    found: list[int] = handle.link_lookup(address=mac)
    return handle.get_links(found[0])[0] if found else None


def _restore_name(host: IPRoute, idx: int | None, mac: str) -> None:
    """The node's NIC with ``mac`` (if it is there) under the name its alias kept, and the alias cleared: the end of
    a release, or of one that failed after the move."""
    link = _link_with(host, mac, idx=idx)
    original = link.get_attr("IFLA_IFALIAS") if link is not None else None
    if link is None or not original:  # not on the node (never moved, or unplugged), or not moved by this agent
        return
    if link.get_attr("IFLA_IFNAME") != original:
        host.link("set", index=link["index"], ifname=original, ifalias="")
    else:
        host.link("set", index=link["index"], ifalias="")


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
