# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""External NICs: find the network, attach, detach (plain Python, no Ansible).

``POST .../external-nics`` answers only ``{success}``.  Two ways to know the
new NIC:

- **by its address** (:func:`attach_at`): the caller chooses the address, so
  the NIC is the VM's NIC at that address (``GET .../external-nics/{ip}``),
  whatever else is on the network.  The node agent always does this.
- **by diffing** (:func:`attach`, when no address is given): the new NIC is the
  one in the VM's NIC list after the call that was not in it before.

A lost answer is resolved the same way before anything is sent again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.machines.errors import AddressTaken
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    InputError,
    LogicError,
    Resolved,
    gone_is_done,
    missing_is_none,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import names_diff
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import resolve_machines

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

#: A NIC or an external network as the platform gives it.
Nic = dict[str, Any]

NIC_FIELDS = ("mac_address", "ip_address", "network_id", "device_name", "model", "nic_type")


def find_network(networks: Sequence[dict[str, Any]], wanted: str | int, location: str) -> dict[str, Any]:
    """An external network by name or id; an unknown one fails naming the location's networks."""
    for net in networks:
        if str(net["external_network_id"]) == str(wanted) or net.get("name") == wanted:
            return net
    raise InputError(
        "external network %r not found in location %r; it has: %s"
        % (
            wanted,
            location,
            ", ".join("%s (%s)" % (n.get("name"), n["external_network_id"]) for n in networks) or "none",
        )
    )


def nic_view(nic: Nic) -> dict[str, Any]:
    return {k: nic.get(k) for k in NIC_FIELDS}


def on_network(nics: Iterable[Nic], net_id: object) -> list[Nic]:
    return [n for n in nics if str(n.get("network_id")) == str(net_id)]


def nic_at(
    client: WhiteskyClient, cloudspace_id: str, vm_id: int, ip_address: str, net_id: object = None
) -> Nic | None:
    """The VM's NIC at an address (on the network, when given), or None."""
    nic: Nic | None = missing_is_none(client.nic, cloudspace_id, vm_id, ip_address)
    if not nic or (net_id is not None and str(nic.get("network_id")) != str(net_id)):
        return None
    return nic


def attach_at(
    client: WhiteskyClient,
    cloudspace_id: str,
    vm_id: int,
    net_id: int,
    ip_address: str,
    model: str = "virtio",
    lock: AbstractContextManager[Any] | None = None,
) -> Nic:
    """Attach a NIC at a chosen address and return it: the address is its identity, so nothing else on the
    network (another VM's NIC, an operator's NIC on this VM) is ever mistaken for it.

    ``lock`` (a context manager) is held around the attach call only; the read of the new NIC is outside it.  When
    it yields an address (a string), the NIC is attached there instead of at ``ip_address``: the caller's last
    choice, made once the lock is held.  A lost answer is resolved by that read before the call is sent again.  A
    409 that is not a VM lock is :class:`AddressTaken`.
    """

    def resolve(_exc: Exception) -> Resolved | None:
        nic = nic_at(client, cloudspace_id, vm_id, ip_address, net_id)
        return Resolved(nic) if nic else None

    with lock or contextlib.nullcontext() as chosen:
        if isinstance(chosen, str):
            ip_address = chosen
        try:
            answer = client.attach_nic(
                cloudspace_id, vm_id, net_id, model=model, ip_address=ip_address, resolve=resolve
            )
        except ApiError as exc:
            if exc.status == 409 and "locked" not in (exc.message or ""):
                raise AddressTaken(
                    "address %s is not available on external network %s: %s" % (ip_address, net_id, exc.message),
                    {"status": 409, "address": ip_address},
                ) from None
            raise
    if isinstance(answer, Resolved):
        found: Nic = answer.value
        return found
    nic = nic_at(client, cloudspace_id, vm_id, ip_address, net_id)
    if nic is None:
        raise LogicError(
            "the platform accepted the attach to VM %s at %s on network %s, but has no NIC there"
            % (vm_id, ip_address, net_id)
        )
    return nic


