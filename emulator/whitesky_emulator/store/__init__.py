"""The emulator's persisted state: one SQLite file under --state-dir, read and written through one store per
resource, each returning typed rows.

- ``db``: the schema, the connection, transactions;
- ``accounts``: customers and locations; ``credentials``: the bearer tokens accepted, and for whom; ``images``: the
  VM images each location offers; ``cloudspaces``: cloudspaces and their notes; ``vms``: VMs and their guests'
  files; ``vgpus``: reservations, their attachments and the GPU profiles (with ``listing``, the positions of
  listings kept between pages); ``networks``: external networks
  and NICs; ``billing``: what the consumption report and the ledger read.

What spans resources (seeding the world, deleting a VM with what it holds, the admin snapshot) is :class:`Store`'s.
Transient things (faults, VM locks, request statistics) are not stored.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..world import DEFAULT_IMAGES
from .accounts import AccountStore, Customer, Location
from .billing import Attachment, BillingStore
from .cloudspaces import DEFAULT_PRIVATE_NETWORK, Cloudspace, CloudspaceStore, Note, NoteStore
from .credentials import Credential, CredentialStore
from .db import Database
from .images import Image, ImageStore
from .networks import ExternalNetwork, NetworkStore, Nic
from .vgpus import GpuProfile, ProfileStore, Vgpu, VgpuStore
from .vms import Vm, VmBrief, VmStore

__all__ = [
    "Attachment",
    "Cloudspace",
    "Credential",
    "Customer",
    "ExternalNetwork",
    "GpuProfile",
    "Image",
    "Location",
    "Nic",
    "Note",
    "Store",
    "Vgpu",
    "Vm",
    "VmBrief",
]

#: What the admin snapshot shows of each table.
SNAPSHOT = {
    "cloudspaces": "cloudspace_id, name, location, status, deleted_at",
    "vms": "vm_id, cloudspace_id, name, description, vcpus, memory, status, deleted_at",
    "vgpus": "vgpu_id, vgpu_name, location, gpu_id, vm_id, soft_deleted_at, deleted_at",
    "notes": "note_id, cloudspace_id, title, content, created_by, modified_by",
}


class Store:
    """The state file and its resource stores.  Every method runs on the server's event loop thread."""

    def __init__(self, path: str) -> None:
        self.db = Database(path)
        self.accounts = AccountStore(self.db)
        self.credentials = CredentialStore(self.db)
        self.images = ImageStore(self.db)
        self.cloudspaces = CloudspaceStore(self.db)
        self.notes = NoteStore(self.db)
        self.vms = VmStore(self.db)
        self.profiles = ProfileStore(self.db)
        self.vgpus = VgpuStore(self.db, self.profiles)
        self.networks = NetworkStore(self.db)
        self.billing = BillingStore(self.db)

    def empty(self) -> bool:
        return self.accounts.empty()

    def seed(self, world: Mapping[str, Any]) -> None:
        """The world of a seed file (``world.DEFAULT_WORLD``'s shape), in one transaction."""
        with self.db.transaction():
            for cust in world["customers"]:
                self.accounts.add_customer(cust["customer_id"], cust.get("name", cust["customer_id"]))
            for loc in world["locations"]:
                self.accounts.add_location(loc["name"], loc.get("currency", "EUR"), loc.get("prices", {}))
                self._seed_images(loc)
                for gpu in loc.get("gpus", []):
                    self.profiles.add(
                        GpuProfile(
                            gpu["id"],
                            loc["name"],
                            gpu["vendor"],
                            gpu["model"],
                            gpu.get("description", ""),
                            int(gpu["available_instances"]),
                        )
                    )
                for net in loc.get("external_networks", []):
                    self.networks.add_network(
                        ExternalNetwork(
                            int(net["external_network_id"]),
                            loc["name"],
                            net["name"],
                            net["network"],
                            net["gateway"],
                            net["subnet_mask"],
                            int(net.get("dhcp", False)),
                            int(net.get("public", False)),
                        )
                    )
                for cs in loc.get("cloudspaces", []):
                    self.cloudspaces.create(
                        cs["cloudspace_id"],
                        cs["customer_id"],
                        cs["name"],
                        loc["name"],
                        cs.get("private_network", DEFAULT_PRIVATE_NETWORK),
                    )

    def seed_images(self, world: Mapping[str, Any]) -> None:
        """The images of the world's locations, into a state file seeded before the emulator had images."""
        with self.db.transaction():
            for loc in world["locations"]:
                if self.accounts.location(loc["name"]) is not None:
                    self._seed_images(loc)

    def _seed_images(self, loc: Mapping[str, Any]) -> None:
        """A seed location's images; one that lists none gets the default world's (``world.DEFAULT_IMAGES``)."""
        for image in loc.get("images", DEFAULT_IMAGES):
            self.images.add(
                Image(
                    loc["name"],
                    int(image["image_id"]),
                    image["name"],
                    image.get("description", ""),
                    image.get("os_type", "Linux"),
                    image.get("status", "CREATED"),
                    int(image.get("size", 10)),
                    int(image.get("boot_disk_size", 10)),
                    int(image.get("memory", 512)),
                    int(image.get("public", True)),
                )
            )

    def reserve_many(
        self, customer_id: str, location: str, gpu_id: str, names: list[str], vm_id: int | None = None
    ) -> list[str]:
        """Reservations made in one transaction (the admin API's ``seed-vgpu``, as another tool would make them)."""
        with self.db.transaction():
            return [self.vgpus.reserve(customer_id, location, gpu_id, name, vm_id) for name in names]

    def delete_vm(self, vm_id: int) -> list[Nic]:
        """Detach what the VM holds and delete it; returns the NICs that were detached."""
        for vgpu in self.vgpus.of_vm(vm_id):
            self.vgpus.detach(vgpu.vgpu_id)
        now = time.time()
        nics = self.networks.detach_all(vm_id, now)
        self.vms.delete(vm_id, now)
        return nics

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Every cloudspace, VM, reservation and note as stored (a few columns of each), deleted ones included."""
        return {
            table: [dict(r) for r in self.db.rows("SELECT %s FROM %s" % (columns, table))]
            for table, columns in SNAPSHOT.items()
        }
