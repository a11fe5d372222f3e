"""Locations' prices and the consumption report (vGPUs bill per reserved second until permanently deleted; the
sums are ``metering``'s)."""

from __future__ import annotations

import time
from typing import Any

from .. import metering
from ..http import Ctx, HTTPError, JsonObject, op
from ..store import Location


def resources(loc: Location) -> dict[str, Any]:
    """The location's price list as it holds it: a unit it has no price for is absent from the answer (never
    filled in as 0.0, which would read as free), and an odd value a test wrote in is answered as it is.  The default
    world holds every unit of the spec's ``ResourcePricesStruct``."""
    return loc.price_list()


@op("listCustomerLocations")
async def list_locations(ctx: Ctx) -> JsonObject:
    ctx.customer()
    rows = ctx.store.accounts.locations()
    currency = rows[0].currency if rows else "EUR"
    return {"currency": currency, "locations": [{"location": r.name, "resources": resources(r)} for r in rows]}


@op("getCustomerLocationPricing")
async def prices(ctx: Ctx) -> JsonObject:
    ctx.customer()
    loc = ctx.emu.location(ctx.path_text("location"))
    return {"location": loc.name, "currency": loc.currency, "resources": resources(loc)}


@op("getCustomerConsumption")
async def consumption(ctx: Ctx) -> JsonObject:
    cid = ctx.customer()
    loc = ctx.emu.location(ctx.path_text("location")).name
    start, end = ctx.number("start"), ctx.number("end")
    if end < start:
        raise HTTPError(400, "end must not be before start")
    report = metering.consumption(
        ctx.store.billing.reservations(cid, loc), ctx.store.billing.attachments(cid, loc), start, end, time.time()
    )
    spaces = []
    for cs in ctx.store.cloudspaces.listing(cid, location=loc, every=True):
        machines = ctx.store.vms.listing(cs.cloudspace_id, include_deleted=True)
        units = [report.vm_units(v.vm_id) for v in machines]
        vms = [
            {"vm_id": v.vm_id, "name": v.name, "consumption": {"vgu": u}} for v, u in zip(machines, units, strict=True)
        ]
        spaces.append(
            {
                "cloudspace_id": cs.cloudspace_id,
                "name": cs.name,
                "mode": "private",
                "consumption": {"vgu": sum(units)},
                "vms": vms,
            }
        )
    return {
        "name": cid,
        "cloudspaces": spaces,
        "objectspaces": [],
        "unassigned_disks": [],
        "unassigned_vgpus": [
            {"vgpu_id": vgpu_id, "consumption": {"vgu": seconds / metering.VGU_SECONDS}}
            for vgpu_id, seconds in report.unassigned
        ],
        "consumption": {"vgu": report.seconds / metering.VGU_SECONDS},
    }
