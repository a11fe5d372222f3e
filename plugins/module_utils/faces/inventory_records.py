# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the inventory shows, as plain records (plain Python, no Ansible): a :class:`HostRecord` per VM (with its
vGPUs, :class:`VgpuRecord`), a :class:`PoolRecord` per pool a cluster's pools note records, and :class:`Read`, what
one reading found.  ``vm_inventory`` makes them, ``inventory_hosts`` shows them to Ansible, ``inventory_cache``
keeps them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import PoolGpu, PoolShown


class VgpuOwner(TypedDict):
    """Who a reservation's name says owns it (``naming.decode``): the cluster and machine as they stand in the
    name (shortened when long), the slot, and when it was made (epoch seconds)."""

    cluster: str
    machine: str
    slot: int
    created: int


class VgpuRecord(TypedDict):
    """A vGPU reservation attached to a VM."""

    vgpu_id: str
    #: the reservation's ``vgpu_name``
    name: str
    #: decoded from the name; None for a name that is not the collection's
    owner: VgpuOwner | None
    #: the GPU profile's id (``gpu_id``)
    profile: str
    #: the profile's vendor and model (``NVIDIA A100``); None when the location no longer lists the profile
    type: str | None
    #: ``RESERVED``, ``ATTACHED`` or ``DELETED``
    status: str
    #: the location's price of one vGPU-hour (``billing.price_per_hour``); None when it is not known
    cost_per_hour: float | None


class HostRecord(TypedDict):
    """One VM as the inventory shows it (each key is a host variable, prefixed with :data:`VAR_PREFIX`)."""

    vm_id: int
    name: str
    cloudspace_id: str
    #: the cloudspace's name
    cloudspace: str
    location: str
    status: str | None
    vcpus: int | None
    #: MiB
    memory: int | None
    #: GiB of its boot disk (the listing's ``storage``)
    storage: int | None
    #: the addresses of its NICs that are not on an external network (the cloudspace's network)
    private_ips: list[str]
    #: the addresses of its NICs on external networks, in the listing's order
    external_ips: list[str]
    #: the cluster its marker names (None: no cluster owns it)
    cluster: str | None
    #: the pool its marker names (None: none, or no cluster owns it)
    pool: str | None
    vgpus: list[VgpuRecord]
    #: what it costs per hour, whole: its vCPUs, memory, boot disk and vGPUs at the location's prices (``cost``);
    #: None when the price of a unit it holds is not known (never 0)
    cost_per_hour: float | None
    #: that price by unit of the location's price list (``vcu``, ``mu``, ``su``, ``vgu``: each None when not known)
    cost_by_unit: dict[str, float | None]
    #: the currency of the location's prices
    currency: str | None


class PoolRecord(PoolShown):
    """One pool of a cluster as its pools note on a cloudspace records it (``poolsnote.pools_note``: written by the
    cluster's runs, information only), shown as the plan shows a pool (``spec.pool.PoolShown``; its price of one
    machine is None also when the note records no disk), priced at the location's price: a pool at zero has no VM,
    and is known from this alone."""

    cluster: str
    cloudspace_id: str
    cloudspace: str
    location: str
    #: GiB of each machine's boot disk, as the note records it (None: not recorded)
    disk: int | None
    #: its vGPUs per machine, by type; None for a pool without GPUs
    gpu: PoolGpu | None
    currency: str | None


@dataclass(frozen=True)
class Read:
    """What :func:`read` found: the hosts (sorted by location, cloudspace and name), what to warn about, and the
    pools the clusters' pools notes record (sorted by cluster, location, cloudspace and the note's order)."""

    hosts: list[HostRecord]
    warnings: list[str] = field(default_factory=list)
    pools: list[PoolRecord] = field(default_factory=list)