def attach(
    client: WhiteskyClient,
    cloudspace_id: str,
    vm_id: int,
    net_id: int,
    model: str = "virtio",
    before: Sequence[Nic] | None = None,
) -> Nic:
    """Attach a NIC at an address the platform picks and return it, found by diffing the VM's NIC list.

    A lost answer is resolved the same way before anything is sent again: a
    new NIC on the network means the attach happened.  A VM locked by another
    operation is waited out.
    """
    before = client.nics(cloudspace_id, vm_id) if before is None else before
    known = {(n["mac_address"], n["ip_address"]) for n in before}

    def new_nics() -> list[Nic]:
        new = [
            n
            for n in on_network(client.nics(cloudspace_id, vm_id), net_id)
            if (n["mac_address"], n["ip_address"]) not in known
        ]
        if len(new) > 1:
            raise LogicError(
                "expected one new NIC on network %s of VM %s after attaching, found %d: %s"
                % (net_id, vm_id, len(new), ", ".join(n["ip_address"] for n in new))
            )
        return new

    def resolve(_exc: Exception) -> Resolved | None:
        new = new_nics()
        return Resolved(new[0]) if new else None

    answer = client.attach_nic(cloudspace_id, vm_id, net_id, model=model, resolve=resolve)
    if isinstance(answer, Resolved):
        found: Nic = answer.value
        return found
    new = new_nics()
    if not new:
        raise LogicError(
            "the platform accepted the attach to VM %s on network %s, but lists no new NIC" % (vm_id, net_id)
        )
    return new[0]


def detach(client: WhiteskyClient, cloudspace_id: str, vm_id: int, ip_address: str, net_id: int) -> bool:
    """Detach a NIC by its address; one that is already gone counts as detached."""
    return gone_is_done(client.detach_nic, cloudspace_id, vm_id, ip_address, net_id)


def network_info(client: WhiteskyClient, *, location: str, name: str | None = None) -> dict[str, Any]:
    """Core of ``external_network_info``."""
    nets = client.external_networks(location)
    if name:
        nets = [find_network(nets, name, location)]
    return {"networks": nets}


def ensure(
    client: WhiteskyClient,
    *,
    location: str,
    cloudspace_id: str,
    machine: str,
    network: str,
    ip_address: str | None = None,
    model: str = "virtio",
    state: str = "present",
    check_mode: bool = False,
) -> dict[str, Any]:
    """Core of ``external_nic``: a NIC on the network is attached to the VM (at ``ip_address``, or any), or not."""
    cs = cloudspace_id
    net = find_network(client.external_networks(location), network, location)
    net_id = net["external_network_id"]
    ((vm_id, vm_name),) = resolve_machines(client.vms(cs), [machine], cs)
    current = client.nics(cs, vm_id)
    mine = on_network(current, net_id)
    if ip_address:
        mine = [n for n in mine if n["ip_address"] == ip_address]
    before = sorted(n["ip_address"] for n in on_network(current, net_id))
    result: dict[str, Any] = {"changed": False, "vm_id": vm_id, "machine": vm_name, "network_id": net_id}
    if state == "present":
        if mine:
            result["nic"] = nic_view(mine[0])
            result["diff"] = names_diff("nic", before, before)
            return result
        result["changed"] = True
        if check_mode:
            result["diff"] = names_diff("nic", before, before + [ip_address or "(new address)"])
            return result
        if ip_address:
            nic = attach_at(client, cs, vm_id, net_id, ip_address, model=model)
        else:
            nic = attach(client, cs, vm_id, net_id, model=model, before=current)
        result["nic"] = nic_view(nic)
        result["diff"] = names_diff("nic", before, sorted(before + [nic["ip_address"]]))
        return result
    gone = {n["ip_address"] for n in mine}
    result["changed"] = bool(gone)
    result["detached"] = [nic_view(n) for n in mine]
    result["diff"] = names_diff("nic", before, [ip for ip in before if ip not in gone])
    if not check_mode:
        for nic in mine:
            detach(client, cs, vm_id, nic["ip_address"], net_id)
    return result
