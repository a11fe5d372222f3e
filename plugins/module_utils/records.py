# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The records that cross the core's files, typed (pure Python).

Two kinds:

- the platform's dicts as the core reads and extends them in place (a reservation with its decoded ``owner``, a
  VM with the owner its marker names): :class:`typing.TypedDict`, which are plain dicts at run time;
- the plans the core makes itself (a machine's vGPU plan, a pool converge's plan): frozen dataclasses.  The plans
  of the ``cluster`` module (:class:`ClusterPlan`, :class:`TeardownPlan`) are part of its result, so they stay
  dicts, typed.

Keys that every record of a kind has are required; keys that only some of them carry (the platform's answer has
them, what the core makes itself does not) are in a ``total=False`` part.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # annotations only: nothing here needs the other files at run time
    from ansible_collections.whitesky.capvco.plugins.module_utils.inventory import Inventory
    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import Owner


# --- vGPU reservations (``listCustomerVGPUS``'s VGPUInfoStruct, plus the decoded owner) ---


class _VmRefId(TypedDict):
    id: int


class VmRef(_VmRefId, total=False):
    """The VM a reservation is attached to (its ``virtual_machine``): the platform's answer carries all four; the
    core's record of a reservation it just made or attached carries ``id`` (and ``name``)."""

    name: str
    cloudspace_id: str
    cloudspace_name: str


class BilledVgpu(TypedDict):
    """The least of a reservation that its cost is computed from (``billing.costs``): every :class:`Reservation`
    is one."""

    vgpu_id: str
    virtual_machine: VmRef | None
    #: decoded from ``vgpu_name`` (``ownership.decode``): None for a name that is not ours
    owner: Owner | None


class _Reservation(BilledVgpu):
    vgpu_name: str
    gpu_id: str
    #: ``RESERVED``, ``ATTACHED`` or ``DELETED`` (in the recycle bin)
    status: str


class Reservation(_Reservation, total=False):
    """A vGPU reservation as ``inventory.Inventory`` holds it: the platform's dict with its ``owner`` decoded.
    The core updates ``status`` and ``virtual_machine`` in place when it attaches one."""

    account_id: int
    customer_id: str
    customer_name: str
    description: str
    deletion_time: int
    location: str


# --- VMs (``listCloudspaceVirtualMachines``'s VmsModel; ``vms.described`` adds the owner) ---


class _VmKey(TypedDict):
    vm_id: int
    name: str


class VM(_VmKey, total=False):
    """A VM as a cloudspace's listing gives it (the core's own ``{vm_id, name}`` references are ones too)."""

    status: str
    creation_time: float
    update_time: float
    vcpus: int
    memory: int
    image_id: int
    storage: int
    network_interfaces: list[dict[str, Any]]
    devices: list[dict[str, Any]]


class MarkerView(TypedDict):
    """What a VM's description says of its owner (``vms.marker_view``): the cluster and pool of its marker, or
    None for a VM no cluster owns."""

    owner: str | None
    pool: str | None


class DescribedVM(VM):
    """A VM of the listing with its description (``getVirtualMachineInfo``) and the owner its marker names
    (``vms.describe``, ``vms.described``)."""

    description: str | None
    owner: str | None
    pool: str | None


# --- cloudspaces ---


class CloudspaceView(TypedDict, total=False):
    """A cloudspace as the modules return it (``cloudspaces.view``; empty when there is none)."""

    cloudspace_id: str
    name: str
    location: str
    status: str
    private_network: str


# --- pools of machines (``pools``, ``cluster``, ``userdata``, ``machines``) ---


class _Pool(TypedDict):
    name: str | None
    names: list[str]
    #: ``{type, count, driver_version}``, or None for a pool without vGPUs
    gpu: dict[str, Any] | None


class Pool(_Pool, total=False):
    """A pool of machines in the machines core's shape: its name, its machines' names, their size, their vGPUs."""

    vcpus: int | None
    memory: int | None
    image_id: int | None
    disk_size: int | None


# --- plans the core makes (pure planners' results) ---


