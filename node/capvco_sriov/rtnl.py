"""The few rtnetlink requests the node agent makes, on a plain ``AF_NETLINK`` socket (standard library only).

As Go's host-device does with its netlink library: each request is one message and its acknowledgement, with no
event loop in between (pyroute2 0.9 runs every request through an asyncio loop of its own, and makes one for each
socket: about half a millisecond a request and a millisecond a socket, some 20 ms of each ADD and DEL).

:class:`IPRoute` takes the calls, arguments and answers of pyroute2's ``IPRoute`` that ``netlink.py`` uses (the
agent ran on pyroute2 before; it no longer imports it), so that ``netlink.py`` and the tests' fault injection
(``tests/e2e/test_sriov_netlink.py``) call it as they called that one: ``link("get"|"set", ...)``,
``get_links(index)``, ``link_lookup(address=|ifname=)``, ``addr("add", ...)``, ``get_addr(index=, family=)``,
``route("add", ...)``, ``get_routes(family=, table=)``, ``close()``; an answer is a :class:`Message`
(``msg["index"]``, ``msg["flags"]``, ``msg.get_attr("IFLA_IFNAME")``).  A request the kernel refuses raises
:class:`NetlinkError` (an ``OSError`` with the kernel's errno).

What the kernel answers is parsed with bounds (:func:`parse`): a message or an attribute whose length does not fit
what is left, or a body shorter than its header, ends the parse with :class:`NetlinkError` (``EBADMSG``), never
an ``IndexError`` or a read past the buffer.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct
from collections.abc import Iterator
from typing import Any

NLMSG_ERROR = 2
NLMSG_DONE = 3
RTM_NEWLINK, RTM_GETLINK = 16, 18
RTM_NEWADDR, RTM_GETADDR = 20, 22
RTM_NEWROUTE, RTM_GETROUTE = 24, 26
NLM_F_REQUEST, NLM_F_MULTI, NLM_F_ACK, NLM_F_DUMP_INTR = 0x1, 0x2, 0x4, 0x10
#: How many times a dump that the kernel marks interrupted (the table changed while it was read) is read again.
DUMP_TRIES = 5
NLM_F_DUMP, NLM_F_EXCL, NLM_F_CREATE = 0x300, 0x200, 0x400
IFF_UP = 0x1

_NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_IFINFO = struct.Struct("=BxHiII")  # family, type, index, flags, change
_IFADDR = struct.Struct("=BBBBI")  # family, prefixlen, flags, scope, index
_RTMSG = struct.Struct("=BBBBBBBBI")  # family, dst_len, src_len, tos, table, protocol, scope, type, flags
_RTA = struct.Struct("=HH")  # len, type
_U32 = struct.Struct("=I")

#: Attribute numbers, by the names pyroute2 gives them (those the agent reads or sends).
IFLA = {"IFLA_ADDRESS": 1, "IFLA_IFNAME": 3, "IFLA_MTU": 4, "IFLA_OPERSTATE": 16, "IFLA_IFALIAS": 20}
IFLA_NET_NS_FD = 28
IFA = {"IFA_ADDRESS": 1, "IFA_LOCAL": 2}
RTA = {"RTA_DST": 1, "RTA_OIF": 4, "RTA_GATEWAY": 5, "RTA_TABLE": 15}
#: ``IF_OPER_*``, as pyroute2 names them.
OPERSTATES = ("UNKNOWN", "NOTPRESENT", "DOWN", "LOWERLAYERDOWN", "TESTING", "DORMANT", "UP")
#: The most bytes one receive takes (a dump's part is at most a page or two; the kernel never sends more at once).
RECV = 1 << 16
RT_TABLE_MAIN, RTPROT_BOOT, RT_SCOPE_UNIVERSE, RTN_UNICAST = 254, 3, 0, 1


class NetlinkError(OSError):
    """The kernel refused a request (``errno``: its error), or sent what does not parse (``EBADMSG``)."""

    def __init__(self, code: int, what: str = "") -> None:
        super().__init__(code, "%s%s" % (os.strerror(code), ": " + what if what else ""))
        self.code = code


def _attr_value(name: str, raw: bytes) -> Any:
    """An attribute's value, as pyroute2 gives it: text, a MAC, an address, a number."""
    if name in ("IFLA_IFNAME", "IFLA_IFALIAS"):
        return raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    if name == "IFLA_ADDRESS":
        return ":".join("%02x" % b for b in raw)
    if name == "IFLA_OPERSTATE":
        return OPERSTATES[raw[0]] if raw and raw[0] < len(OPERSTATES) else "UNKNOWN"
    if name in ("IFA_ADDRESS", "IFA_LOCAL", "RTA_DST", "RTA_GATEWAY") and len(raw) in (4, 16):
        return str(ipaddress.ip_address(raw))
    if len(raw) == 4:
        return _U32.unpack(raw)[0]
    return raw


