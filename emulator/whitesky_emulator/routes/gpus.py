"""GPU profiles and vGPU reservations: reserve (alone or with attach), list, attach, detach, delete, restore."""

from __future__ import annotations

import re

from ..http import Ctx, HTTPError, JsonObject, op
from ..state import ListingLookups
from ..store import GpuProfile

#: The largest page served when ``limit`` asks for more (an assumption; 0 asks for no limit).
MAX_PAGE = 500
#: vgpu_name rules (an assumption; the spec states none): 1-64 of these characters.
VGPU_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@op("listAvailableGPUProfiles")
async def list_gpus(ctx: Ctx) -> JsonObject:
    ctx.customer()
    loc = ctx.emu.location(ctx.path_text("location")).name
    return {
        "result": [
            {
                "id": r.id,
                "vendor": r.vendor,
                "model": r.model,
                "description": r.description,
                "available_instances": r.available_instances,
            }
            for r in ctx.store.profiles.listing(loc)
        ]
    }


def vgpu_name_from(ctx: Ctx) -> str:
    name = (ctx.body or {})["vgpu_name"]
    if not VGPU_NAME.match(name):
        raise HTTPError(
            400,
            "invalid vgpu_name %r: 1-64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit"
            % (name[:80],),
        )
    return str(name)


def take_instance(ctx: Ctx, location: str, gpu_id: str) -> GpuProfile:
    prof = ctx.emu.profile(location, gpu_id)
    if prof.available_instances <= 0:
        raise HTTPError(409, "no available instances of GPU profile %r" % gpu_id)
    return prof


@op("reserveVGPU", mutating=True)
async def reserve_vgpu(ctx: Ctx) -> JsonObject:
    cid = ctx.customer()
    loc = ctx.emu.location(ctx.path_text("location")).name
    name = vgpu_name_from(ctx)
    gpu_id = ctx.path_text("gpu_id")
    take_instance(ctx, loc, gpu_id)
    return {"vgpu_id": ctx.store.vgpus.reserve(cid, loc, gpu_id, name)}


@op("listCustomerVGPUS")
async def list_vgpus(ctx: Ctx) -> JsonObject:
    cid = ctx.customer()
    loc = ctx.emu.location(ctx.path_text("location")).name
    asked = ctx.number("limit", 25)
    limit = None if asked == 0 else min(asked, MAX_PAGE)  # the spec: 0 means no limit
    cap = ctx.emu.faults.page_cap
    if cap:  # a platform that pages smaller than asked
        limit = cap if limit is None else min(limit, cap)
    start = ctx.number("start_after", 0)
    only_deleted, include_deleted = ctx.flag("only_deleted"), ctx.flag("include_deleted")
    count = ctx.store.vgpus.count(cid, loc, only_deleted=only_deleted, include_deleted=include_deleted)
    rows = (
        ctx.store.vgpus.page(cid, loc, limit, start, only_deleted=only_deleted, include_deleted=include_deleted)
        if start < count
        else []
    )
    pagination = {"limit": limit or 0, "pages": (count + limit - 1) // limit if limit else 1, "count": count}
    if ctx.emu.faults.no_count:
        del pagination["count"]
    lookups = ListingLookups(ctx.store)
    return {"pagination": pagination, "data": [ctx.emu.vgpu_info(r, lookups) for r in rows]}


@op("restoreVGPU", mutating=True)
async def restore_vgpu(ctx: Ctx) -> JsonObject:
    cid = ctx.customer()
    row = ctx.emu.vgpu(cid, ctx.path_text("vgpu_id"), ctx.path_text("location"), deleted=True)
    if row.soft_deleted_at is None:
        raise HTTPError(409, "vgpu %r is not deleted" % row.vgpu_id)
    ctx.store.vgpus.restore(row)
    return {"success": True}


@op("deleteVGPU", mutating=True)
async def delete_vgpu(ctx: Ctx) -> JsonObject:
    cid = ctx.customer()
    vgpu_id, location = ctx.path_text("vgpu_id"), ctx.path_text("location")
    row = ctx.emu.vgpu(cid, vgpu_id, location, deleted=True)
    detach = ctx.flag("detach", True)
    permanently = ctx.flag("permanently")
    if row.soft_deleted_at is not None and not permanently:
        raise HTTPError(404, "vgpu %r is already deleted" % row.vgpu_id)
    if row.vm_id is not None:
        if not detach:
            raise HTTPError(
                409,
                "vgpu %r is attached to VM %s; detach it first or pass detach=true" % (row.vgpu_id, row.vm_id),
            )
        async with ctx.emu.vm_lock(row.vm_id):
            row = ctx.emu.vgpu(cid, vgpu_id, location, deleted=True)
            if row.vm_id is not None:
                ctx.store.vgpus.detach(row.vgpu_id)
            ctx.store.vgpus.delete(row, permanently)
    else:
        ctx.store.vgpus.delete(row, permanently)
    return {"success": True}


@op("reserveAndAttachVGPUToVM", mutating=True)
async def reserve_attach(ctx: Ctx) -> JsonObject:
    cid, cs, vm = ctx.target_vm()
    vm_id = vm.vm_id
    name = vgpu_name_from(ctx)
    gpu_id = ctx.path_text("gpu_id")
    async with ctx.emu.vm_lock(vm_id):
        ctx.emu.vm(cs.cloudspace_id, vm_id)
        take_instance(ctx, cs.location, gpu_id)
        return {"vgpu_id": ctx.store.vgpus.reserve(cid, cs.location, gpu_id, name, vm_id)}


@op("attachVGPUToVM", mutating=True)
async def attach_vgpu(ctx: Ctx) -> JsonObject:
    cid, cs, vm = ctx.target_vm()
    vm_id = vm.vm_id
    row = ctx.emu.vgpu(cid, ctx.path_text("vgpu_id"), cs.location)
    if row.vm_id is not None:
        raise HTTPError(409, "vgpu %r is already attached to VM %s" % (row.vgpu_id, row.vm_id))
    async with ctx.emu.vm_lock(vm_id):
        ctx.store.vgpus.attach(row.vgpu_id, vm_id)
    return {"success": True}


@op("detachVGPUFromVM", mutating=True)
async def detach_vgpu(ctx: Ctx) -> JsonObject:
    cid, cs, vm = ctx.target_vm()
    vm_id = vm.vm_id
    row = ctx.emu.vgpu(cid, ctx.path_text("vgpu_id"), cs.location)
    if row.vm_id != vm_id:
        raise HTTPError(409, "vgpu %r is not attached to VM %s" % (row.vgpu_id, vm_id))
    async with ctx.emu.vm_lock(vm_id):
        ctx.store.vgpus.detach(row.vgpu_id)
    return {"success": True}
