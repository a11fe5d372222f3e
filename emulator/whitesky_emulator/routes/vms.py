"""Virtual machines: list, create (optionally with a vGPU), get, delete."""

from __future__ import annotations

from ..http import Ctx, HTTPError, JsonObject, op
from .gpus import VGPU_NAME, take_instance

#: What a VM listing shows of each VM (``getVirtualMachineInfo`` shows more).
LISTED = (
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


@op("listCloudspaceVirtualMachines")
async def list_vms(ctx: Ctx) -> JsonObject:
    cs = ctx.emu.cloudspace(ctx.customer(), ctx.path_text("cloudspace_id"))
    rows = ctx.store.vms.listing(
        cs.cloudspace_id, include_deleted=ctx.flag("include_deleted"), only_deleted=ctx.flag("only_deleted")
    )
    return {"result": [{k: v for k, v in ctx.emu.vm_info(r, listed=True).items() if k in LISTED} for r in rows]}


@op("createVirtualMachine", mutating=True)
async def create_vm(ctx: Ctx) -> JsonObject:
    cid = ctx.customer()
    cs = ctx.emu.cloudspace(cid, ctx.path_text("cloudspace_id"))
    name, description = ctx.text("name"), ctx.text("description")
    vcpus, memory = ctx.number("vcpus"), ctx.number("memory")
    if not name.strip():
        raise HTTPError(400, "invalid request: name: must not be empty")
    if vcpus < 1 or memory < 128:
        raise HTTPError(400, "invalid request: vcpus must be >= 1 and memory >= 128 (MiB)")
    if ctx.store.vms.named(cs.cloudspace_id, name):
        raise HTTPError(409, "a virtual machine named %r already exists in cloudspace %r" % (name, cs.cloudspace_id))
    image_id = ctx.maybe_number("image_id")
    image = ctx.store.images.get(cs.location, image_id) if image_id is not None else None
    if image_id is not None and image is None:
        raise HTTPError(404, "image %d not found in location %r" % (image_id, cs.location))
    # a boot disk of no given size is the image's (its boot_disk_size: the least a VM of it gets), and bills so
    disk_size = ctx.maybe_number("disk_size") or (image.boot_disk_size if image is not None else None)
    body = ctx.body or {}
    gpu_id, vgpu_name = body.get("gpu_id") or "", body.get("vgpu_name") or ""
    if gpu_id:
        if not VGPU_NAME.match(vgpu_name):
            raise HTTPError(400, "invalid request: body.vgpu_name: 1-64 characters of A-Z a-z 0-9 . _ - with gpu_id")
        take_instance(ctx, cs.location, gpu_id)
    vm_id = ctx.store.vms.create(
        cs.cloudspace_id,
        name,
        description,
        vcpus,
        memory,
        image_id,
        disk_size,
        ctx.maybe_text("user_data"),
    )
    if gpu_id:
        ctx.store.vgpus.reserve(cid, cs.location, gpu_id, vgpu_name, vm_id)
    return {"vm_id": vm_id}


@op("getVirtualMachineInfo")
async def get_vm(ctx: Ctx) -> JsonObject:
    return ctx.emu.vm_info(ctx.target_vm()[2])


#: The most a readFile may ask for (the platform's 2 MiB).
READ_MAX = 2 * 1024 * 1024


@op("readFile")
async def read_file(ctx: Ctx) -> JsonObject:
    """A file of the guest, through its agent: here, what the admin API wrote for the VM (``/_emulator/vm-file``)."""
    vm = ctx.target_vm()[2]
    size, seek, path = ctx.number("size"), ctx.number("seek", 0), ctx.text("filepath")
    if size > READ_MAX:
        raise HTTPError(400, "size: at most %d bytes" % READ_MAX)
    if not path.startswith("/"):
        raise HTTPError(400, "filepath: an absolute path, got %r" % path)
    content = ctx.store.vms.file(vm.vm_id, path)
    if content is None:
        raise HTTPError(404, "file %r not found on virtual machine %s" % (path, vm.vm_id))
    return {"result": content[seek : seek + size]}


@op("deleteVirtualMachine", mutating=True)
async def delete_vm(ctx: Ctx) -> JsonObject:
    vm_id = ctx.target_vm()[2].vm_id
    async with ctx.emu.vm_lock(vm_id):
        attached = ctx.store.vgpus.of_vm(vm_id)
        if attached and not ctx.flag("detach_gpu"):
            raise HTTPError(
                409, "virtual machine %s has %d vGPU(s) attached; pass detach_gpu=true" % (vm_id, len(attached))
            )
        nics = ctx.store.delete_vm(vm_id)
    for nic in nics:
        await ctx.emu.run_hook("nic_detach", {"EMU_VM_ID": vm_id, "EMU_MAC": nic.mac_address, "EMU_IP": nic.ip_address})
    return {"success": True}
