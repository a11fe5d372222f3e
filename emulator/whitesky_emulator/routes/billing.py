"""Locations' prices and the consumption report (vGPUs bill per reserved second until permanently deleted)."""

from __future__ import annotations

import json
from collections import defaultdict

from ..http import HTTPError, op
from ..store import VGU_SECONDS

#: Every price key of the platform's resource pricing.
PRICE_KEYS = ("su", "ou", "mu", "vcu", "tu", "wu", "nu", "piu", "vgu", "fsu")


def resources(loc):
    prices = dict.fromkeys(PRICE_KEYS, 0.0)
    prices.update(json.loads(loc["prices"]))
    return prices


@op("listCustomerLocations")
async def list_locations(ctx):
    ctx.customer()
    rows = ctx.store.locations()
    currency = rows[0]["currency"] if rows else "EUR"
    return {"currency": currency, "locations": [{"location": r["name"], "resources": resources(r)} for r in rows]}


@op("getCustomerLocationPricing")
async def prices(ctx):
    ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])
    return {"location": loc["name"], "currency": loc["currency"], "resources": resources(loc)}


@op("getCustomerConsumption")
async def consumption(ctx):
    cid = ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])["name"]
    start, end = ctx.args["start"], ctx.args["end"]
    if end < start:
        raise HTTPError(400, "end must not be before start")
    per_vm = defaultdict(float)
    unassigned = []
    total = 0.0
    attachments = ctx.store.attached_seconds(cid, loc, start, end)
    for row in ctx.store.vgpus_in(cid, loc):
        billed = ctx.store.vgpu_seconds(row, start, end)
        if billed <= 0:
            continue
        total += billed
        attached = attachments.get(row["vgpu_id"], {})
        for vm_id, secs in attached.items():
            per_vm[vm_id] += secs
        rest = billed - sum(attached.values())
        if rest > 1e-9:
            unassigned.append({"vgpu_id": row["vgpu_id"], "consumption": {"vgu": rest / VGU_SECONDS}})
    spaces = []
    for cs in ctx.store.cloudspaces(cid, location=loc, every=True):
        vms = [
            {"vm_id": v["vm_id"], "name": v["name"], "consumption": {"vgu": per_vm.get(v["vm_id"], 0.0) / VGU_SECONDS}}
            for v in ctx.store.vms(cs["cloudspace_id"], include_deleted=True)
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
