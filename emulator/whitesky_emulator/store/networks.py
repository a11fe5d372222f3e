"""External networks and the NICs VMs have on them (the choice of address and MAC is ``addressing``'s)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from .. import addressing
from .db import Database, typed, typed_or_none


@dataclass(frozen=True, slots=True)
class ExternalNetwork:
    external_network_id: int
    location: str
    name: str
    network: str
    gateway: str
    subnet_mask: str
    dhcp: int
    public: int


@dataclass(frozen=True, slots=True)
class Nic:
    nic_id: int
    vm_id: int
    network_id: int
    ip_address: str
    mac_address: str
    device_name: str
    model: str
    attached_at: float
    detached_at: float | None


class NetworkStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- external networks -----------------------------------------------------
    def add_network(self, net: ExternalNetwork) -> None:
        self.db.run(
            "INSERT INTO external_networks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            net.external_network_id,
            net.location,
            net.name,
            net.network,
            net.gateway,
            net.subnet_mask,
            net.dhcp,
            net.public,
        )

    def networks(self, location: str) -> list[ExternalNetwork]:
        return [
            typed(ExternalNetwork, r)
            for r in self.db.rows(
                "SELECT * FROM external_networks WHERE location=? ORDER BY external_network_id", location
            )
        ]

    def network(self, location: str, network_id: int) -> ExternalNetwork | None:
        return typed_or_none(
            ExternalNetwork,
            self.db.row(
                "SELECT * FROM external_networks WHERE location=? AND external_network_id=?", location, network_id
            ),
        )

    def attached_addresses(self, network_id: int) -> list[str]:
        """The addresses of the network's attached NICs."""
        return [
            str(r[0])
            for r in self.db.rows("SELECT ip_address FROM nics WHERE network_id=? AND detached_at IS NULL", network_id)
        ]

    def free_addresses(self, net: ExternalNetwork) -> list[str]:
        return addressing.free_addresses(net, self.attached_addresses(net.external_network_id))

    def choose_address(self, net: ExternalNetwork, wanted: str | None = None) -> str | None:
        return addressing.choose_address(net, self.attached_addresses(net.external_network_id), wanted)

    # -- NICs --------------------------------------------------------------------
    def attach(self, vm_id: int, net: ExternalNetwork, ip_address: str, model: str) -> Nic:
        """A new NIC of the VM on the network, with that address (see :meth:`choose_address`)."""
        cur = self.db.run(
            "INSERT INTO nics (vm_id, network_id, ip_address, mac_address, device_name, model, attached_at)"
            " VALUES (?, ?, ?, '', '', ?, ?)",
            vm_id,
            net.external_network_id,
            ip_address,
            model,
            time.time(),
        )
        nic_id = int(cur.lastrowid or 0)
        ever = self.db.count("SELECT COUNT(*) FROM nics WHERE vm_id=?", vm_id)
        self.db.run(
            "UPDATE nics SET mac_address=?, device_name=? WHERE nic_id=?",
            addressing.mac_address(nic_id),
            addressing.device_name(ever),
            nic_id,
        )
        nic = typed_or_none(Nic, self.db.row("SELECT * FROM nics WHERE nic_id=?", nic_id))
        if nic is None:
            raise LookupError("NIC %d vanished as it was made" % nic_id)
        return nic

    def of_vm(self, vm_id: int) -> list[Nic]:
        """The VM's attached NICs, oldest first."""
        return [
            typed(Nic, r)
            for r in self.db.rows("SELECT * FROM nics WHERE vm_id=? AND detached_at IS NULL ORDER BY nic_id", vm_id)
        ]

    def at(self, vm_id: int, ip_address: str, network_id: int | None = None) -> Nic | None:
        """The VM's attached NIC with that address (on that network, when given)."""
        if network_id is None:
            row = self.db.row(
                "SELECT * FROM nics WHERE vm_id=? AND ip_address=? AND detached_at IS NULL", vm_id, ip_address
            )
        else:
            row = self.db.row(
                "SELECT * FROM nics WHERE vm_id=? AND ip_address=? AND network_id=? AND detached_at IS NULL",
                vm_id,
                ip_address,
                network_id,
            )
        return typed_or_none(Nic, row)

    def detach(self, nic_id: int) -> None:
        self.db.run("UPDATE nics SET detached_at=? WHERE nic_id=?", time.time(), nic_id)

    def detach_all(self, vm_id: int, now: float) -> list[Nic]:
        """Detach every NIC of the VM; returns them as they were."""
        nics = self.of_vm(vm_id)
        self.db.run("UPDATE nics SET detached_at=? WHERE vm_id=? AND detached_at IS NULL", now, vm_id)
        return nics
