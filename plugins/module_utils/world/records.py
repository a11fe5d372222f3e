# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the platform holds, as the core reads it and extends it in place, typed (pure Python): a reservation with
its decoded ``owner``, a VM with the owner its marker names, a cloudspace's view.  They are
:class:`typing.TypedDict`, plain dicts at run time.  The plans the core makes are typed where they are made (the
``gpu``, ``machines`` and ``cluster`` packages).

Keys that every record of a kind has are required; keys that only some of them carry (the platform's answer has
them, what the core makes itself does not) are in a ``total=False`` part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # annotations only: nothing here needs the other files at run time
    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.naming import Owner


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
    #: decoded from ``vgpu_name`` (``naming.decode``): None for a name that is not ours
    owner: Owner | None


class _Reservation(BilledVgpu):
    vgpu_name: str
    gpu_id: str
    #: ``RESERVED``, ``ATTACHED`` or ``DELETED`` (in the recycle bin)
    status: str


class Reservation(_Reservation, total=False):
    """A vGPU reservation as ``reservations.Inventory`` holds it: the platform's dict with its ``owner`` decoded.
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
