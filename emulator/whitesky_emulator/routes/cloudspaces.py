"""Cloudspaces: list, create, get, delete (to the recycle bin, or permanently)."""

from __future__ import annotations

import random

from ..http import HTTPError, op


def cloudspace_view(r):
    return {
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


@op("listCloudspaces")
async def list_cloudspaces(ctx):
    cid = ctx.customer()
    rows = ctx.store.cloudspaces(
        cid, include_deleted=ctx.arg("include_deleted", False), only_deleted=ctx.arg("only_deleted", False)
    )
    wanted = ctx.arg("locations")
    if wanted:
        rows = [r for r in rows if r["location"] in wanted]
    return {"locations": [], "result": [cloudspace_view(r) for r in rows]}


@op("createCloudspace", mutating=True)
async def create_cloudspace(ctx):
    cid = ctx.customer()
    body = ctx.body
    loc = ctx.emu.location(body["location"])["name"]
    if not body["name"].strip():
        raise HTTPError(400, "invalid request: body.name: must not be empty")
    cs_id = "cs-%08x" % random.getrandbits(32)
    ctx.store.new_cloudspace(cs_id, cid, body["name"], loc, body.get("private_network") or "192.168.103.0/24")
    return {"cloudspace_id": cs_id}


@op("getCloudspaceInfo")
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


@op("deleteCloudspace", mutating=True)
async def delete_cloudspace(ctx):
    cs = ctx.emu.cloudspace(ctx.customer(), ctx.path["cloudspace_id"])
    if ctx.store.has_live_vms(cs["cloudspace_id"]):
        raise HTTPError(409, "cloudspace %r still has virtual machines" % cs["cloudspace_id"])
    ctx.store.delete_cloudspace(cs["cloudspace_id"], permanently=ctx.arg("permanently", False))
    return {"success": True}
