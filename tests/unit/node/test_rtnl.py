"""The node agent's rtnetlink parse (``capvco_sriov.rtnl``): what the kernel answers is read with bounds; anything
else ends the parse with NetlinkError (EBADMSG), never another exception or a read past the buffer."""

from __future__ import annotations

import errno
import socket
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capvco_sriov import rtnl

from properties import examples

NAMES = [*rtnl.IFLA, *rtnl.IFA, *rtnl.RTA]


def attr(kind, data):
    return rtnl._rta(kind, data)


def message(kind, body, flags=0, seq=1):
    return struct.pack("=IHHII", 16 + len(body), kind, flags, seq, 0) + body


def newlink(index, flags, attrs):
    return message(rtnl.RTM_NEWLINK, struct.pack("=BxHiII", 0, 1, index, flags, 0) + attrs)


def test_a_link_answer_reads_as_pyroute2_gives_it():
    attrs = (
        attr(1, bytes.fromhex("525400380001"))
        + attr(3, b"net1\0")
        + attr(4, struct.pack("=I", 1400))
        + attr(16, b"\x06")
        + attr(20, b"cvv380001")
    )
    ((kind, _flags, seq, msg),) = list(rtnl.parse(newlink(7, 0x10043, attrs)))
    assert (kind, seq) == (rtnl.RTM_NEWLINK, 1)
    assert msg["index"] == 7 and msg["flags"] & rtnl.IFF_UP
    assert msg.get_attr("IFLA_ADDRESS") == "52:54:00:38:00:01"
    assert msg.get_attr("IFLA_IFNAME") == "net1"
    assert msg.get_attr("IFLA_MTU") == 1400
    assert msg.get_attr("IFLA_OPERSTATE") == "UP"
    assert msg.get_attr("IFLA_IFALIAS") == "cvv380001"
    assert msg.get_attr("IFA_ADDRESS") is None  # not a link's attribute


def test_an_error_answer_is_its_errno_and_an_ack_is_zero():
    nack = message(rtnl.NLMSG_ERROR, struct.pack("=i", -errno.ENODEV) + b"\0" * 16)
    ack = message(rtnl.NLMSG_ERROR, struct.pack("=i", 0) + b"\0" * 16, seq=2)
    assert [(k, s, v) for k, _f, s, v in rtnl.parse(nack + ack)] == [(2, 1, errno.ENODEV), (2, 2, 0)]


@pytest.mark.parametrize(
    "buf",
    [
        message(rtnl.RTM_NEWLINK, b"\0" * 8),  # a body shorter than its header
        newlink(1, 0, struct.pack("=HH", 200, 3) + b"net1"),  # an attribute longer than what is left
        newlink(1, 0, struct.pack("=HH", 2, 3)),  # an attribute shorter than its own header
        struct.pack("=IHHII", 400, rtnl.RTM_NEWLINK, 0, 1, 0),  # a message longer than the receive
        struct.pack("=IHHII", 8, rtnl.RTM_NEWLINK, 0, 1, 0),  # a message shorter than its header
        message(rtnl.NLMSG_ERROR, b"\0\0"),  # an error without its code
    ],
)
def test_what_does_not_fit_is_ebadmsg(buf):
    with pytest.raises(rtnl.NetlinkError) as err:
        list(rtnl.parse(buf))
    assert err.value.code == errno.EBADMSG


@settings(max_examples=examples(500), deadline=None)
@given(st.binary(max_size=512))
def test_any_bytes_parse_or_raise_netlink_error(buf):
    try:
        for _kind, _flags, _seq, body in rtnl.parse(buf):
            if isinstance(body, rtnl.Message):
                for name in NAMES:
                    body.get_attr(name)
    except rtnl.NetlinkError as exc:
        assert exc.code == errno.EBADMSG


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 40), st.binary(max_size=40)), max_size=8),
    st.sampled_from([rtnl.RTM_NEWLINK, rtnl.RTM_NEWADDR, rtnl.RTM_NEWROUTE]),
)
def test_well_formed_attributes_are_all_read(attrs, kind):
    """Attributes the kernel might send, of any type and length: every one is read whole, the first of a type
    kept."""
    head = {
        rtnl.RTM_NEWLINK: struct.pack("=BxHiII", 0, 1, 3, 0, 0),
        rtnl.RTM_NEWADDR: struct.pack("=BBBBI", socket.AF_INET, 24, 0, 0, 3),
        rtnl.RTM_NEWROUTE: struct.pack("=BBBBBBBBI", socket.AF_INET, 24, 0, 0, 254, 3, 0, 1, 0),
    }[kind]
    buf = message(kind, head + b"".join(attr(k, v) for k, v in attrs))
    ((_k, _f, _s, msg),) = list(rtnl.parse(buf))
    first = {}
    for k, v in attrs:
        first.setdefault(k, v)
    assert msg._attrs == first
    for name in NAMES:
        msg.get_attr(name)


def test_requests_it_does_not_make_are_refused():
    handle = rtnl.IPRoute.__new__(rtnl.IPRoute)  # no socket: refused before anything is sent
    with pytest.raises(ValueError, match="not a request"):
        handle.link("del", index=1)
    with pytest.raises(ValueError, match="not a request"):
        handle.addr("del", index=1, address="192.0.2.1", prefixlen=24)
    with pytest.raises(ValueError, match="not a request"):
        handle.route("del", dst="192.0.2.0", dst_len=24)


class Kernel:
    """A socket that answers each request with the next of ``answers`` (the bytes of one receive each, their
    sequence number set to the request's)."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.seq = 0
        self.sent = 0

    def send(self, data):
        self.seq = struct.unpack_from("=IHHII", data)[3]
        self.sent += 1
        return len(data)

    def recv(self, _size):
        out, pos = bytearray(self.answers.pop(0)), 0
        while pos < len(out):
            struct.pack_into("=I", out, pos + 8, self.seq)
            pos += (struct.unpack_from("=I", out, pos)[0] + 3) & ~3
        return bytes(out)


def handle_on(kernel):
    handle = rtnl.IPRoute.__new__(rtnl.IPRoute)
    handle._sock, handle._seq = kernel, 0
    return handle


def dump(*links, interrupted=False, error=0):
    flags = rtnl.NLM_F_MULTI | (rtnl.NLM_F_DUMP_INTR if interrupted else 0)
    body = b"".join(
        message(rtnl.RTM_NEWLINK, struct.pack("=BxHiII", 0, 1, i, 0, 0) + attr(3, b"l%d\0" % i), flags=flags)
        for i in links
    )
    return body + message(rtnl.NLMSG_DONE, struct.pack("=i", -error), flags=flags)


def test_an_interrupted_dump_is_read_again_never_returned_partial():
    kernel = Kernel([dump(1, interrupted=True), dump(1, 2)])
    assert [m["index"] for m in handle_on(kernel).get_links()] == [1, 2] and kernel.sent == 2
    kernel = Kernel([dump(1, interrupted=True)] * rtnl.DUMP_TRIES)
    with pytest.raises(rtnl.NetlinkError) as err:
        handle_on(kernel).get_links()
    assert err.value.code == errno.EINTR and kernel.sent == rtnl.DUMP_TRIES


def test_a_dump_that_ends_with_an_error_raises_it():
    with pytest.raises(rtnl.NetlinkError) as err:
        handle_on(Kernel([dump(1, error=errno.ENOBUFS)])).get_links()
    assert err.value.code == errno.ENOBUFS
