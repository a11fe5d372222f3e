"""The admin API, outside ``/api/1``: what tests need (faults, statistics, the billing ledger, the NIC hook)."""

from __future__ import annotations

import time

from starlette.responses import JSONResponse
from starlette.routing import Route

from .http import HTTPError


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
        rows = emu.store.all_vgpus()
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

    async def snapshot(request):
        """Every cloudspace, VM, reservation and note as stored, for tests that compare the state before and after."""
        cols = {
            "cloudspaces": "cloudspace_id, name, location, status, deleted_at",
            "vms": "vm_id, cloudspace_id, name, description, vcpus, memory, status, deleted_at",
            "vgpus": "vgpu_id, vgpu_name, location, gpu_id, vm_id, soft_deleted_at, deleted_at",
            "notes": "note_id, cloudspace_id, title, content, created_by, modified_by",
        }
        return JSONResponse(
            {table: [dict(r) for r in emu.store.q("SELECT %s FROM %s" % (c, table))] for table, c in cols.items()}
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
        cust = cfg.get("customer_id") or emu.store.first_customer()
        names = cfg.get("vgpu_names") or [cfg["vgpu_name"]]
        emu.store.x("BEGIN")
        ids = [emu.store.new_vgpu(cust, cfg["location"], cfg["gpu_id"], n, cfg.get("vm_id")) for n in names]
        emu.store.x("COMMIT")
        return JSONResponse({"vgpu_id": ids[0], "vgpu_ids": ids})

    async def vm_file(request):
        """Write a file on a VM, as its guest would (``{"vm_id", "path", "content"}``): what readFile serves."""
        cfg = await request.json()
        if emu.store.one("SELECT vm_id FROM vms WHERE vm_id=? AND deleted_at IS NULL", cfg.get("vm_id")) is None:
            return JSONResponse({"message": "no VM %r" % cfg.get("vm_id")}, 404)
        emu.store.write_vm_file(cfg["vm_id"], cfg["path"], cfg["content"])
        return JSONResponse({"ok": True})

    return [
        Route("/faults", faults, methods=["GET", "POST", "DELETE"]),
        Route("/vm-file", vm_file, methods=["POST"]),
        Route("/stats", stats, methods=["GET", "DELETE"]),
        Route("/ledger", ledger, methods=["GET"]),
        Route("/snapshot", snapshot, methods=["GET"]),
        Route("/hooks", hooks, methods=["GET", "POST"]),
        Route("/health", health, methods=["GET"]),
        Route("/seed-vgpu", reserve_unowned, methods=["POST"]),
    ]
