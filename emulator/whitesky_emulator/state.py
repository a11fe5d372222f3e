"""The emulator's state: the store, the faults, the statistics, the VM locks, the NIC hook, and the views."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request

from .faults import DropResponse, Faults, Stats, VmLock, VmLocks
from .http import HTTPError, JsonObject, found
from .store import Cloudspace, Credential, Customer, GpuProfile, Location, Nic, Store, Vgpu, Vm, VmBrief


class ListingLookups:
    """The VM, profile and customer lookups of one vGPU listing, which repeat from row to row: each read once."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.vms: dict[int, VmBrief | None] = {}
        self.profiles: dict[str, GpuProfile | None] = {}
        self.customers: dict[str, Customer | None] = {}

    def vm(self, vm_id: int) -> VmBrief | None:
        if vm_id not in self.vms:
            self.vms[vm_id] = self.store.vms.brief(vm_id)
        return self.vms[vm_id]

    def profile(self, gpu_id: str) -> GpuProfile | None:
        if gpu_id not in self.profiles:
            self.profiles[gpu_id] = self.store.profiles.get(gpu_id)
        return self.profiles[gpu_id]

    def customer(self, customer_id: str) -> Customer | None:
        if customer_id not in self.customers:
            self.customers[customer_id] = self.store.accounts.customer(customer_id)
        return self.customers[customer_id]


