"""External networks and the NICs a VM has on them: list, get, attach (taking an address), detach."""

from __future__ import annotations

import ipaddress

from ..http import HTTPError, found, op


def net_info(r):
    return {
        "external_network_id": r["external_network_id"],
        "name": r["name"],
        "network": r["network"],
        "gateway": r["gateway"],
        "subnet_mask": r["subnet_mask"],
        "dhcp": bool(r["dhcp"]),
        "public": bool(r["public"]),
    }


@op("listExternalNetworks")
async def list_networks(ctx):
    ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])["name"]
    return {"result": [net_info(r) for r in ctx.store.external_networks(loc)]}


@op("getExternalNetwork")
async def get_network(ctx):
    ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])["name"]
    net_id = ctx.path["external_network_id"]
    return net_info(found(ctx.store.external_network(loc, net_id), "external network %s not found" % net_id))


@op("getExternalNetworkAddresses")
async def free_addresses(ctx):
    ctx.customer()
    loc = ctx.emu.location(ctx.path["location"])["name"]
    net_id = ctx.path["external_network_id"]
    net = found(ctx.store.external_network(loc, net_id), "external network %s not found" % net_id)
    return {"ip_addresses": ctx.store.free_ips(net)}


@op("listExternalNetworksVirtualMachine")
async def list_nics(ctx):
    vm = ctx.target_vm()[2]
    return {"result": [ctx.emu.nic_info(n) for n in ctx.store.nics_of_vm(vm["vm_id"])]}


@op("getExternalNetworksVirtualMachine")
async def get_nic(ctx):
    vm = ctx.target_vm()[2]
    ip = ctx.path["external_ip_address"]
    return ctx.emu.nic_info(found(ctx.store.nic_at(vm["vm_id"], ip), "no external NIC with address %s" % ip[:80]))


@op("attachExternalNetworksVirtualMachine", mutating=True)
async def attach_nic(ctx):
    _cid, cs, vm = ctx.target_vm()
    net_id = ctx.args["external_network_id"]
    model = ctx.arg("model", "virtio")
    wanted = ctx.arg("external_network_ip")
    net = found(
        ctx.store.external_network(cs["location"], net_id),
        "external network %s not found in location %r" % (net_id, cs["location"]),
    )
    if wanted:
        try:
            ipaddress.ip_address(wanted)
        except ValueError:
            raise HTTPError(400, "invalid request: external_network_ip %r is not an IP address" % wanted[:80]) from None
    async with ctx.emu.vm_lock(vm["vm_id"]):
        ip_address = ctx.store.free_ip(net, wanted)
        if not ip_address:
            raise HTTPError(
                409,
                "no free address on external network %s" % net_id
                if not wanted
                else "address %s is not available on external network %s" % (wanted, net_id),
            )
        nic = ctx.store.new_nic(vm["vm_id"], net, ip_address, model)
        prefix = ipaddress.ip_network("0.0.0.0/%s" % net["subnet_mask"]).prefixlen
        await ctx.emu.run_hook(
            "nic_attach",
            {
                "EMU_VM_ID": vm["vm_id"],
                "EMU_VM_NAME": vm["name"],
                "EMU_MAC": nic["mac_address"],
                "EMU_IP": ip_address,
                "EMU_PREFIX": prefix,
                "EMU_NETWORK_ID": net_id,
                "EMU_GATEWAY": net["gateway"],
            },
        )
    return {"success": True}


@op("detachExternalNetworksVirtualMachine", mutating=True)
async def detach_nic(ctx):
    vm = ctx.target_vm()[2]
    net_id = ctx.args["external_network_id"]
    ip = ctx.path["external_ip_address"]
    async with ctx.emu.vm_lock(vm["vm_id"]):
        row = found(
            ctx.store.nic_at(vm["vm_id"], ip, net_id),
            "no external NIC with address %s on network %s" % (ip[:80], net_id),
        )
        ctx.store.detach_nic(row["nic_id"])
        await ctx.emu.run_hook(
            "nic_detach", {"EMU_VM_ID": vm["vm_id"], "EMU_MAC": row["mac_address"], "EMU_IP": row["ip_address"]}
        )
    return {"success": True}
