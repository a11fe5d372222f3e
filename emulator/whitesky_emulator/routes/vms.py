"""Virtual machines: list, create (optionally with a vGPU), get, delete."""

from __future__ import annotations

from ..http import HTTPError, op
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
async def list_vms(ctx):
    cs = ctx.emu.cloudspace(ctx.customer(), ctx.path["cloudspace_id"])
    rows = ctx.store.vms(
        cs["cloudspace_id"],
        include_deleted=ctx.arg("include_deleted", False),
        only_deleted=ctx.arg("only_deleted", False),
    )
    return {"result": [{k: v for k, v in ctx.emu.vm_info(r, listed=True).items() if k in LISTED} for r in rows]}


@op("createVirtualMachine", mutating=True)
async def create_vm(ctx):
    cid = ctx.customer()
    cs = ctx.emu.cloudspace(cid, ctx.path["cloudspace_id"])
    name, description = ctx.args["name"], ctx.args["description"]
    vcpus, memory = ctx.args["vcpus"], ctx.args["memory"]
    if not name.strip():
        raise HTTPError(400, "invalid request: name: must not be empty")
    if vcpus < 1 or memory < 128:
        raise HTTPError(400, "invalid request: vcpus must be >= 1 and memory >= 128 (MiB)")
    if ctx.store.vm_named(cs["cloudspace_id"], name):
        raise HTTPError(409, "a virtual machine named %r already exists in cloudspace %r" % (name, cs["cloudspace_id"]))
    body = ctx.body or {}
    gpu_id, vgpu_name = body.get("gpu_id") or "", body.get("vgpu_name") or ""
    if gpu_id:
        if not VGPU_NAME.match(vgpu_name):
            raise HTTPError(400, "invalid request: body.vgpu_name: 1-64 characters of A-Z a-z 0-9 . _ - with gpu_id")
        take_instance(ctx, cs["location"], gpu_id)
    vm_id = ctx.store.new_vm(
        cs["cloudspace_id"],
        name,
        description,
        vcpus,
        memory,
        ctx.arg("image_id"),
        ctx.arg("disk_size"),
        ctx.arg("user_data"),
    )
    if gpu_id:
        ctx.store.new_vgpu(cid, cs["location"], gpu_id, vgpu_name, vm_id)
    return {"vm_id": vm_id}


@op("getVirtualMachineInfo")
async def get_vm(ctx):
    return ctx.emu.vm_info(ctx.target_vm()[2])


#: The most a readFile may ask for (the platform's 2 MiB).
READ_MAX = 2 * 1024 * 1024


@op("readFile")
async def read_file(ctx):
    """A file of the guest, through its agent: here, what the admin API wrote for the VM (``/_emulator/vm-file``)."""
    vm = ctx.target_vm()[2]
    size, seek, path = ctx.args["size"], ctx.arg("seek", 0), ctx.args["filepath"]
    if size > READ_MAX:
        raise HTTPError(400, "size: at most %d bytes" % READ_MAX)
    if not path.startswith("/"):
        raise HTTPError(400, "filepath: an absolute path, got %r" % path)
    content = ctx.store.vm_file(vm["vm_id"], path)
    if content is None:
        raise HTTPError(404, "file %r not found on virtual machine %s" % (path, vm["vm_id"]))
    return {"result": content[seek : seek + size]}


@op("deleteVirtualMachine", mutating=True)
async def delete_vm(ctx):
    vm_id = ctx.target_vm()[2]["vm_id"]
    async with ctx.emu.vm_lock(vm_id):
        attached = ctx.store.vgpus_of_vm(vm_id)
        if attached and not ctx.arg("detach_gpu", False):
            raise HTTPError(
                409, "virtual machine %s has %d vGPU(s) attached; pass detach_gpu=true" % (vm_id, len(attached))
            )
        nics = ctx.store.delete_vm(vm_id)
    for nic in nics:
        await ctx.emu.run_hook(
            "nic_detach", {"EMU_VM_ID": vm_id, "EMU_MAC": nic["mac_address"], "EMU_IP": nic["ip_address"]}
        )
    return {"success": True}