class Emulator:
    def __init__(self, state_dir: str, token: str, world: Mapping[str, Any], nic_hook: str | None = None) -> None:
        os.makedirs(state_dir, exist_ok=True)
        self.store = Store(os.path.join(state_dir, "state.db"))
        if self.store.empty():
            self.store.seed(world)
        elif self.store.images.empty():  # a state file written before the emulator had images
            self.store.seed_images(world)
        self.token = token
        self.faults = Faults()
        self.stats = Stats()
        self.locks = VmLocks(self.stats, self.faults)
        self.hooks: dict[str, str | None] = {"nic_attach": nic_hook, "nic_detach": None}
        self.hook_log: list[dict[str, Any]] = []

    # -- request plumbing --------------------------------------------------
    def credential(self, request: Request) -> Credential | None:
        """The request's credential (None: refused): the token of ``--token`` acts for every customer unless it
        was revoked; any other must have been granted (``/_emulator/credentials``) and not revoked since."""
        header = request.headers.get("authorization", "")
        if not header.startswith("Bearer "):
            return None
        token = header[7:]
        known = self.store.credentials.get(token)
        if known is not None:
            return None if known.revoked else known
        return Credential("", None, False) if token == self.token else None

    def check_auth(self, request: Request) -> None:
        if self.credential(request) is None:
            raise HTTPError(401, "Unauthorized: missing, invalid or revoked bearer token")

    def customer(self, customer_id: str, request: Request | None = None) -> str:
        """``customer_id`` when it exists and the request's credential may act for it; 403 otherwise."""
        cred = self.credential(request) if request is not None else None
        allowed = cred is None or cred.customers is None or customer_id in cred.customers
        if not allowed or not self.store.accounts.customer(customer_id):
            raise HTTPError(403, "no access to customer %r" % customer_id)
        return customer_id

    async def inject(self, op: str) -> None:
        f = self.faults
        if f.latency_ms:
            await asyncio.sleep(f.latency_ms / 1000.0)
        nxt = f.fail_next.get(op)
        if nxt and nxt[1] > 0:
            nxt[1] -= 1
            self.stats.faults["fail_next"] += 1
            raise HTTPError(int(nxt[0]), "injected failure", self.retry_after_header(nxt[0]))
        if f.applies(op):
            for status, rate in f.error_rates.items():
                if rate and f.rng.random() < rate:
                    self.stats.faults[str(status)] += 1
                    raise HTTPError(int(status), "injected %s" % status, self.retry_after_header(status))

    def retry_after_header(self, status: int | str) -> dict[str, str]:
        return {"Retry-After": str(self.faults.retry_after)} if int(status) == 429 else {}

    def drop_now(self, op: str, mutating: bool) -> bool:
        f = self.faults
        left = f.drop_after_commit.get(op, 0)
        if left > 0:
            f.drop_after_commit[op] = left - 1
            self.stats.faults["dropped"] += 1
            return True
        if mutating and f.drop_rate and f.applies(op) and f.rng.random() < f.drop_rate:
            self.stats.faults["dropped"] += 1
            return True
        return False

    @staticmethod
    def dropped_response() -> DropResponse:
        return DropResponse()

    def vm_lock(self, vm_id: int) -> VmLock:
        return self.locks(vm_id)

    async def run_hook(self, event: str, env: Mapping[str, object]) -> None:
        cmd = self.hooks.get(event)
        if not cmd:
            return
        full = dict(os.environ, EMU_EVENT=event, **{k: str(v) for k, v in env.items()})
        started = time.monotonic()
        proc = await asyncio.create_subprocess_shell(
            cmd, env=full, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await proc.communicate()
        self.hook_log.append(
            {
                "event": event,
                "rc": proc.returncode,
                "output": out.decode(errors="replace")[-2000:],
                "seconds": time.monotonic() - started,
                **env,
            }
        )

    # -- lookups: a row, or the platform's 404 -------------------------------
    def location(self, name: str) -> Location:
        return found(self.store.accounts.location(name), "location %r not found" % name)

    def cloudspace(self, cid: str, cs_id: str) -> Cloudspace:
        return found(self.store.cloudspaces.get(cid, cs_id), "cloudspace %r not found" % cs_id)

    def vm(self, cs_id: str, vm_id: int) -> Vm:
        return found(self.store.vms.get(cs_id, vm_id), "virtual machine %s not found in cloudspace %r" % (vm_id, cs_id))

    def vgpu(self, cid: str, vgpu_id: str, location: str | None = None, deleted: bool = False) -> Vgpu:
        row = self.store.vgpus.get(cid, vgpu_id)
        if not row or (location and row.location != location):
            raise HTTPError(404, "vgpu %r not found" % vgpu_id)
        if not deleted and row.soft_deleted_at is not None:
            raise HTTPError(404, "vgpu %r is deleted" % vgpu_id)
        return row

    def profile(self, location: str, gpu_id: str) -> GpuProfile:
        return found(
            self.store.profiles.get(gpu_id, location), "GPU profile %r not found in location %r" % (gpu_id, location)
        )

    # -- views: rows as the platform answers them -------------------------------
    def vgpu_info(self, row: Vgpu, lookups: ListingLookups | None = None) -> JsonObject:
        """A reservation as the API shows it; ``lookups`` keeps the VM, profile and customer lookups of a listing,
        which repeat from row to row."""
        lookups = ListingLookups(self.store) if lookups is None else lookups
        vm = None
        if row.vm_id is not None:
            v = lookups.vm(row.vm_id)
            if v is None:
                raise LookupError("vgpu %r is attached to VM %s, which was never made" % (row.vgpu_id, row.vm_id))
            vm = {"id": v.vm_id, "name": v.name, "cloudspace_id": v.cloudspace_id, "cloudspace_name": v.cs_name}
        prof = lookups.profile(row.gpu_id)
        cust = lookups.customer(row.customer_id)
        if cust is None:
            raise LookupError("vgpu %r belongs to customer %r, who does not exist" % (row.vgpu_id, row.customer_id))
        if row.soft_deleted_at is not None:
            status = "DELETED"
        else:
            status = "ATTACHED" if row.vm_id is not None else "RESERVED"
        return {
            "account_id": 1,
            "customer_name": cust.name,
            "customer_id": row.customer_id,
            "vgpu_id": row.vgpu_id,
            "vgpu_name": row.vgpu_name,
            "gpu_id": row.gpu_id,
            "description": prof.description if prof else "",
            "status": status,
            "virtual_machine": vm,
            "deletion_time": int(row.soft_deleted_at or 0),
            "location": row.location,
        }

    @staticmethod
    def nic_info(nic: Nic) -> JsonObject:
        """A NIC as ``listExternalNetworksVirtualMachine`` lists it."""
        return {
            "device_name": nic.device_name,
            "mac_address": nic.mac_address,
            "ip_address": nic.ip_address,
            "network_id": nic.network_id,
            "nic_type": "external",
            "model": nic.model,
            "external_cloudspace_id": "",
        }

    @staticmethod
    def vm_interface(nic: Nic, listed: bool = False) -> JsonObject:
        """A NIC as a VM's ``network_interfaces`` lists it: ``getVirtualMachineInfo`` names its type ``nic_type``
        (the spec's VmInfoModelNetworkInterfaces), a cloudspace's VM listing ``external_network_type``
        (VmsModelNetworkInterfaces); both schemas are closed."""
        return {
            "device_name": nic.device_name,
            "mac_address": nic.mac_address,
            "ip_address": nic.ip_address,
            "network_id": nic.network_id,
            "model": nic.model,
            "external_network_type" if listed else "nic_type": "external",
            "external_cloudspace_id": "",
        }

    def vm_info(self, vm: Vm, listed: bool = False) -> JsonObject:
        """A VM as ``getVirtualMachineInfo`` gives it (``listed``: its NICs as a listing names their fields)."""
        nics = self.store.networks.of_vm(vm.vm_id)
        vgpus = self.store.vgpus.of_vm(vm.vm_id)
        return {
            "vm_id": vm.vm_id,
            "name": vm.name,
            "description": vm.description,
            "cloudspace_id": vm.cloudspace_id,
            "status": vm.status,
            "creation_time": vm.created,
            "update_time": vm.updated,
            "vcpus": vm.vcpus,
            "memory": vm.memory,
            "storage": vm.disk_size or 0,
            "image_id": vm.image_id or 0,
            "locked": vm.vm_id in self.locks,
            "hostname": vm.name,
            "agent_status": "RUNNING",
            "network_interfaces": [self.vm_interface(n, listed) for n in nics],
            "devices": [{"reference_id": g.vgpu_id, "type": "VGPU", "description": g.vgpu_name} for g in vgpus],
            "disks": [],
            "boot_type": "bios",
            "appliance": False,
            "tpm_enabled": False,
        }
