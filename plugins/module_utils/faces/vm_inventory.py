# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A customer's VMs as inventory hosts, with their owners and vGPUs: plain records (plain Python, no Ansible).

The core of the inventory plugin ``whitesky.capvco.vms``, without Ansible: :func:`read` reads the platform and
returns a :class:`HostRecord` per VM and a :class:`PoolRecord` per pool that a cluster's pools note records (a pool
at zero has no VM: it is known from the note alone), the records of ``inventory_records``.  What Ansible sees of them
(host names, groups, variables) is ``inventory_hosts``'s, what the plugin's cache keeps ``inventory_cache``'s.

The calls are bounded by the listings, never by the VMs of others: for C cloudspaces in L locations,

- the customer's cloudspaces (1);
- per cloudspace, its VM listing and its notes (2 C);
- per location, the reservations' pages, the GPU profiles and the prices (pages + 2 L);
- a VM's marker (``getVirtualMachineInfo``, as listings do not carry the description) only where its name may be a
  machine of a cluster that the cloudspace's notes name (``ownership_markers.may_own``, ``notes.clusters_in``); every
  other VM is owned by no cluster without a read.  A marker is the only proof: a VM whose name fits a cluster but
  whose description is not that cluster's marker is owned by no cluster, and a VM whose marker names a cluster
  whose name its own name does not start with is not that cluster's machine (docs/lifecycle.md).

