"""The admin API, outside ``/api/1``: what tests need (faults, statistics, the billing ledger, the NIC hook, the
credentials)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from . import metering
from .http import HTTPError

if TYPE_CHECKING:
    from .state import Emulator


class Admin:
    """The admin handlers of one emulator (``emu``): each a small method."""

    def __init__(self, emu: Emulator) -> None:
        self.emu = emu

    async def faults(self, request: Request) -> JSONResponse:
        if request.method == "GET":
            return JSONResponse(self.emu.faults.as_dict())
        cfg = {} if request.method == "DELETE" else await request.json()
        try:
            self.emu.faults.set(cfg)
        except HTTPError as exc:
            return JSONResponse({"message": exc.message}, status_code=exc.status)
        return JSONResponse(self.emu.faults.as_dict())

    async def stats(self, request: Request) -> JSONResponse:
        if request.method == "DELETE":
            self.emu.stats.reset()
        return JSONResponse(self.emu.stats.as_dict())

    async def ledger(self, request: Request) -> JSONResponse:
        now = time.time()
        res: list[dict[str, Any]] = [
            {
                "vgpu_id": r.vgpu_id,
                "vgpu_name": r.vgpu_name,
                "customer_id": r.customer_id,
                "location": r.location,
                "gpu_id": r.gpu_id,
                "vm_id": r.vm_id,
                "reserved_at": r.reserved_at,
                "soft_deleted_at": r.soft_deleted_at,
                "deleted_at": r.deleted_at,
                "vgpu_seconds": metering.reserved_seconds(r, now),
                "accruing": r.deleted_at is None,
                "touched": r.touched,
                "duplicate": bool(r.duplicate),
            }
            for r in self.emu.store.billing.ledger()
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

    async def snapshot(self, request: Request) -> JSONResponse:
        """Every cloudspace, VM, reservation and note as stored, for tests that compare the state before and after."""
        return JSONResponse(self.emu.store.snapshot())

    async def hooks(self, request: Request) -> JSONResponse:
        if request.method == "POST":
            cfg = await request.json()
            for key in cfg:
                if key not in self.emu.hooks:
                    return JSONResponse({"message": "unknown hook %r; valid: %s" % (key, sorted(self.emu.hooks))}, 400)
            self.emu.hooks.update(cfg)
        return JSONResponse({"hooks": self.emu.hooks, "log": self.emu.hook_log[-50:]})

    async def credentials(self, request: Request) -> JSONResponse:
        """The accepted credentials (GET: digests only), one granted (POST ``{"token", "customers"}``, customers
        None or absent: all), one rotated (POST ``{"rotate": OLD, "token": NEW}``: NEW for OLD's customers, OLD
        refused from then on) or one revoked (DELETE ``{"token"}``)."""
        creds = self.emu.store.credentials
        if request.method != "GET":
            cfg = await request.json()
            token = cfg.get("token") if isinstance(cfg, dict) else None
            if not isinstance(token, str) or not token:
                return JSONResponse({"message": "a non-empty string 'token' is required"}, 400)
            if request.method == "DELETE":
                creds.revoke(token)
            elif "rotate" in cfg:
                old = cfg["rotate"]
                known = creds.get(old) if isinstance(old, str) else None
                if known is None and old != self.emu.token:
                    return JSONResponse({"message": "'rotate' names no credential this emulator accepts"}, 404)
                customers = None if known is None or known.customers is None else sorted(known.customers)
                creds.grant(token, customers)
                creds.revoke(old)
            else:
                customers = cfg.get("customers")
                if customers is not None and not (
                    isinstance(customers, list) and all(isinstance(c, str) for c in customers)
                ):
                    return JSONResponse({"message": "'customers' is a list of customer ids, or null for all"}, 400)
                creds.grant(token, customers)
        return JSONResponse({"credentials": [c.view() for c in creds.all()]})

    async def health(self, request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    async def reserve_unowned(self, request: Request) -> JSONResponse:
        """Seed reservations as another tool would have made them (sweep tests, benchmarks).

        ``{"location", "gpu_id", "vgpu_name"}`` or ``{"location", "gpu_id", "vgpu_names": [...]}``.
        """
        cfg = await request.json()
        cust = cfg.get("customer_id") or self.emu.store.accounts.first_customer()
        names = cfg.get("vgpu_names") or [cfg["vgpu_name"]]
        ids = self.emu.store.reserve_many(cust, cfg["location"], cfg["gpu_id"], names, cfg.get("vm_id"))
        return JSONResponse({"vgpu_id": ids[0], "vgpu_ids": ids})

    async def vm_file(self, request: Request) -> JSONResponse:
        """Write a file on a VM, as its guest would (``{"vm_id", "path", "content"}``): what readFile serves."""
        cfg = await request.json()
        if self.emu.store.vms.live(cfg.get("vm_id")) is None:
            return JSONResponse({"message": "no VM %r" % cfg.get("vm_id")}, 404)
        self.emu.store.vms.write_file(cfg["vm_id"], cfg["path"], cfg["content"])
        return JSONResponse({"ok": True})


def admin_routes(emu: Emulator) -> list[Route]:
    admin = Admin(emu)
    return [
        Route("/faults", admin.faults, methods=["GET", "POST", "DELETE"]),
        Route("/vm-file", admin.vm_file, methods=["POST"]),
        Route("/stats", admin.stats, methods=["GET", "DELETE"]),
        Route("/ledger", admin.ledger, methods=["GET"]),
        Route("/snapshot", admin.snapshot, methods=["GET"]),
        Route("/hooks", admin.hooks, methods=["GET", "POST"]),
        Route("/health", admin.health, methods=["GET"]),
        Route("/credentials", admin.credentials, methods=["GET", "POST", "DELETE"]),
        Route("/seed-vgpu", admin.reserve_unowned, methods=["POST"]),
    ]
