"""The admin API, outside ``/api/1``: what tests need (faults, statistics, the billing ledger, the NIC hook)."""

from __future__ import annotations

import time

from starlette.responses import JSONResponse
from starlette.routing import Route

from .http import HTTPError


class Admin:
    """The admin handlers of one emulator (``emu``): each a small method."""

    def __init__(self, emu):
        self.emu = emu

    async def faults(self, request):
        if request.method == "GET":
            return JSONResponse(self.emu.faults.as_dict())
        cfg = {} if request.method == "DELETE" else await request.json()
        try:
            self.emu.faults.set(cfg)
        except HTTPError as exc:
            return JSONResponse({"message": exc.message}, status_code=exc.status)
        return JSONResponse(self.emu.faults.as_dict())

    async def stats(self, request):
        if request.method == "DELETE":
            self.emu.stats.reset()
        return JSONResponse(self.emu.stats.as_dict())

    async def ledger(self, request):
        now = time.time()
        rows = self.emu.store.all_vgpus()
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
                "vgpu_seconds": self.emu.store.vgpu_seconds(r),
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

    async def snapshot(self, request):
        """Every cloudspace, VM, reservation and note as stored, for tests that compare the state before and after."""
        cols = {
            "cloudspaces": "cloudspace_id, name, location, status, deleted_at",
            "vms": "vm_id, cloudspace_id, name, description, vcpus, memory, status, deleted_at",
            "vgpus": "vgpu_id, vgpu_name, location, gpu_id, vm_id, soft_deleted_at, deleted_at",
            "notes": "note_id, cloudspace_id, title, content, created_by, modified_by",
        }
        return JSONResponse(
            {table: [dict(r) for r in self.emu.store.q("SELECT %s FROM %s" % (c, table))] for table, c in cols.items()}
        )

    async def hooks(self, request):
        if request.method == "POST":
            cfg = await request.json()
            for key in cfg:
                if key not in self.emu.hooks:
                    return JSONResponse({"message": "unknown hook %r; valid: %s" % (key, sorted(self.emu.hooks))}, 400)
            self.emu.hooks.update(cfg)
        return JSONResponse({"hooks": self.emu.hooks, "log": self.emu.hook_log[-50:]})

    async def health(self, request):
        return JSONResponse({"ok": True})

    async def reserve_unowned(self, request):
        """Seed reservations as another tool would have made them (sweep tests, benchmarks).

        ``{"location", "gpu_id", "vgpu_name"}`` or ``{"location", "gpu_id", "vgpu_names": [...]}``.
        """
        cfg = await request.json()
        cust = cfg.get("customer_id") or self.emu.store.first_customer()
        names = cfg.get("vgpu_names") or [cfg["vgpu_name"]]
        self.emu.store.x("BEGIN")
        ids = [self.emu.store.new_vgpu(cust, cfg["location"], cfg["gpu_id"], n, cfg.get("vm_id")) for n in names]
        self.emu.store.x("COMMIT")
        return JSONResponse({"vgpu_id": ids[0], "vgpu_ids": ids})

    async def vm_file(self, request):
        """Write a file on a VM, as its guest would (``{"vm_id", "path", "content"}``): what readFile serves."""
        cfg = await request.json()
        if self.emu.store.one("SELECT vm_id FROM vms WHERE vm_id=? AND deleted_at IS NULL", cfg.get("vm_id")) is None:
            return JSONResponse({"message": "no VM %r" % cfg.get("vm_id")}, 404)
        self.emu.store.write_vm_file(cfg["vm_id"], cfg["path"], cfg["content"])
        return JSONResponse({"ok": True})


def admin_routes(emu):
    admin = Admin(emu)
    return [
        Route("/faults", admin.faults, methods=["GET", "POST", "DELETE"]),
        Route("/vm-file", admin.vm_file, methods=["POST"]),
        Route("/stats", admin.stats, methods=["GET", "DELETE"]),
        Route("/ledger", admin.ledger, methods=["GET"]),
        Route("/snapshot", admin.snapshot, methods=["GET"]),
        Route("/hooks", admin.hooks, methods=["GET", "POST"]),
        Route("/health", admin.health, methods=["GET"]),
        Route("/seed-vgpu", admin.reserve_unowned, methods=["POST"]),
    ]
