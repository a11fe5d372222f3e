"""The whitesky.cloud emulator: a Starlette app over the SQLite store.

It serves the subset of the platform's API that the collection uses, at the
same paths, with parameters in the same places (query vs. body), the same
envelopes and the same status codes.  Under ``/_emulator`` (outside
``/api/1``) it has what tests need: faults, statistics, the billing ledger
and the NIC hot-plug hook.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import random
import re
import time
from collections import defaultdict

from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from .store import VGU_SECONDS, Store

API = "/api/1"
C = "/customers/{customer_id}"
CS = C + "/cloudspaces/{cloudspace_id}"
VM = CS + "/vms/{vm_id}"
LOC = C + "/locations/{location}"
#: The largest page served; larger ``limit`` values are capped.
MAX_PAGE = 500
#: vgpu_name rules (an assumption; the spec states none): 1-64 of these characters.
VGPU_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
NIC_MODELS = ("ne2k_pci", "i82551", "i82557b", "i82559er", "rtl8139", "e1000", "pcnet", "virtio")


class HTTPError(Exception):
    def __init__(self, status, message, headers=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class DropResponse(Response):
    """Commit happened; the response is lost: send a partial body and cut the connection."""

    def __init__(self):
        super().__init__(b"", status_code=200)

    async def __call__(self, scope, receive, send):
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"64")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"vgpu', "more_body": True})
        raise ConnectionAbortedError("emulator: response dropped after commit (fault injection)")


def found(row, message):
    """The row, or a 404 with the message."""
    if not row:
        raise HTTPError(404, message)
    return row


class Faults:
    """Per-test fault injection, set through ``POST /_emulator/faults``."""

    FIELDS = {
        "latency_ms": 0.0,  # added to every API request
        "error_rates": {},  # {"503": 0.2, "429": 0.1}: answered before processing
        "retry_after": 1,  # seconds, in the Retry-After header of a 429
        "operations": None,  # limit error_rates / drop_rate to these operationIds
        "drop_after_commit": {},  # {"operationId": N}: the next N responses are lost after commit
        "drop_rate": 0.0,  # fraction of mutating responses lost after commit
        "fail_next": {},  # {"operationId": [status, N]}: the next N calls fail before processing
        "vm_op_seconds": 0.0,  # how long one VM mutation holds the VM's lock
        "seed": None,
    }

    def __init__(self):
        self.set({})

    def set(self, cfg):
        unknown = set(cfg) - set(self.FIELDS)
        if unknown:
            raise HTTPError(400, "unknown fault field(s): %s; valid: %s" % (sorted(unknown), sorted(self.FIELDS)))
        for key, default in self.FIELDS.items():
            value = cfg.get(key, default)
            setattr(self, key, json.loads(json.dumps(value)))
        self.rng = random.Random(self.seed)

    def as_dict(self):
        return {k: getattr(self, k) for k in self.FIELDS}

    def applies(self, op):
        return self.operations is None or op in self.operations


class Stats:
    def __init__(self):
        self.reset()

    def reset(self):
        self.ops = defaultdict(lambda: {"count": 0, "statuses": defaultdict(int), "query": set(), "body": set()})
        self.faults = defaultdict(int)
        self.vm_lock_conflicts = 0
        self.requests = 0  # API requests received
        self.in_flight = 0  # API requests received and not yet answered

    def as_dict(self):
        return {
            "operations": {
                op: {
                    "count": s["count"],
                    "statuses": dict(s["statuses"]),
                    "query": sorted(s["query"]),
                    "body": sorted(s["body"]),
                }
                for op, s in self.ops.items()
            },
            "faults": dict(self.faults),
            "vm_lock_conflicts": self.vm_lock_conflicts,
            "requests": self.requests,
            "in_flight": self.in_flight,
        }


class Emulator:
    def __init__(self, state_dir, token, world, nic_hook=None):
        os.makedirs(state_dir, exist_ok=True)
        self.store = Store(os.path.join(state_dir, "state.db"))
        if self.store.empty():
            self.store.seed(world)
        self.token = token
        self.faults = Faults()
        self.stats = Stats()
        self.locks = set()
        self.hooks = {"nic_attach": nic_hook, "nic_detach": None}
        self.hook_log = []

    # -- request plumbing --------------------------------------------------
    def check_auth(self, request):
        header = request.headers.get("authorization", "")
        if not header.startswith("Bearer ") or header[7:] != self.token:
            raise HTTPError(401, "Unauthorized: missing or invalid bearer token")

    def customer(self, customer_id):
        if not self.store.one("SELECT 1 FROM customers WHERE customer_id=?", customer_id):
            raise HTTPError(403, "no access to customer %r" % customer_id)
        return customer_id

    async def inject(self, op, mutating):
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

    def vm_lock(self, vm_id):
        emu = self

        class _Lock:
            async def __aenter__(self):
                if vm_id in emu.locks:
                    emu.stats.vm_lock_conflicts += 1
                    raise HTTPError(409, "virtual machine %s is locked by another operation" % vm_id)
                emu.locks.add(vm_id)
                if emu.faults.vm_op_seconds:
                    try:
                        await asyncio.sleep(emu.faults.vm_op_seconds)
                    except BaseException:
                        emu.locks.discard(vm_id)
                        raise

            async def __aexit__(self, *exc):
                emu.locks.discard(vm_id)

        return _Lock()

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

    # -- lookups -----------------------------------------------------------
    def location(self, name):
        return found(self.store.one("SELECT * FROM locations WHERE name=?", name), "location %r not found" % name)

    def cloudspace(self, cid, cs_id):
        return found(
            self.store.one(
                "SELECT * FROM cloudspaces WHERE cloudspace_id=? AND customer_id=? AND deleted_at IS NULL", cs_id, cid
            ),
            "cloudspace %r not found" % cs_id,
        )

    def vm(self, cs_id, vm_id):
        return found(
            self.store.one("SELECT * FROM vms WHERE vm_id=? AND cloudspace_id=? AND deleted_at IS NULL", vm_id, cs_id),
            "virtual machine %s not found in cloudspace %r" % (vm_id, cs_id),
        )

    def vgpu(self, cid, vgpu_id, location=None, deleted=False):
        row = self.store.one(
            "SELECT * FROM vgpus WHERE vgpu_id=? AND customer_id=? AND deleted_at IS NULL", vgpu_id, cid
        )
        if not row or (location and row["location"] != location):
            raise HTTPError(404, "vgpu %r not found" % vgpu_id)
        if not deleted and row["soft_deleted_at"] is not None:
            raise HTTPError(404, "vgpu %r is deleted" % vgpu_id)
        return row

    def profile(self, location, gpu_id):
        return found(
            self.store.one("SELECT * FROM gpu_profiles WHERE id=? AND location=?", gpu_id, location),
            "GPU profile %r not found in location %r" % (gpu_id, location),
        )

    def vgpu_info(self, row):
        vm = None
        if row["vm_id"] is not None:
            v = self.store.one(
                "SELECT vms.vm_id, vms.name, vms.cloudspace_id, cloudspaces.name AS cs_name FROM vms"
                " JOIN cloudspaces USING (cloudspace_id) WHERE vm_id=?",
                row["vm_id"],
            )
            vm = {
                "id": v["vm_id"],
                "name": v["name"],
                "cloudspace_id": v["cloudspace_id"],
                "cloudspace_name": v["cs_name"],
            }
        prof = self.store.one("SELECT * FROM gpu_profiles WHERE id=?", row["gpu_id"])
        cust = self.store.one("SELECT * FROM customers WHERE customer_id=?", row["customer_id"])
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

    def nic_info(self, nic):
        return {
            "device_name": nic["device_name"],
            "mac_address": nic["mac_address"],
            "ip_address": nic["ip_address"],
            "network_id": nic["network_id"],
            "nic_type": "external",
            "model": nic["model"],
            "external_cloudspace_id": "",
        }

    def vm_info(self, vm):
        nics = self.store.q("SELECT * FROM nics WHERE vm_id=? AND detached_at IS NULL ORDER BY nic_id", vm["vm_id"])
        vgpus = self.store.q("SELECT * FROM vgpus WHERE vm_id=? AND deleted_at IS NULL", vm["vm_id"])
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
            "network_interfaces": [self.nic_info(n) for n in nics],
            "devices": [{"reference_id": g["vgpu_id"], "type": "VGPU", "description": g["vgpu_name"]} for g in vgpus],
            "disks": [],
            "boot_type": "bios",
            "appliance": False,
            "tpm_enabled": False,
        }


# -- parameter helpers -------------------------------------------------------
def q_bool(ctx, name, default=False, required=False):
    raw = ctx.query.get(name)
    if raw is None:
        if required:
            raise HTTPError(400, "missing required query parameter %r" % name)
        return default
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise HTTPError(400, "query parameter %r must be a boolean, got %r" % (name, raw))


def q_int(ctx, name, default=None, required=False):
    raw = ctx.query.get(name)
    if raw is None or raw == "":
        if required:
            raise HTTPError(400, "missing required query parameter %r" % name)
        return default
    try:
        return int(raw)
    except ValueError:
        raise HTTPError(400, "query parameter %r must be an integer, got %r" % (name, raw)) from None


def q_str(ctx, name, default=None, required=False, choices=None):
    raw = ctx.query.get(name)
    if raw is None:
        if required:
            raise HTTPError(400, "missing required query parameter %r" % name)
        return default
    if choices and raw not in choices:
        raise HTTPError(400, "query parameter %r must be one of %s, got %r" % (name, list(choices), raw))
    return raw


class Ctx:
    def __init__(self, emu, request, body):
        self.emu = emu
        self.store = emu.store
        self.request = request
        self.path = request.path_params
        self.query = request.query_params
        self.body = body

    def customer(self):
        return self.emu.customer(self.path["customer_id"])

    def target_vm(self):
        """(customer, cloudspace row, VM row) of a VM-scoped path; 404 for what does not exist."""
        cid = self.customer()
        cs = self.emu.cloudspace(cid, self.path["cloudspace_id"])
        return cid, cs, self.emu.vm(cs["cloudspace_id"], int(self.path["vm_id"]))


OPS = []


def op(method, path, operation_id, mutating=False):
    """Register a handler for one operation of the spec."""

    def wrap(func):
        OPS.append((method, path, operation_id, mutating, func))
        return func

    return wrap


def make_endpoint(emu, operation_id, mutating, func):
    async def endpoint(request):
        emu.stats.requests += 1
        emu.stats.in_flight += 1
        try:
            return await answer(request)
        finally:
            emu.stats.in_flight -= 1

    async def answer(request):
        stats = emu.stats.ops[operation_id]
        stats["count"] += 1
        stats["query"].update(request.query_params.keys())
        body = None
        try:
            emu.check_auth(request)
            raw = await request.body()
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError:
                    raise HTTPError(400, "request body is not valid JSON") from None
                if isinstance(body, dict):
                    stats["body"].update(body.keys())
            await emu.inject(operation_id, mutating)
            result = await func(Ctx(emu, request, body))
        except HTTPError as exc:
            stats["statuses"][exc.status] += 1
            return JSONResponse({"message": exc.message}, status_code=exc.status, headers=exc.headers)
        stats["statuses"][200] += 1
        if emu.drop_now(operation_id, mutating):
            return DropResponse()
        return JSONResponse(result)

    return endpoint


# -- locations, GPUs -----------------------------------------------------------
@op("GET", C + "/locations", "listCustomerLocations")
async def list_locations(ctx):
    ctx.customer()
    rows = ctx.store.q("SELECT * FROM locations ORDER BY name")
    currency = rows[0]["currency"] if rows else "EUR"
    return {
        "currency": currency,
        "locations": [{"location": r["name"], "resources": json.loads(r["prices"])} for r in rows],
    }


@op("GET", LOC + "/gpus", "listAvailableGPUProfiles")
async def list_gpus(ctx):
    ctx.customer()
    ctx.emu.location(ctx.path["location"])
    rows = ctx.store.q("SELECT * FROM gpu_profiles WHERE location=? ORDER BY id", ctx.path["location"])
    return {
        "result": [
            {
                "id": r["id"],
                "vendor": r["vendor"],
                "model": r["model"],
                "description": r["description"],
                "available_instances": r["available_instances"],
            }
            for r in rows
        ]
    }


def vgpu_name_from(ctx):
    if not isinstance(ctx.body, dict) or "vgpu_name" not in ctx.body:
        raise HTTPError(400, "body field 'vgpu_name' is required")
    name = ctx.body["vgpu_name"]
    if not isinstance(name, str) or not VGPU_NAME.match(name):
        raise HTTPError(
            400, "invalid vgpu_name %r: 1-64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit" % (name,)
        )
    return name


def take_instance(ctx, location, gpu_id):
    prof = ctx.emu.profile(location, gpu_id)
    if prof["available_instances"] <= 0:
        raise HTTPError(409, "no available instances of GPU profile %r" % gpu_id)
    return prof


@op("POST", LOC + "/gpus/{gpu_id}", "reserveVGPU", mutating=True)
async def reserve_vgpu(ctx):
    cid = ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])["name"]
    name = vgpu_name_from(ctx)
    take_instance(ctx, loc, ctx.path["gpu_id"])
    return {"vgpu_id": ctx.store.new_vgpu(cid, loc, ctx.path["gpu_id"], name)}


@op("GET", LOC + "/vgpus", "listCustomerVGPUS")
async def list_vgpus(ctx):
    cid = ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])["name"]
    limit = q_int(ctx, "limit", 25)
    start = q_int(ctx, "start_after", 0)
    if limit < 1 or start < 0:
        raise HTTPError(400, "limit must be >= 1 and start_after >= 0")
    limit = min(limit, MAX_PAGE)
    only_deleted = q_bool(ctx, "only_deleted")
    include_deleted = q_bool(ctx, "include_deleted")
    where = "customer_id=? AND location=? AND deleted_at IS NULL"
    if only_deleted:
        where += " AND soft_deleted_at IS NOT NULL"
    elif not include_deleted:
        where += " AND soft_deleted_at IS NULL"
    count = ctx.store.one("SELECT COUNT(*) FROM vgpus WHERE " + where, cid, loc)[0]
    rows = ctx.store.q(
        "SELECT * FROM vgpus WHERE " + where + " ORDER BY rowid LIMIT ? OFFSET ?", cid, loc, limit, start
    )
    return {
        "pagination": {"limit": limit, "pages": (count + limit - 1) // limit, "count": count},
        "data": [ctx.emu.vgpu_info(r) for r in rows],
    }


@op("POST", LOC + "/vgpus/{vgpu_id}", "restoreVGPU", mutating=True)
async def restore_vgpu(ctx):
    cid = ctx.customer()
    row = ctx.emu.vgpu(cid, ctx.path["vgpu_id"], ctx.path["location"], deleted=True)
    if row["soft_deleted_at"] is None:
        raise HTTPError(409, "vgpu %r is not deleted" % row["vgpu_id"])
    ctx.store.x("UPDATE vgpus SET soft_deleted_at=NULL, touched=touched+1 WHERE vgpu_id=?", row["vgpu_id"])
    return {"success": True}


@op("DELETE", LOC + "/vgpus/{vgpu_id}", "deleteVGPU", mutating=True)
async def delete_vgpu(ctx):
    cid = ctx.customer()
    row = ctx.emu.vgpu(cid, ctx.path["vgpu_id"], ctx.path["location"], deleted=True)
    detach = q_bool(ctx, "detach", True)
    permanently = q_bool(ctx, "permanently", False)
    if row["soft_deleted_at"] is not None and not permanently:
        raise HTTPError(404, "vgpu %r is already deleted" % row["vgpu_id"])
    if row["vm_id"] is not None:
        if not detach:
            raise HTTPError(
                409,
                "vgpu %r is attached to VM %s; detach it first or pass detach=true" % (row["vgpu_id"], row["vm_id"]),
            )
        async with ctx.emu.vm_lock(row["vm_id"]):
            row = ctx.emu.vgpu(cid, ctx.path["vgpu_id"], ctx.path["location"], deleted=True)
            if row["vm_id"] is not None:
                ctx.store.detach_vgpu(row["vgpu_id"])
            ctx.store.delete_vgpu(row, permanently)
    else:
        ctx.store.delete_vgpu(row, permanently)
    return {"success": True}


@op("POST", VM + "/gpus/{gpu_id}", "reserveAndAttachVGPUToVM", mutating=True)
async def reserve_attach(ctx):
    cid, cs, vm = ctx.target_vm()
    vm_id = vm["vm_id"]
    name = vgpu_name_from(ctx)
    async with ctx.emu.vm_lock(vm_id):
        ctx.emu.vm(cs["cloudspace_id"], vm_id)
        take_instance(ctx, cs["location"], ctx.path["gpu_id"])
        return {"vgpu_id": ctx.store.new_vgpu(cid, cs["location"], ctx.path["gpu_id"], name, vm_id)}


@op("POST", VM + "/vgpus/{vgpu_id}", "attachVGPUToVM", mutating=True)
async def attach_vgpu(ctx):
    cid, cs, vm = ctx.target_vm()
    vm_id = vm["vm_id"]
    row = ctx.emu.vgpu(cid, ctx.path["vgpu_id"], cs["location"])
    if row["vm_id"] is not None:
        raise HTTPError(409, "vgpu %r is already attached to VM %s" % (row["vgpu_id"], row["vm_id"]))
    async with ctx.emu.vm_lock(vm_id):
        ctx.store.attach_vgpu(row["vgpu_id"], vm_id)
    return {"success": True}


@op("DELETE", VM + "/vgpus/{vgpu_id}", "detachVGPUFromVM", mutating=True)
async def detach_vgpu(ctx):
    cid, cs, vm = ctx.target_vm()
    vm_id = vm["vm_id"]
    row = ctx.emu.vgpu(cid, ctx.path["vgpu_id"], cs["location"])
    if row["vm_id"] != vm_id:
        raise HTTPError(409, "vgpu %r is not attached to VM %s" % (row["vgpu_id"], vm_id))
    async with ctx.emu.vm_lock(vm_id):
        ctx.store.detach_vgpu(row["vgpu_id"])
    return {"success": True}


# -- billing -------------------------------------------------------------------
@op("GET", LOC + "/consumption", "getCustomerConsumption")
async def consumption(ctx):
    cid = ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])["name"]
    start = q_int(ctx, "start", required=True)
    end = q_int(ctx, "end", required=True)
    if end < start:
        raise HTTPError(400, "end must not be before start")
    per_vm = defaultdict(float)
    unassigned = []
    total = 0.0
    for row in ctx.store.q("SELECT * FROM vgpus WHERE customer_id=? AND location=?", cid, loc):
        billed = ctx.store.vgpu_seconds(row, start, end)
        if billed <= 0:
            continue
        total += billed
        attached = ctx.store.attached_seconds(row["vgpu_id"], start, end)
        for vm_id, secs in attached.items():
            per_vm[vm_id] += secs
        rest = billed - sum(attached.values())
        if rest > 1e-9:
            unassigned.append({"vgpu_id": row["vgpu_id"], "consumption": {"vgu": rest / VGU_SECONDS}})
    spaces = []
    for cs in ctx.store.q("SELECT * FROM cloudspaces WHERE customer_id=? AND location=?", cid, loc):
        vms = [
            {"vm_id": v["vm_id"], "name": v["name"], "consumption": {"vgu": per_vm.get(v["vm_id"], 0.0) / VGU_SECONDS}}
            for v in ctx.store.q("SELECT * FROM vms WHERE cloudspace_id=?", cs["cloudspace_id"])
        ]
        spaces.append(
            {
                "cloudspace_id": cs["cloudspace_id"],
                "name": cs["name"],
                "mode": "private",
                "consumption": {"vgu": sum(v["consumption"]["vgu"] for v in vms)},
                "vms": vms,
            }
        )
    return {
        "name": cid,
        "cloudspaces": spaces,
        "objectspaces": [],
        "unassigned_disks": [],
        "unassigned_vgpus": unassigned,
        "consumption": {"vgu": total / VGU_SECONDS},
    }


@op("GET", LOC + "/prices", "getCustomerLocationPricing")
async def prices(ctx):
    ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])
    resources = dict.fromkeys(("su", "ou", "mu", "vcu", "tu", "wu", "nu", "piu", "vgu", "fsu"), 0.0)
    resources.update(json.loads(loc["prices"]))
    return {"location": loc["name"], "currency": loc["currency"], "resources": resources}


# -- cloudspaces, VMs ----------------------------------------------------------
@op("GET", C + "/cloudspaces", "listCloudspaces")
async def list_cloudspaces(ctx):
    cid = ctx.customer()
    include_deleted = q_bool(ctx, "include_deleted")
    rows = ctx.store.q(
        "SELECT * FROM cloudspaces WHERE customer_id=?"
        + ("" if include_deleted else " AND deleted_at IS NULL")
        + " ORDER BY created",
        cid,
    )
    return {
        "locations": [],
        "result": [
            {
                "cloudspace_id": r["cloudspace_id"],
                "name": r["name"],
                "location": r["location"],
                "status": r["status"],
                "private_network": r["private_network"],
                "creation_time": int(r["created"]),
                "update_time": int(r["created"]),
                "external_networks": [],
                "router_type": "vgw",
                "cloudspace_mode": "private",
                "deletion_time": str(int(r["deleted_at"] or 0)),
                "external_network_ip": "",
            }
            for r in rows
        ],
    }


@op("POST", C + "/cloudspaces", "createCloudspace", mutating=True)
async def create_cloudspace(ctx):
    cid = ctx.customer()
    body = ctx.body if isinstance(ctx.body, dict) else {}
    for field in ("name", "location", "firewall"):
        if field not in body:
            raise HTTPError(400, "body field %r is required" % field)
    loc = ctx.emu.location(body["location"])["name"]
    cs_id = "cs-%08x" % random.getrandbits(32)
    ctx.store.x(
        "INSERT INTO cloudspaces VALUES (?, ?, ?, ?, ?, 'DEPLOYED', ?, NULL)",
        cs_id,
        cid,
        body["name"],
        loc,
        body.get("private_network") or "192.168.103.0/24",
        time.time(),
    )
    return {"cloudspace_id": cs_id}


@op("GET", CS, "getCloudspaceInfo")
async def get_cloudspace(ctx):
    cs = ctx.emu.cloudspace(ctx.customer(), ctx.path["cloudspace_id"])
    return {
        "cloudspace_id": cs["cloudspace_id"],
        "name": cs["name"],
        "location": cs["location"],
        "status": cs["status"],
        "private_network": cs["private_network"],
        "creation_time": int(cs["created"]),
        "update_time": int(cs["created"]),
        "router_type": "vgw",
        "cloudspace_mode": "private",
        "external_network_ip": "",
        "external_network_id": "",
        "local_domain": "",
        "resource_limits": {},
    }


@op("DELETE", CS, "deleteCloudspace", mutating=True)
async def delete_cloudspace(ctx):
    cs = ctx.emu.cloudspace(ctx.customer(), ctx.path["cloudspace_id"])
    if ctx.store.one("SELECT 1 FROM vms WHERE cloudspace_id=? AND deleted_at IS NULL", cs["cloudspace_id"]):
        raise HTTPError(409, "cloudspace %r still has virtual machines" % cs["cloudspace_id"])
    ctx.store.x(
        "UPDATE cloudspaces SET deleted_at=?, status='DELETED' WHERE cloudspace_id=?", time.time(), cs["cloudspace_id"]
    )
    return {"success": True}


@op("GET", CS + "/vms", "listCloudspaceVirtualMachines")
async def list_vms(ctx):
    cs = ctx.emu.cloudspace(ctx.customer(), ctx.path["cloudspace_id"])
    include_deleted = q_bool(ctx, "include_deleted")
    rows = ctx.store.q(
        "SELECT * FROM vms WHERE cloudspace_id=?"
        + ("" if include_deleted else " AND deleted_at IS NULL")
        + " ORDER BY vm_id",
        cs["cloudspace_id"],
    )
    result = []
    for v in rows:
        info = ctx.emu.vm_info(v)
        result.append(
            {
                k: info[k]
                for k in (
                    "vm_id",
                    "name",
                    "status",
                    "creation_time",
                    "update_time",
                    "vcpus",
                    "memory",
                    "image_id",
                    "storage",
                    "network_interfaces",
                    "devices",
                )
            }
        )
        result[-1]["cloudspace_id"] = cs["cloudspace_id"]
    return {"result": result}


@op("POST", CS + "/vms", "createVirtualMachine", mutating=True)
async def create_vm(ctx):
    cid = ctx.customer()
    cs = ctx.emu.cloudspace(cid, ctx.path["cloudspace_id"])
    name = q_str(ctx, "name", required=True)
    description = q_str(ctx, "description", required=True)
    vcpus = q_int(ctx, "vcpus", required=True)
    memory = q_int(ctx, "memory", required=True)
    if vcpus < 1 or memory < 128:
        raise HTTPError(400, "vcpus must be >= 1 and memory >= 128 (MiB)")
    if ctx.store.one(
        "SELECT 1 FROM vms WHERE cloudspace_id=? AND name=? AND deleted_at IS NULL", cs["cloudspace_id"], name
    ):
        raise HTTPError(409, "a virtual machine named %r already exists in cloudspace %r" % (name, cs["cloudspace_id"]))
    body = ctx.body if isinstance(ctx.body, dict) else {}
    gpu_id, vgpu_name = body.get("gpu_id") or "", body.get("vgpu_name") or ""
    if gpu_id:
        vgpu_name_from(ctx)
        take_instance(ctx, cs["location"], gpu_id)
    now = time.time()
    cur = ctx.store.x(
        "INSERT INTO vms (cloudspace_id, name, description, vcpus, memory, image_id, disk_size, user_data,"
        " status, created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'RUNNING', ?, ?)",
        cs["cloudspace_id"],
        name,
        description,
        vcpus,
        memory,
        q_int(ctx, "image_id"),
        q_int(ctx, "disk_size"),
        q_str(ctx, "user_data"),
        now,
        now,
    )
    vm_id = cur.lastrowid
    if gpu_id:
        ctx.store.new_vgpu(cid, cs["location"], gpu_id, vgpu_name, vm_id)
    return {"vm_id": vm_id}


@op("GET", VM, "getVirtualMachineInfo")
async def get_vm(ctx):
    return ctx.emu.vm_info(ctx.target_vm()[2])


@op("DELETE", VM, "deleteVirtualMachine", mutating=True)
async def delete_vm(ctx):
    vm_id = ctx.target_vm()[2]["vm_id"]
    detach_gpu = q_bool(ctx, "detach_gpu")
    q_bool(ctx, "permanently")
    async with ctx.emu.vm_lock(vm_id):
        attached = ctx.store.q("SELECT * FROM vgpus WHERE vm_id=? AND deleted_at IS NULL", vm_id)
        if attached and not detach_gpu:
            raise HTTPError(
                409, "virtual machine %s has %d vGPU(s) attached; pass detach_gpu=true" % (vm_id, len(attached))
            )
        for g in attached:
            ctx.store.detach_vgpu(g["vgpu_id"])
        nics = ctx.store.q("SELECT * FROM nics WHERE vm_id=? AND detached_at IS NULL", vm_id)
        ctx.store.x("UPDATE nics SET detached_at=? WHERE vm_id=? AND detached_at IS NULL", time.time(), vm_id)
        ctx.store.x("UPDATE vms SET deleted_at=?, status='DELETED' WHERE vm_id=?", time.time(), vm_id)
    for nic in nics:
        await ctx.emu.run_hook(
            "nic_detach", {"EMU_VM_ID": vm_id, "EMU_MAC": nic["mac_address"], "EMU_IP": nic["ip_address"]}
        )
    return {"success": True}


# -- external networks, NICs ---------------------------------------------------
def net_info(r):
    return {
        "external_network_id": r["external_network_id"],
        "name": r["name"],
        "network": r["network"],
        "gateway": r["gateway"],
        "subnet_mask": r["subnet_mask"],
        "dhcp": bool(r["dhcp"]),
        "public": bool(r["public"]),
    }


@op("GET", LOC + "/external-networks", "listExternalNetworks")
async def list_networks(ctx):
    ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])["name"]
    rows = ctx.store.q("SELECT * FROM external_networks WHERE location=? ORDER BY external_network_id", loc)
    return {"result": [net_info(r) for r in rows]}


@op("GET", LOC + "/external-networks/{external_network_id}", "getExternalNetwork")
async def get_network(ctx):
    ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])["name"]
    row = ctx.store.one(
        "SELECT * FROM external_networks WHERE location=? AND external_network_id=?",
        loc,
        int(ctx.path["external_network_id"]),
    )
    if not row:
        raise HTTPError(404, "external network %s not found" % ctx.path["external_network_id"])
    return net_info(row)


@op("GET", VM + "/external-nics", "listExternalNetworksVirtualMachine")
async def list_nics(ctx):
    _cid, cs, vm = ctx.target_vm()
    rows = ctx.store.q("SELECT * FROM nics WHERE vm_id=? AND detached_at IS NULL ORDER BY nic_id", vm["vm_id"])
    return {"result": [ctx.emu.nic_info(n) for n in rows]}


@op("GET", VM + "/external-nics/{external_ip_address}", "getExternalNetworksVirtualMachine")
async def get_nic(ctx):
    _cid, cs, vm = ctx.target_vm()
    row = ctx.store.one(
        "SELECT * FROM nics WHERE vm_id=? AND ip_address=? AND detached_at IS NULL",
        vm["vm_id"],
        ctx.path["external_ip_address"],
    )
    if not row:
        raise HTTPError(404, "no external NIC with address %s" % ctx.path["external_ip_address"])
    return ctx.emu.nic_info(row)


@op("POST", VM + "/external-nics", "attachExternalNetworksVirtualMachine", mutating=True)
async def attach_nic(ctx):
    _cid, cs, vm = ctx.target_vm()
    net_id = q_int(ctx, "external_network_id", required=True)
    model = q_str(ctx, "model", "virtio", choices=NIC_MODELS)
    q_str(ctx, "external_network_type", "external", choices=("external", "cloudspace"))
    wanted = q_str(ctx, "external_network_ip")
    net = ctx.store.one(
        "SELECT * FROM external_networks WHERE external_network_id=? AND location=?", net_id, cs["location"]
    )
    if not net:
        raise HTTPError(404, "external network %s not found in location %r" % (net_id, cs["location"]))
    if wanted:
        try:
            ipaddress.ip_address(wanted)
        except ValueError:
            raise HTTPError(400, "external_network_ip %r is not an IP address" % wanted) from None
    async with ctx.emu.vm_lock(vm["vm_id"]):
        ip_address = ctx.store.free_ip(net, wanted)
        if not ip_address:
            raise HTTPError(
                409,
                "no free address on external network %s" % net_id
                if not wanted
                else "address %s is not available on external network %s" % (wanted, net_id),
            )
        nic = ctx.store.new_nic(vm["vm_id"], net, ip_address, model)
        prefix = ipaddress.ip_network("0.0.0.0/%s" % net["subnet_mask"]).prefixlen
        await ctx.emu.run_hook(
            "nic_attach",
            {
                "EMU_VM_ID": vm["vm_id"],
                "EMU_VM_NAME": vm["name"],
                "EMU_MAC": nic["mac_address"],
                "EMU_IP": ip_address,
                "EMU_PREFIX": prefix,
                "EMU_NETWORK_ID": net_id,
                "EMU_GATEWAY": net["gateway"],
            },
        )
    return {"success": True}


@op("DELETE", VM + "/external-nics/{external_ip_address}", "detachExternalNetworksVirtualMachine", mutating=True)
async def detach_nic(ctx):
    _cid, cs, vm = ctx.target_vm()
    net_id = q_int(ctx, "external_network_id", required=True)
    q_str(ctx, "external_network_type", required=True, choices=("external", "cloudspace"))
    async with ctx.emu.vm_lock(vm["vm_id"]):
        row = ctx.store.one(
            "SELECT * FROM nics WHERE vm_id=? AND ip_address=? AND network_id=? AND detached_at IS NULL",
            vm["vm_id"],
            ctx.path["external_ip_address"],
            net_id,
        )
        if not row:
            raise HTTPError(
                404, "no external NIC with address %s on network %s" % (ctx.path["external_ip_address"], net_id)
            )
        ctx.store.x("UPDATE nics SET detached_at=? WHERE nic_id=?", time.time(), row["nic_id"])
        await ctx.emu.run_hook(
            "nic_detach", {"EMU_VM_ID": vm["vm_id"], "EMU_MAC": row["mac_address"], "EMU_IP": row["ip_address"]}
        )
    return {"success": True}


# -- the admin API (outside /api/1) --------------------------------------------
def admin_routes(emu):
    async def faults(request):
        if request.method == "GET":
            return JSONResponse(emu.faults.as_dict())
        cfg = {} if request.method == "DELETE" else await request.json()
        try:
            emu.faults.set(cfg)
        except HTTPError as exc:
            return JSONResponse({"message": exc.message}, status_code=exc.status)
        return JSONResponse(emu.faults.as_dict())

    async def stats(request):
        if request.method == "DELETE":
            emu.stats.reset()
        return JSONResponse(emu.stats.as_dict())

    async def ledger(request):
        now = time.time()
        rows = emu.store.q("SELECT * FROM vgpus ORDER BY rowid")
        res = [
            {
                "vgpu_id": r["vgpu_id"],
                "vgpu_name": r["vgpu_name"],
                "customer_id": r["customer_id"],
                "location": r["location"],
                "gpu_id": r["gpu_id"],
                "vm_id": r["vm_id"],
                "reserved_at": r["reserved_at"],
                "soft_deleted_at": r["soft_deleted_at"],
                "deleted_at": r["deleted_at"],
                "vgpu_seconds": emu.store.vgpu_seconds(r),
                "accruing": r["deleted_at"] is None,
                "touched": r["touched"],
                "duplicate": bool(r["duplicate"]),
            }
            for r in rows
        ]
        return JSONResponse(
            {
                "now": now,
                "reservations": res,
                "double_reservations": sum(1 for r in res if r["duplicate"]),
                "accruing": sum(1 for r in res if r["accruing"]),
                "vgpu_seconds": sum(r["vgpu_seconds"] for r in res),
            }
        )

    async def hooks(request):
        if request.method == "POST":
            cfg = await request.json()
            for key in cfg:
                if key not in emu.hooks:
                    return JSONResponse({"message": "unknown hook %r; valid: %s" % (key, sorted(emu.hooks))}, 400)
            emu.hooks.update(cfg)
        return JSONResponse({"hooks": emu.hooks, "log": emu.hook_log[-50:]})

    async def health(request):
        return JSONResponse({"ok": True})

    async def reserve_unowned(request):
        """Seed reservations as another tool would have made them (sweep tests, benchmarks).

        ``{"location", "gpu_id", "vgpu_name"}`` or ``{"location", "gpu_id", "vgpu_names": [...]}``.
        """
        cfg = await request.json()
        cust = cfg.get("customer_id") or emu.store.one("SELECT customer_id FROM customers")[0]
        names = cfg.get("vgpu_names") or [cfg["vgpu_name"]]
        emu.store.x("BEGIN")
        ids = [emu.store.new_vgpu(cust, cfg["location"], cfg["gpu_id"], n, cfg.get("vm_id")) for n in names]
        emu.store.x("COMMIT")
        return JSONResponse({"vgpu_id": ids[0], "vgpu_ids": ids})

    return [
        Route("/faults", faults, methods=["GET", "POST", "DELETE"]),
        Route("/stats", stats, methods=["GET", "DELETE"]),
        Route("/ledger", ledger, methods=["GET"]),
        Route("/hooks", hooks, methods=["GET", "POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/seed-vgpu", reserve_unowned, methods=["POST"]),
    ]


def build_app(emu):
    api = [
        Route(path, make_endpoint(emu, operation_id, mutating, func), methods=[method], name=operation_id)
        for method, path, operation_id, mutating, func in OPS
    ]
    app = Starlette(routes=[Mount(API, routes=api), Mount("/_emulator", routes=admin_routes(emu))])
    app.state.emulator = emu
    return app
