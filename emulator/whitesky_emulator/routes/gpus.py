"""GPU profiles and vGPU reservations: reserve (alone or with attach), list, attach, detach, delete, restore."""

from __future__ import annotations

import re

from ..http import HTTPError, op

#: The largest page served when ``limit`` asks for more (an assumption; 0 asks for no limit).
MAX_PAGE = 500
#: vgpu_name rules (an assumption; the spec states none): 1-64 of these characters.
VGPU_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@op("listAvailableGPUProfiles")
async def list_gpus(ctx):
    ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])["name"]
    return {
        "result": [
            {
                "id": r["id"],
                "vendor": r["vendor"],
                "model": r["model"],
                "description": r["description"],
                "available_instances": r["available_instances"],
            }
            for r in ctx.store.profiles(loc)
        ]
    }


def vgpu_name_from(ctx):
    name = ctx.body["vgpu_name"]
    if not VGPU_NAME.match(name):
        raise HTTPError(
            400,
            "invalid vgpu_name %r: 1-64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit"
            % (name[:80],),
        )
    return name


def take_instance(ctx, location, gpu_id):
    prof = ctx.emu.profile(location, gpu_id)
    if prof["available_instances"] <= 0:
        raise HTTPError(409, "no available instances of GPU profile %r" % gpu_id)
    return prof


@op("reserveVGPU", mutating=True)
async def reserve_vgpu(ctx):
    cid = ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])["name"]
    name = vgpu_name_from(ctx)
    take_instance(ctx, loc, ctx.path["gpu_id"])
    return {"vgpu_id": ctx.store.new_vgpu(cid, loc, ctx.path["gpu_id"], name)}


@op("listCustomerVGPUS")
async def list_vgpus(ctx):
    cid = ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])["name"]
    asked = ctx.arg("limit", 25)
    limit = None if asked == 0 else min(asked, MAX_PAGE)  # the spec: 0 means no limit
    if ctx.emu.faults.page_cap:  # a platform that pages smaller than asked
        limit = ctx.emu.faults.page_cap if limit is None else min(limit, ctx.emu.faults.page_cap)
    start = ctx.arg("start_after", 0)
    flags = {"only_deleted": ctx.arg("only_deleted", False), "include_deleted": ctx.arg("include_deleted", False)}
    count = ctx.store.count_vgpus(cid, loc, **flags)
    rows = ctx.store.page_vgpus(cid, loc, limit, start, **flags) if start < count else []
    pagination = {"limit": limit or 0, "pages": (count + limit - 1) // limit if limit else 1, "count": count}
    if ctx.emu.faults.no_count:
        del pagination["count"]
    cache = {}
    return {"pagination": pagination, "data": [ctx.emu.vgpu_info(r, cache) for r in rows]}


@op("restoreVGPU", mutating=True)
async def restore_vgpu(ctx):
    cid = ctx.customer()
    row = ctx.emu.vgpu(cid, ctx.path["vgpu_id"], ctx.path["location"], deleted=True)
    if row["soft_deleted_at"] is None:
        raise HTTPError(409, "vgpu %r is not deleted" % row["vgpu_id"])
    ctx.store.restore_vgpu(row["vgpu_id"])
    return {"success": True}


@op("deleteVGPU", mutating=True)
async def delete_vgpu(ctx):
    cid = ctx.customer()
    row = ctx.emu.vgpu(cid, ctx.path["vgpu_id"], ctx.path["location"], deleted=True)
    detach = ctx.arg("detach", True)
    permanently = ctx.arg("permanently", False)
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


@op("reserveAndAttachVGPUToVM", mutating=True)
async def reserve_attach(ctx):
    cid, cs, vm = ctx.target_vm()
    vm_id = vm["vm_id"]
    name = vgpu_name_from(ctx)
    async with ctx.emu.vm_lock(vm_id):
        ctx.emu.vm(cs["cloudspace_id"], vm_id)
        take_instance(ctx, cs["location"], ctx.path["gpu_id"])
        return {"vgpu_id": ctx.store.new_vgpu(cid, cs["location"], ctx.path["gpu_id"], name, vm_id)}


@op("attachVGPUToVM", mutating=True)
async def attach_vgpu(ctx):
    cid, cs, vm = ctx.target_vm()
    vm_id = vm["vm_id"]
    row = ctx.emu.vgpu(cid, ctx.path["vgpu_id"], cs["location"])
    if row["vm_id"] is not None:
        raise HTTPError(409, "vgpu %r is already attached to VM %s" % (row["vgpu_id"], row["vm_id"]))
    async with ctx.emu.vm_lock(vm_id):
        ctx.store.attach_vgpu(row["vgpu_id"], vm_id)
    return {"success": True}


@op("detachVGPUFromVM", mutating=True)
async def detach_vgpu(ctx):
    cid, cs, vm = ctx.target_vm()
    vm_id = vm["vm_id"]
    row = ctx.emu.vgpu(cid, ctx.path["vgpu_id"], cs["location"])
    if row["vm_id"] != vm_id:
        raise HTTPError(409, "vgpu %r is not attached to VM %s" % (row["vgpu_id"], vm_id))
    async with ctx.emu.vm_lock(vm_id):
        ctx.store.detach_vgpu(row["vgpu_id"])
    return {"success": True}