class Message:
    """One answer: its header's fields (``msg["index"]``, ``msg["flags"]``, ...) and its attributes
    (``get_attr(name)``, None when absent)."""

    def __init__(self, fields: dict[str, int], attrs: dict[int, bytes], names: dict[str, int]) -> None:
        self._fields = fields
        self._attrs = attrs
        self._names = names

    def __getitem__(self, key: str) -> int:
        return self._fields[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._fields.get(key, default)

    def get_attr(self, name: str) -> Any:
        number = self._names.get(name)
        raw = self._attrs.get(number) if number is not None else None
        return None if raw is None else _attr_value(name, raw)

    def __repr__(self) -> str:
        return "Message(%r)" % self._fields


def _attrs(buf: bytes, start: int, end: int) -> dict[int, bytes]:
    """The attributes in ``buf[start:end]``, by number (a repeated one: its first); bounded by ``end``."""
    out: dict[int, bytes] = {}
    pos = start
    while pos + _RTA.size <= end:
        length, kind = _RTA.unpack_from(buf, pos)
        if length < _RTA.size or pos + length > end:
            raise NetlinkError(errno.EBADMSG, "an attribute of %d bytes with %d left" % (length, end - pos))
        out.setdefault(kind & 0x3FFF, buf[pos + _RTA.size : pos + length])  # without NLA_F_NESTED/NET_BYTEORDER
        pos += (length + 3) & ~3
    return out


def _body(kind: int, buf: bytes, start: int, end: int) -> Message | None:
    """The message of ``kind`` in ``buf[start:end]`` (after its header); None for a kind the agent never reads."""
    if kind == RTM_NEWLINK:
        fixed, names = _IFINFO, IFLA
    elif kind == RTM_NEWADDR:
        fixed, names = _IFADDR, IFA
    elif kind == RTM_NEWROUTE:
        fixed, names = _RTMSG, RTA
    else:
        return None
    if end - start < fixed.size:
        raise NetlinkError(errno.EBADMSG, "a message of type %d shorter than its header" % kind)
    values = fixed.unpack_from(buf, start)
    if kind == RTM_NEWLINK:
        fields = dict(zip(("family", "ifi_type", "index", "flags", "change"), values, strict=True))
    elif kind == RTM_NEWADDR:
        fields = dict(zip(("family", "prefixlen", "flags", "scope", "index"), values, strict=True))
    else:
        keys = ("family", "dst_len", "src_len", "tos", "table", "proto", "scope", "type", "flags")
        fields = dict(zip(keys, values, strict=True))
    return Message(fields, _attrs(buf, start + fixed.size, end), names)


def parse(buf: bytes) -> Iterator[tuple[int, int, int, Message | int | None]]:
    """The messages in one receive: ``(type, flags, sequence number, body)``, the body a :class:`Message`, the
    errno of an ``NLMSG_ERROR`` (0: an acknowledgement), or None (``NLMSG_DONE``, a kind the agent never reads)."""
    pos = 0
    while pos + _NLMSG.size <= len(buf):
        length, kind, flags, seq, _pid = _NLMSG.unpack_from(buf, pos)
        if length < _NLMSG.size or pos + length > len(buf):
            raise NetlinkError(errno.EBADMSG, "a message of %d bytes with %d left" % (length, len(buf) - pos))
        start, end = pos + _NLMSG.size, pos + length
        if kind == NLMSG_ERROR:
            if end - start < 4:
                raise NetlinkError(errno.EBADMSG, "an error message without its code")
            yield kind, flags, seq, -struct.unpack_from("=i", buf, start)[0]
        elif kind == NLMSG_DONE:  # the end of a dump, with the dump's error when it failed (0 without one)
            yield kind, flags, seq, -struct.unpack_from("=i", buf, start)[0] if end - start >= 4 else 0
        else:
            yield kind, flags, seq, _body(kind, buf, start, end)
        pos += (length + 3) & ~3


def _rta(kind: int, data: bytes) -> bytes:
    out = _RTA.pack(_RTA.size + len(data), kind) + data
    return out + b"\0" * (-len(out) % 4)


def _mac(value: str) -> bytes:
    return bytes(int(part, 16) for part in value.split(":"))


class IPRoute:
    """A route netlink socket in the network namespace of the thread that makes it (as pyroute2's)."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.NETLINK_ROUTE)
        try:
            self._sock.bind((0, 0))
        except BaseException:
            self._sock.close()
            raise
        self._seq = 0

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> IPRoute:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one request -----------------------------------------------------------
    def _request(self, kind: int, flags: int, body: bytes) -> list[Message]:
        """Send one request and read its answer to the end: the messages it holds (none for an acknowledgement);
        :class:`NetlinkError` when the kernel refused it.  A dump the kernel marks interrupted is read again, up
        to :data:`DUMP_TRIES` times (then ``EINTR``): never a partial list."""
        for _ in range(DUMP_TRIES if flags & NLM_F_DUMP == NLM_F_DUMP else 1):
            found, interrupted = self._once(kind, flags, body)
            if not interrupted:
                return found
        raise NetlinkError(errno.EINTR, "the dump was interrupted %d times" % DUMP_TRIES)

    def _once(self, kind: int, flags: int, body: bytes) -> tuple[list[Message], bool]:
        self._seq += 1
        seq = self._seq
        self._sock.send(_NLMSG.pack(_NLMSG.size + len(body), kind, NLM_F_REQUEST | flags, seq, 0) + body)
        out: list[Message] = []
        interrupted = False
        while True:
            done = False
            for mkind, mflags, mseq, value in parse(self._sock.recv(RECV)):
                if mseq != seq:
                    continue  # the rest of an earlier request's answer, given up on when it failed
                interrupted = interrupted or bool(mflags & NLM_F_DUMP_INTR)
                if mkind in (NLMSG_ERROR, NLMSG_DONE) and isinstance(value, int) and value:
                    raise NetlinkError(value)
                if mkind == NLMSG_ERROR:
                    return out, interrupted
                if mkind == NLMSG_DONE:
                    done = True
                elif isinstance(value, Message):
                    out.append(value)
                    if not mflags & NLM_F_MULTI and not flags & NLM_F_ACK:
                        done = True  # the one answer to a get
            if done:
                return out, interrupted

    # -- links -------------------------------------------------------------------
    def link(self, command: str, **kw: Any) -> list[Message]:
        """``get`` (by ``index`` or ``ifname``), or ``set`` (``index`` with any of ``ifname``, ``ifalias``, ``mtu``,
        ``state`` "up"/"down", ``net_ns_fd``)."""
        index = int(kw.get("index") or 0)
        if command == "get":
            attrs = _rta(IFLA["IFLA_IFNAME"], kw["ifname"].encode() + b"\0") if "ifname" in kw and not index else b""
            return self._request(RTM_GETLINK, 0, _IFINFO.pack(socket.AF_UNSPEC, 0, index, 0, 0) + attrs)
        if command != "set":
            raise ValueError("link %s is not a request this module makes" % command)
        flags = change = 0
        if "state" in kw:
            flags, change = (IFF_UP if kw["state"] == "up" else 0), IFF_UP
        attrs = b""
        if "ifname" in kw:
            attrs += _rta(IFLA["IFLA_IFNAME"], kw["ifname"].encode() + b"\0")
        if "ifalias" in kw:  # an empty alias clears it (no bytes at all)
            attrs += _rta(IFLA["IFLA_IFALIAS"], kw["ifalias"].encode())
        if "mtu" in kw:
            attrs += _rta(IFLA["IFLA_MTU"], _U32.pack(int(kw["mtu"])))
        if "net_ns_fd" in kw:
            attrs += _rta(IFLA_NET_NS_FD, _U32.pack(int(kw["net_ns_fd"])))
        body = _IFINFO.pack(socket.AF_UNSPEC, 0, index, flags, change) + attrs
        return self._request(RTM_NEWLINK, NLM_F_ACK, body)

    def get_links(self, *indexes: int) -> list[Message]:
        """The links numbered ``indexes`` (every link when none is given)."""
        if not indexes:
            return self._request(RTM_GETLINK, NLM_F_DUMP, _IFINFO.pack(socket.AF_UNSPEC, 0, 0, 0, 0))
        return [msg for idx in indexes for msg in self.link("get", index=idx)]

    def link_lookup(self, **kw: Any) -> list[int]:
        """The indexes of the links with ``address`` (a MAC: a dump) or ``ifname`` (one get)."""
        if "ifname" in kw:
            try:
                return [msg["index"] for msg in self.link("get", ifname=kw["ifname"])]
            except NetlinkError as exc:
                if exc.code == errno.ENODEV:
                    return []
                raise
        mac = str(kw["address"]).lower()
        return [msg["index"] for msg in self.get_links() if msg.get_attr("IFLA_ADDRESS") == mac]

    # -- addresses and routes ------------------------------------------------------
    def addr(self, command: str, index: int, address: str, prefixlen: int) -> list[Message]:
        """``add`` an IPv4 or IPv6 ``address/prefixlen`` on link ``index``."""
        if command != "add":
            raise ValueError("addr %s is not a request this module makes" % command)
        ip = ipaddress.ip_address(address)
        family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
        attrs = _rta(IFA["IFA_LOCAL"], ip.packed) + _rta(IFA["IFA_ADDRESS"], ip.packed)
        body = _IFADDR.pack(family, int(prefixlen), 0, RT_SCOPE_UNIVERSE, int(index)) + attrs
        return self._request(RTM_NEWADDR, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, body)

    def get_addr(self, index: int | None = None, family: int = socket.AF_INET) -> list[Message]:
        """The addresses of ``family`` (of link ``index`` when given)."""
        found = self._request(RTM_GETADDR, NLM_F_DUMP, _IFADDR.pack(family, 0, 0, 0, 0))
        return [m for m in found if m["family"] == family and (index is None or m["index"] == index)]

    def route(self, command: str, dst: str, dst_len: int, gateway: str | None = None, oif: int = 0) -> list[Message]:
        """``add`` a unicast route to ``dst/dst_len`` in the main table, via ``gateway`` and out of link ``oif``."""
        if command != "add":
            raise ValueError("route %s is not a request this module makes" % command)
        net = ipaddress.ip_address(dst)
        family = socket.AF_INET if net.version == 4 else socket.AF_INET6
        attrs = _rta(RTA["RTA_DST"], net.packed)
        if gateway:
            attrs += _rta(RTA["RTA_GATEWAY"], ipaddress.ip_address(gateway).packed)
        if oif:
            attrs += _rta(RTA["RTA_OIF"], _U32.pack(int(oif)))
        head = _RTMSG.pack(family, int(dst_len), 0, 0, RT_TABLE_MAIN, RTPROT_BOOT, RT_SCOPE_UNIVERSE, RTN_UNICAST, 0)
        return self._request(RTM_NEWROUTE, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, head + attrs)

    def get_routes(self, family: int = socket.AF_INET, table: int | None = None) -> list[Message]:
        """The routes of ``family`` (in ``table`` when given)."""
        found = self._request(RTM_GETROUTE, NLM_F_DUMP, _RTMSG.pack(family, 0, 0, 0, 0, 0, 0, 0, 0))
        out = []
        for msg in found:
            where = msg.get_attr("RTA_TABLE") or msg["table"]
            if msg["family"] == family and (table is None or where == table):
                out.append(msg)
        return out


def setns(fd: int) -> None:
    """This thread into the network namespace of ``fd`` (``os.setns`` where Python has it, else libc's)."""
    if hasattr(os, "setns"):
        os.setns(fd, os.CLONE_NEWNET)  # type: ignore[attr-defined,unused-ignore]
        return
    import ctypes  # noqa: PLC0415 (Python 3.11 only: a module the agent otherwise never needs)

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
