"""Cloudspaces: list, create, get, delete (to the recycle bin, or permanently)."""

from __future__ import annotations

import random

from ..http import Ctx, HTTPError, JsonObject, op
from ..store import Cloudspace
from ..store.cloudspaces import DEFAULT_PRIVATE_NETWORK


def cloudspace_view(r: Cloudspace) -> JsonObject:
    return {
        "cloudspace_id": r.cloudspace_id,
        "name": r.name,
        "location": r.location,
        "status": r.status,
        "private_network": r.private_network,
        "creation_time": int(r.created),
        "update_time": int(r.created),
        "external_networks": [],
        "router_type": "vgw",
        "cloudspace_mode": "private",
        "deletion_time": str(int(r.deleted_at or 0)),
        "external_network_ip": "",
    }


@op("listCloudspaces")
async def list_cloudspaces(ctx: Ctx) -> JsonObject:
    cid = ctx.customer()
    rows = ctx.store.cloudspaces.listing(
        cid, include_deleted=ctx.flag("include_deleted"), only_deleted=ctx.flag("only_deleted")
    )
    wanted = ctx.texts("locations")
    if wanted:
        rows = [r for r in rows if r.location in wanted]
    return {"locations": [], "result": [cloudspace_view(r) for r in rows]}


@op("createCloudspace", mutating=True)
async def create_cloudspace(ctx: Ctx) -> JsonObject:
    cid = ctx.customer()
    body = ctx.body or {}
    loc = ctx.emu.location(body["location"]).name
    if not body["name"].strip():
        raise HTTPError(400, "invalid request: body.name: must not be empty")
    cs_id = "cs-%08x" % random.getrandbits(32)
    ctx.store.cloudspaces.create(cs_id, cid, body["name"], loc, body.get("private_network") or DEFAULT_PRIVATE_NETWORK)
    return {"cloudspace_id": cs_id}


@op("getCloudspaceInfo")
async def get_cloudspace(ctx: Ctx) -> JsonObject:
    cs = ctx.emu.cloudspace(ctx.customer(), ctx.path_text("cloudspace_id"))
    return {
        "cloudspace_id": cs.cloudspace_id,
        "name": cs.name,
        "location": cs.location,
        "status": cs.status,
        "private_network": cs.private_network,
        "creation_time": int(cs.created),
        "update_time": int(cs.created),
        "router_type": "vgw",
        "cloudspace_mode": "private",
        "external_network_ip": "",
        "external_network_id": "",
        "local_domain": "",
        "resource_limits": {},
    }


@op("deleteCloudspace", mutating=True)
async def delete_cloudspace(ctx: Ctx) -> JsonObject:
    cs = ctx.emu.cloudspace(ctx.customer(), ctx.path_text("cloudspace_id"))
    if ctx.store.vms.any_live(cs.cloudspace_id):
        raise HTTPError(409, "cloudspace %r still has virtual machines" % cs.cloudspace_id)
    ctx.store.cloudspaces.delete(cs.cloudspace_id, permanently=ctx.flag("permanently"))
    return {"success": True}
