"""Which address a NIC gets on an external network, and its MAC and device name: no SQL here.

An address comes from the network's hosts (never its network or broadcast address), never the gateway, and never
one an attached NIC holds.  A MAC is derived from the NIC's id (unique as the id is, under the locally
administered 52:54 prefix); a VM's device names count every NIC it ever had (``eth1`` is its first).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator
from typing import Protocol


class Subnet(Protocol):
    """An external network, as far as its addresses go."""

    @property
    def network(self) -> str: ...

    @property
    def subnet_mask(self) -> str: ...

    @property
    def gateway(self) -> str: ...


def subnet(net: Subnet) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network("%s/%s" % (net.network, net.subnet_mask), strict=False)


def taken(net: Subnet, attached: Iterable[str]) -> set[str]:
    """The addresses no new NIC may have: the attached NICs' and the gateway."""
    used = set(attached)
    used.add(net.gateway)
    return used


def _hosts(net: Subnet) -> Iterator[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    return subnet(net).hosts()


def free_addresses(net: Subnet, attached: Iterable[str]) -> list[str]:
    """Every address of the network a NIC could take now, in order."""
    used = taken(net, attached)
    return [str(h) for h in _hosts(net) if str(h) not in used]


def choose_address(net: Subnet, attached: Iterable[str], wanted: str | None = None) -> str | None:
    """``wanted`` if a NIC may take it now, else None; without ``wanted`` (or an empty one), the first free
    address, or None when the network is full.  ``wanted`` must be an IP address (the caller checked)."""
    used = taken(net, attached)
    if wanted:
        network = subnet(net)
        host = ipaddress.ip_address(wanted)
        if host not in network or str(host) in used or host in (network.network_address, network.broadcast_address):
            return None
        return str(host)
    for host in _hosts(net):
        if str(host) not in used:
            return str(host)
    return None


def mac_address(nic_id: int) -> str:
    """The MAC of the NIC with this id: 52:54 and the id's four low bytes."""
    return "52:54:%02x:%02x:%02x:%02x" % (
        (nic_id >> 24) & 0xFF,
        (nic_id >> 16) & 0xFF,
        (nic_id >> 8) & 0xFF,
        nic_id & 0xFF,
    )


def device_name(nics_ever: int) -> str:
    """The device name of a VM's NIC, given how many NICs the VM has ever had, this one included."""
    return "eth%d" % nics_ever


def prefix_length(subnet_mask: str) -> int:
    """The prefix length of a dotted subnet mask (``255.255.255.0``: 24)."""
    return ipaddress.ip_network("0.0.0.0/%s" % subnet_mask).prefixlen