@dataclass(frozen=True)
class MachinePlan:
    """What one machine's vGPUs need (``gpu.plan_machine``): the reservations to ``release``, those to ``fix``
    (restore from the recycle bin, attach), the ``missing`` slots to reserve, and the reservations ``kept``."""

    releases: list[Reservation]
    fixes: list[Reservation]
    missing: list[int]
    kept: list[Reservation]


@dataclass(frozen=True)
class VgpuPlan:
    """Each machine's :class:`MachinePlan` by name, and the profile id its new slots come from (``gpu.plan``)."""

    machines: dict[str, MachinePlan]
    alloc: dict[str, str]


class Diff(TypedDict):
    """A module result's ``diff``: text, a line per thing (``diff_lines``); Ansible's callbacks show a diff of
    strings or dicts only."""

    before: str
    after: str


def diff_lines(kind: str, names: Iterable[object]) -> str:
    """One side of a diff: a line ``<kind> <name>`` per name, in order."""
    return "".join("%s %s\n" % (kind, name) for name in names)


def names_diff(kind: str, before: Iterable[str], after: Iterable[str]) -> Diff:
    """The diff of two lists of names of one kind."""
    return {"before": diff_lines(kind, before), "after": diff_lines(kind, after)}


@dataclass(frozen=True)
class MachinesPlan:
    """What converging the pools changes (``pools.plan_machines``): the machines to create (``(pool, name)``), the
    VMs to delete and the VMs ``listed`` in the result, the ``diff`` of the cluster's machine names, and size
    ``warnings``."""

    creates: list[tuple[Pool, str]]
    deletes: list[DescribedVM]
    listed: list[DescribedVM]
    diff: Diff
    warnings: list[str]


# --- the cluster module: what it reads, and its plans (returned to users as ``plan``: dicts, their shape is the
# module's RETURN) ---


class ClusterSpace(TypedDict):
    """One cloudspace of the cluster's name as ``cluster.read`` gives it: its view, its VMs (described) and the
    cluster its creator note names (read for a teardown only)."""

    cloudspace: CloudspaceView
    vms: list[DescribedVM]
    creator: str | None
    #: the other clusters its notes name as having machines in it (a teardown's read; empty otherwise)
    members: list[str]


class ClusterWorld(TypedDict):
    """What ``cluster.read`` reads for a plan: the same-named cloudspaces (earliest first), the location's
    reservations, its price list and GPU profiles (as the platform gives them)."""

    spaces: list[ClusterSpace]
    inventory: Inventory
    price: dict[str, Any]
    profiles: list[dict[str, Any]]


class Price(TypedDict):
    """What the cluster's vGPUs cost per hour before and after a plan (``cluster._price``); each price is None when
    the location's price is not known (``billing.price_per_hour``)."""

    currency: str | None
    per_vgpu_hour: float | None
    vgpus_before: int
    vgpus_after: int
    hourly_before: float | None
    hourly_added: float | None
    hourly_removed: float | None
    hourly_after: float | None


class CloudspacePlan(TypedDict):
    name: str
    cloudspace_id: str | None
    create: bool


class MachineCreate(TypedDict):
    name: str
    pool: str


class SlotReserve(TypedDict):
    machine: str
    slot: int
    type: str
    profile: str


class Capacity(TypedDict):
    needed: int
    available: int


class ClusterPlan(TypedDict):
    """What converging a cluster to its spec changes (``cluster.plan``)."""

    cloudspace: CloudspacePlan
    create: list[MachineCreate]
    delete: list[str]
    keep: list[str]
    reserve: list[SlotReserve]
    release: list[str]
    attach: list[str]
    capacity: dict[str, Capacity]
    price: Price
    user_data_bytes: dict[str, int]


class TeardownSpace(CloudspaceView):
    """One cloudspace of a teardown: its view, whether it is deleted (or why it is ``kept``), the machines of the
    cluster in it that go, and the cluster it is handed over to (``cloudspaces.successor``) when it is kept for
    another cluster's machines."""

    delete: bool
    kept: str | None
    machines: list[str]
    handover: str | None


class TeardownPlan(TypedDict):
    """What tearing a cluster down (or deleting one machine of it) changes (``cluster.plan_teardown``)."""

    cloudspaces: list[TeardownSpace]
    delete: list[str]
    release: list[str]
    price: Price
