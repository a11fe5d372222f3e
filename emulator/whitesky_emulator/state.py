"""The emulator's state: the store, the faults, the statistics, the VM locks, the NIC hook, and the views."""

from __future__ import annotations

import asyncio
import os
import time

from .faults import DropResponse, Faults, Stats, VmLocks
from .http import HTTPError, found
from .store import Store


class Emulator:
    def __init__(self, state_dir, token, world, nic_hook=None):
        os.makedirs(state_dir, exist_ok=True)
        self.store = Store(os.path.join(state_dir, "state.db"))
        if self.store.empty():
            self.store.seed(world)
        self.token = token
        self.faults = Faults()
        self.stats = Stats()
        self.locks = VmLocks(self.stats, self.faults)
        self.hooks = {"nic_attach": nic_hook, "nic_detach": None}
        self.hook_log = []

    # -- request plumbing --------------------------------------------------
    def check_auth(self, request):
        header = request.headers.get("authorization", "")
        if not header.startswith("Bearer ") or header[7:] != self.token:
            raise HTTPError(401, "Unauthorized: missing or invalid bearer token")

    def customer(self, customer_id):
        if not self.store.customer(customer_id):
            raise HTTPError(403, "no access to customer %r" % customer_id)
        return customer_id

    async def inject(self, op):
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

    def retry_after_header(self, status):
        return {"Retry-After": str(self.faults.retry_after)} if int(status) == 429 else {}

    def drop_now(self, op, mutating):
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
    def dropped_response():
        return DropResponse()

    def vm_lock(self, vm_id):
        return self.locks(vm_id)

    async def run_hook(self, event, env):
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
    def location(self, name):
        return found(self.store.location(name), "location %r not found" % name)

    def cloudspace(self, cid, cs_id):
        return found(self.store.cloudspace(cid, cs_id), "cloudspace %r not found" % cs_id)

    def vm(self, cs_id, vm_id):
        return found(self.store.vm(cs_id, vm_id), "virtual machine %s not found in cloudspace %r" % (vm_id, cs_id))

    def vgpu(self, cid, vgpu_id, location=None, deleted=False):
        row = self.store.vgpu(cid, vgpu_id)
        if not row or (location and row["location"] != location):
            raise HTTPError(404, "vgpu %r not found" % vgpu_id)
        if not deleted and row["soft_deleted_at"] is not None:
            raise HTTPError(404, "vgpu %r is deleted" % vgpu_id)
        return row

    def profile(self, location, gpu_id):
        return found(
            self.store.profile(gpu_id, location), "GPU profile %r not found in location %r" % (gpu_id, location)
        )

    # -- views: rows as the platform answers them -------------------------------
    def vgpu_info(self, row, cache=None):
        """A reservation as the API shows it; ``cache`` (a dict) keeps the VM, profile and customer lookups of a
        listing, which repeat from row to row."""
        cache = {} if cache is None else cache

        def once(kind, key, read):
            if (kind, key) not in cache:
                cache[(kind, key)] = read(key)
            return cache[(kind, key)]

        vm = None
        if row["vm_id"] is not None:
            v = once("vm", row["vm_id"], self.store.vm_brief)
            vm = {
                "id": v["vm_id"],
                "name": v["name"],
                "cloudspace_id": v["cloudspace_id"],
                "cloudspace_name": v["cs_name"],
            }
        prof = once("profile", row["gpu_id"], self.store.profile)
        cust = once("customer", row["customer_id"], self.store.customer)
        if row["soft_deleted_at"] is not None:
            status = "DELETED"
        else:
            status = "ATTACHED" if row["vm_id"] is not None else "RESERVED"
        return {
            "account_id": 1,
            "customer_name": cust["name"],
            "customer_id": row["customer_id"],
            "vgpu_id": row["vgpu_id"],
            "vgpu_name": row["vgpu_name"],
            "gpu_id": row["gpu_id"],
            "description": prof["description"] if prof else "",
            "status": status,
            "virtual_machine": vm,
            "deletion_time": int(row["soft_deleted_at"] or 0),
            "location": row["location"],
        }

    @staticmethod
    def nic_info(nic):
        """A NIC as ``listExternalNetworksVirtualMachine`` lists it."""
        return {
            "device_name": nic["device_name"],
            "mac_address": nic["mac_address"],
            "ip_address": nic["ip_address"],
            "network_id": nic["network_id"],
            "nic_type": "external",
            "model": nic["model"],
            "external_cloudspace_id": "",
        }

    @staticmethod
    def vm_interface(nic, listed=False):
        """A NIC as a VM's ``network_interfaces`` lists it: ``getVirtualMachineInfo`` names its type ``nic_type``
        (the spec's VmInfoModelNetworkInterfaces), a cloudspace's VM listing ``external_network_type``
        (VmsModelNetworkInterfaces); both schemas are closed."""
        return {
            "device_name": nic["device_name"],
            "mac_address": nic["mac_address"],
            "ip_address": nic["ip_address"],
            "network_id": nic["network_id"],
            "model": nic["model"],
            "external_network_type" if listed else "nic_type": "external",
            "external_cloudspace_id": "",
        }

    def vm_info(self, vm, listed=False):
        """A VM as ``getVirtualMachineInfo`` gives it (``listed``: its NICs as a listing names their fields)."""
        nics = self.store.nics_of_vm(vm["vm_id"])
        vgpus = self.store.vgpus_of_vm(vm["vm_id"])
        return {
            "vm_id": vm["vm_id"],
            "name": vm["name"],
            "description": vm["description"],
            "cloudspace_id": vm["cloudspace_id"],
            "status": vm["status"],
            "creation_time": vm["created"],
            "update_time": vm["updated"],
            "vcpus": vm["vcpus"],
            "memory": vm["memory"],
            "storage": vm["disk_size"] or 0,
            "image_id": vm["image_id"] or 0,
            "locked": vm["vm_id"] in self.locks,
            "hostname": vm["name"],
            "agent_status": "RUNNING",
            "network_interfaces": [self.vm_interface(n, listed) for n in nics],
            "devices": [{"reference_id": g["vgpu_id"], "type": "VGPU", "description": g["vgpu_name"]} for g in vgpus],
            "disks": [],
            "boot_type": "bios",
            "appliance": False,
            "tpm_enabled": False,
        }