Every read that waits on nothing else is in flight at once, at most ``parallel``: the locations' reads and each
cloudspace's listing and notes as soon as the cloudspaces are listed, a cloudspace's markers as soon as its listing
and notes are in.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future, as_completed
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.inventory_records import (
    HostRecord,
    PoolGpu,
    PoolRecord,
    Read,
    VgpuOwner,
    VgpuRecord,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers as ownership_markers
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes, poolsread
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import missing_is_none
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import Beside
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import Inventory
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import describe

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import VM, DescribedVM, Reservation


@dataclass(frozen=True)
class _Location:
    """A location's reads: the reservations attached to each VM (by VM id), the currency and the price per hour of
    one of each unit (``billing.rates``; None: not known)."""

    vgpus: dict[int, list[VgpuRecord]]
    currency: str | None
    rates: dict[str, float | None] = field(default_factory=lambda: billing.rates({}))


def select(
    listed: Sequence[Mapping[str, Any]], locations: Collection[str] = (), names: Collection[str] = ()
) -> tuple[list[Mapping[str, Any]], list[str]]:
    """The cloudspaces of the listing in ``locations`` and of ``names`` (each filter: all when empty), and a
    warning for each location or name that selects none of them."""
    spaces = [
        cs
        for cs in listed
        if (not locations or cs.get("location") in locations) and (not names or cs.get("name") in names)
    ]
    warnings = []
    for loc in sorted(set(locations) - {cs.get("location") for cs in listed}):
        warnings.append("location %r holds none of the customer's cloudspaces" % loc)
    in_locations = [cs for cs in listed if not locations or cs.get("location") in locations]
    for name in sorted(set(names) - {cs.get("name") for cs in in_locations}):
        warnings.append(
            "cloudspace %r not found%s; the customer has: %s"
            % (
                name,
                " in %s" % ", ".join(sorted(locations)) if locations else "",
                ", ".join(sorted({str(cs.get("name")) for cs in in_locations})) or "none",
            )
        )
    return spaces, warnings


def addresses(vm: VM) -> tuple[list[str], list[str]]:
    """``(private, external)``: the addresses of the VM's NICs as its listing gives them.  A NIC is external when
    its type (``external_network_type`` in a listing, ``nic_type`` in a VM's info) is ``external``; any other NIC
    (the cloudspace's network) is private."""
    private: list[str] = []
    external: list[str] = []
    for nic in vm.get("network_interfaces") or []:
        ip = nic.get("ip_address") if isinstance(nic, dict) else None
        if not isinstance(ip, str) or not ip:
            continue
        kind = nic.get("external_network_type") or nic.get("nic_type")
        (external if str(kind).lower() == "external" else private).append(ip)
    return private, external


def may_be_owned(clusters: Iterable[str], name: object) -> bool:
    """True when a VM of this name may be a machine of one of ``clusters`` (its marker is then read)."""
    return any(ownership_markers.may_own(c, name) for c in clusters)


def owner(vm: VM, seen: DescribedVM | None) -> tuple[str | None, str | None]:
    """``(cluster, pool)`` of a VM from its marker (``seen``; None when not read): the marker's cluster when the
    VM's name starts with that cluster's name and ``-``, else no cluster."""
    cluster = seen["owner"] if seen is not None else None
    if cluster is None or not ownership_markers.may_own(cluster, vm["name"]):
        return None, None
    return cluster, seen["pool"] if seen is not None else None


def vgpu_owner(item: Reservation) -> VgpuOwner | None:
    decoded = item.get("owner")
    if decoded is None:
        return None
    return {"cluster": decoded.cluster, "machine": decoded.machine, "slot": decoded.slot, "created": decoded.created}


def location_view(inventory: Inventory, profiles: Iterable[Mapping[str, Any]], price: object) -> _Location:
    """A location's reservations by the VM each is attached to, with their profiles' types and cost per hour."""
    types = {
        str(p.get("id")): ("%s %s" % (p.get("vendor") or "", p.get("model") or "")).strip() or None for p in profiles
    }
    prices = price if isinstance(price, dict) else {}
    per_hour = billing.price_per_hour(prices)
    by_vm: dict[int, list[VgpuRecord]] = {}
    for item in inventory.items:
        vm = item.get("virtual_machine")
        if not vm:
            continue
        by_vm.setdefault(vm["id"], []).append(
            {
                "vgpu_id": item["vgpu_id"],
                "name": item["vgpu_name"],
                "owner": vgpu_owner(item),
                "profile": item["gpu_id"],
                "type": types.get(item["gpu_id"]),
                "status": item["status"],
                "cost_per_hour": billing.times(1, per_hour, 6),
            }
        )
    return _Location(by_vm, billing.currency_of(prices), billing.rates(prices))


def record(cs: Mapping[str, Any], vm: VM, seen: DescribedVM | None, where: _Location) -> HostRecord:
    """A VM's :class:`HostRecord`."""
    private, external = addresses(vm)
    cluster, pool = owner(vm, seen)
    vgpus = sorted(where.vgpus.get(vm["vm_id"], []), key=lambda v: v["name"])
    held = billing.machine_amounts(vm.get("vcpus"), vm.get("memory"), vm.get("storage"), len(vgpus))
    return {
        "vm_id": vm["vm_id"],
        "name": vm["name"],
        "cloudspace_id": str(cs["cloudspace_id"]),
        "cloudspace": str(cs.get("name")),
        "location": str(cs.get("location")),
        "status": vm.get("status"),
        "vcpus": vm.get("vcpus"),
        "memory": vm.get("memory"),
        "storage": vm.get("storage"),
        "private_ips": private,
        "external_ips": external,
        "cluster": cluster,
        "pool": pool,
        "vgpus": vgpus,
        "cost_per_hour": billing.cost(held, where.rates, 6),
        "cost_by_unit": {
            u: billing.unit_cost(held[u], where.rates[u], 6) for u in billing.UNITS_PRICED if held[u] != 0
        },
        "currency": where.currency,
    }


def pool_records(cs: Mapping[str, Any], noted: Iterable[Any], where: _Location) -> tuple[list[PoolRecord], list[str]]:
    """The pools that the pools notes of a cloudspace's clusters (those its creator and member notes name,
    ``notes.clusters_in``) record, priced at the location's price; and a warning for each of those clusters whose
    pools note does not parse, or that has more than one there (its pools are left out).  A note is information:
    what does not parse whole is nothing."""
    held = [n for n in noted if isinstance(n, dict)]
    clusters = notes.clusters_in(held)
    found, refused = poolsread.pools_in(held)
    out: list[PoolRecord] = []
    for cluster in sorted(set(found) & clusters):
        for p in found[cluster]:
            gpu: PoolGpu | None = {"type": p.gpu_type, "count": p.gpu_count} if p.gpu_type is not None else None
            out.append(
                {
                    "cluster": cluster,
                    "name": p.name,
                    "cloudspace_id": str(cs["cloudspace_id"]),
                    "cloudspace": str(cs.get("name")),
                    "location": str(cs.get("location")),
                    "replicas": p.replicas,
                    "vcpus": p.vcpus,
                    "memory": p.memory,
                    "disk": p.disk_size,
                    "gpu": gpu,
                    "per_machine_hourly": billing.cost(
                        billing.machine_amounts(p.vcpus, p.memory, p.disk_size, p.gpu_count), where.rates, 6
                    ),
                    "currency": where.currency,
                }
            )
    warnings = [
        "cloudspace %r: the pools note of cluster %r does not parse, or there is more than one: its pools are not "
        "shown" % (str(cs.get("name")), cluster)
        for cluster in refused
        if cluster in clusters
    ]
    return out, warnings


def _sort_key(host: HostRecord) -> tuple[str, str, str, str, int]:
    return host["location"], host["cloudspace"], host["cloudspace_id"], host["name"], host["vm_id"]


class _Reads:
    """The reads of one inventory, each submitted to ``pool`` as soon as what it waits on is in."""

    def __init__(self, client: WhiteskyClient, pool: Beside) -> None:
        self.client = client
        self.pool = pool
        self.locations: dict[str, tuple[Future[Inventory], Future[list[Any]], Future[Any]]] = {}
        self.spaces: dict[str, tuple[Future[list[Any] | None], Future[list[Any] | None]]] = {}
        self.markers: dict[tuple[str, int], Future[DescribedVM | None]] = {}
        #: each cloudspace's notes, as they came in
        self.notes: dict[str, list[Any]] = {}

    def start(self, spaces: Sequence[Mapping[str, Any]]) -> None:
        """Ask at once for every location's reads and every cloudspace's listing and notes."""
        client, submit = self.client, self.pool.start
        for loc in sorted({str(cs.get("location")) for cs in spaces}):
            self.locations[loc] = (
                submit(Inventory, client, loc),
                submit(client.gpu_profiles, loc),
                submit(client.prices, loc),
            )
        for cs in spaces:
            cs_id = str(cs["cloudspace_id"])  # a cloudspace gone since it was listed holds no hosts
            self.spaces[cs_id] = (
                submit(missing_is_none, client.vms, cs_id),
                submit(missing_is_none, client.cloudspace_notes, cs_id),
            )

    def listings(self) -> dict[str, list[VM]]:
        """Every cloudspace's VMs; as soon as a cloudspace's listing and notes are both in, whichever comes first,
        the markers of its VMs whose names may be a noted cluster's machines are asked for."""
        waiting = {f: cs_id for cs_id, pair in self.spaces.items() for f in pair}
        out: dict[str, list[VM]] = {}
        for done in as_completed(waiting):
            cs_id = waiting[done]
            vms_f, notes_f = self.spaces[cs_id]
            if cs_id in out or not (vms_f.done() and notes_f.done()):
                continue
            vms: list[VM] = vms_f.result() or []
            self.notes[cs_id] = notes_f.result() or []
            clusters = notes.clusters_in(self.notes[cs_id])
            for vm in vms:
                if may_be_owned(clusters, vm["name"]):
                    self.markers[(cs_id, vm["vm_id"])] = self.pool.start(describe, self.client, cs_id, vm)
            out[cs_id] = vms
        return out

    def location(self, loc: str) -> _Location:
        inventory_f, profiles_f, price_f = self.locations[loc]
        return location_view(inventory_f.result(), profiles_f.result(), price_f.result())


def read(
    client: WhiteskyClient, locations: Collection[str] = (), cloudspaces: Collection[str] = (), parallel: int = 64
) -> Read:
    """Every VM of the customer's cloudspaces in ``locations`` and of the names ``cloudspaces`` (each filter: all
    when empty) as a :class:`HostRecord`, with at most ``parallel`` reads in flight (see the module's words on
    what it calls)."""
    spaces, warnings = select(client.cloudspaces(), locations, cloudspaces)
    with Beside(parallel) as pool:
        reads = _Reads(client, pool)
        reads.start(spaces)
        listed = reads.listings()
        where = {loc: reads.location(loc) for loc in reads.locations}
        seen = {key: f.result() for key, f in reads.markers.items()}
    hosts = []
    pools: list[PoolRecord] = []
    for cs in spaces:
        cs_id = str(cs["cloudspace_id"])
        found, said = pool_records(cs, reads.notes.get(cs_id, []), where[str(cs.get("location"))])
        pools += found
        warnings += said
        for vm in listed[cs_id]:
            key = (cs_id, vm["vm_id"])
            if key in seen and seen[key] is None:
                continue  # deleted since it was listed
            hosts.append(record(cs, vm, seen.get(key), where[str(cs.get("location"))]))
    hosts.sort(key=_sort_key)
    pools.sort(key=lambda p: (p["cluster"], p["location"], p["cloudspace"], p["cloudspace_id"]))  # stable: the note's
    return Read(hosts, warnings, pools)
