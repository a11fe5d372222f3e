"""External networks and the NICs a VM has on them: list, get, attach (taking an address), detach."""

from __future__ import annotations

import ipaddress

from .. import addressing
from ..http import Ctx, HTTPError, JsonObject, found, op
from ..store import ExternalNetwork


def net_info(r: ExternalNetwork) -> JsonObject:
    return {
        "external_network_id": r.external_network_id,
        "name": r.name,
        "network": r.network,
        "gateway": r.gateway,
        "subnet_mask": r.subnet_mask,
        "dhcp": bool(r.dhcp),
        "public": bool(r.public),
    }


def path_network(ctx: Ctx) -> ExternalNetwork:
    """The external network a location's path names; 404 for one that does not exist."""
    ctx.customer()
    loc = ctx.emu.location(ctx.path_text("location")).name
    net_id = ctx.path_number("external_network_id")
    return found(ctx.store.networks.network(loc, net_id), "external network %s not found" % net_id)


@op("listExternalNetworks")
async def list_networks(ctx: Ctx) -> JsonObject:
    ctx.customer()
    loc = ctx.emu.location(ctx.path_text("location")).name
    return {"result": [net_info(r) for r in ctx.store.networks.networks(loc)]}


@op("getExternalNetwork")
async def get_network(ctx: Ctx) -> JsonObject:
    return net_info(path_network(ctx))


@op("getExternalNetworkAddresses")
async def free_addresses(ctx: Ctx) -> JsonObject:
    return {"ip_addresses": ctx.store.networks.free_addresses(path_network(ctx))}


@op("listExternalNetworksVirtualMachine")
async def list_nics(ctx: Ctx) -> JsonObject:
    vm = ctx.target_vm()[2]
    return {"result": [ctx.emu.nic_info(n) for n in ctx.store.networks.of_vm(vm.vm_id)]}


@op("getExternalNetworksVirtualMachine")
async def get_nic(ctx: Ctx) -> JsonObject:
    vm = ctx.target_vm()[2]
    ip = ctx.path_text("external_ip_address")
    return ctx.emu.nic_info(found(ctx.store.networks.at(vm.vm_id, ip), "no external NIC with address %s" % ip[:80]))


@op("attachExternalNetworksVirtualMachine", mutating=True)
async def attach_nic(ctx: Ctx) -> JsonObject:
    _cid, cs, vm = ctx.target_vm()
    net_id = ctx.number("external_network_id")
    model = ctx.text("model", "virtio")
    wanted = ctx.maybe_text("external_network_ip")
    net = found(
        ctx.store.networks.network(cs.location, net_id),
        "external network %s not found in location %r" % (net_id, cs.location),
    )
    if wanted:
        try:
            ipaddress.ip_address(wanted)
        except ValueError:
            raise HTTPError(400, "invalid request: external_network_ip %r is not an IP address" % wanted[:80]) from None
    async with ctx.emu.vm_lock(vm.vm_id):
        ip_address = ctx.store.networks.choose_address(net, wanted)
        if not ip_address:
            raise HTTPError(
                409,
                "no free address on external network %s" % net_id
                if not wanted
                else "address %s is not available on external network %s" % (wanted, net_id),
            )
        nic = ctx.store.networks.attach(vm.vm_id, net, ip_address, model)
        await ctx.emu.run_hook(
            "nic_attach",
            {
                "EMU_VM_ID": vm.vm_id,
                "EMU_VM_NAME": vm.name,
                "EMU_MAC": nic.mac_address,
                "EMU_IP": ip_address,
                "EMU_PREFIX": addressing.prefix_length(net.subnet_mask),
                "EMU_NETWORK_ID": net_id,
                "EMU_GATEWAY": net.gateway,
            },
        )
    return {"success": True}


@op("detachExternalNetworksVirtualMachine", mutating=True)
async def detach_nic(ctx: Ctx) -> JsonObject:
    vm = ctx.target_vm()[2]
    net_id = ctx.number("external_network_id")
    ip = ctx.path_text("external_ip_address")
    async with ctx.emu.vm_lock(vm.vm_id):
        row = found(
            ctx.store.networks.at(vm.vm_id, ip, net_id),
            "no external NIC with address %s on network %s" % (ip[:80], net_id),
        )
        ctx.store.networks.detach(row.nic_id)
        await ctx.emu.run_hook(
            "nic_detach", {"EMU_VM_ID": vm.vm_id, "EMU_MAC": row.mac_address, "EMU_IP": row.ip_address}
        )
    return {"success": True}
