# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One machine (a VM in a cloudspace): created with the first boot, deleted gracefully or by force (plain Python,
no Ansible); the core of ``machine`` and ``machine_info``, and the steps ``pools`` runs for a whole pool.

With a ``cluster``, a machine is that cluster's only when its description
carries the cluster's marker (``markers.machine_marker``): it is written at
creation, and read before anything is changed or deleted.  A VM of the same
name without it (a neighbour cluster's, or one made by hand) is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.ops import Ops
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.catalog import (
    IMAGE_HINT,
    check_images,
    images_of,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.userdata import Boot
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.userdata import user_data as render_user_data
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.converge import Concern, Where, converge
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    InputError,
    Resolved,
    gone_is_done,
    known,
    missing_is_none,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import Inventory
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import (
    describe,
    described,
    find_vm,
    marker_view,
    not_owned,
)

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import VM, DescribedVM, Reservation


def vm_view(vm: VM) -> dict[str, Any]:
    """A VM as the modules return it."""
    return {
        "vm_id": vm.get("vm_id"),
        "name": vm.get("name"),
        "status": vm.get("status"),
        "vcpus": vm.get("vcpus"),
        "memory": vm.get("memory"),
        "image_id": vm.get("image_id"),
        "vgpus": [d.get("reference_id") for d in vm.get("devices") or [] if d.get("type") == "VGPU"],
        "nics": [
            {"ip_address": n.get("ip_address"), "mac_address": n.get("mac_address"), "network_id": n.get("network_id")}
            for n in vm.get("network_interfaces") or []
        ],
    }


def size_warning(vm: VM, p: Pool) -> str | None:
    """A warning when an existing machine's size differs from the one its pool asks for (it is never resized)."""
    wanted = {k: v for k, v in (("vcpus", p.vcpus), ("memory", p.memory)) if v is not None}
    differs = {k: (vm.get(k), v) for k, v in wanted.items() if vm.get(k) != v}
    if not differs:
        return None
    return "machine %r exists with %s; it is not resized" % (
        vm["name"],
        ", ".join("%s=%s (wanted %s)" % (k, a, b) for k, (a, b) in differs.items()),
    )


def need_size(p: Pool, names: Iterable[str]) -> None:
    """Refuse to create machines of pool ``p`` without vcpus, memory and an image (``image_id``: a VM made without
    one boots nothing, and the platform shows it as image 0)."""
    listed = ", ".join(repr(n) for n in names)
    if not p.vcpus or not p.memory:
        raise InputError("creating machine(s) %s needs vcpus and memory" % listed)
    image = p.image
    if isinstance(image, bool) or not isinstance(image, int) or image < 1:
        raise InputError(
            "creating machine(s) %s needs image_id (a cluster spec's control_plane.image or pools[].image)%s: the "
            "id of the image it boots, one of its location's (%s); nothing was created"
            % (listed, "" if image is None else ", not %r" % (image,), IMAGE_HINT)
        )


def create(
    client: WhiteskyClient,
    cs: str,
    name: str,
    p: Pool,
    data: str,
    cluster: str | None = None,
    description: str | None = None,
) -> dict[str, Any]:
    """Create one VM of pool ``p`` (``need_size`` passed) with ``cluster``'s marker, naming the pool (or the given
    description); a lost answer is resolved by name, and a VM found there must carry the marker.  Returns its
    view."""
    if cluster:
        description = markers.machine_marker(cluster, p.name)
    else:
        description = description or "capvco machine"

    def resolve(_exc: Exception) -> Resolved | None:  # the answer was lost: created after all?
        found = find_vm(client, cs, name)
        if found is None:
            return None
        if cluster:
            seen = known(describe(client, cs, found), "machine %r (gone again since it was listed)" % name)
            if seen["owner"] != cluster:
                raise not_owned(name, cluster, seen["description"])
        return Resolved(found["vm_id"])

    vm_id = client.create_vm(
        cs,
        name=name,
        description=description,
        vcpus=known(p.vcpus, "vcpus"),
        memory=known(p.memory, "memory"),
        image_id=p.image,
        disk_size=p.disk_size,
        user_data=data,
        resolve=resolve,
    )
    return vm_view(client.get_vm(cs, vm_id.value if isinstance(vm_id, Resolved) else vm_id))


def need_graceful(force: bool, cluster: str | None, location: str | None, names: Iterable[str]) -> None:
    """Refuse a graceful delete that cannot find the machines' reservations (no cluster or location)."""
    if not force and not (cluster and location):
        raise InputError(
            "a graceful delete of %s needs cluster and location, to release its vGPUs first "
            "(or force: true, which leaves them to the teardown and orphan sweeps)" % ", ".join(repr(n) for n in names)
        )


def delete(
    client: WhiteskyClient, cs: str, vm: VM, force: bool, ops: Ops | None = None, owned: Iterable[Reservation] = ()
) -> None:
    """Delete one VM: gracefully (``owned``, its cluster's reservations for it, released first through ``ops``) or
    by force (with ``detach_gpu``, releasing nothing)."""
    for item in owned:
        known(ops, "the release operations of a graceful delete").release(item)
    try:
        gone_is_done(client.delete_vm, cs, vm["vm_id"], permanently=True, detach_gpu=bool(force))
    except ApiError as exc:
        if exc.status == 409 and not force:
            raise InputError(
                "machine %r still has vGPUs this cluster does not own (%s); release them, or delete "
                "with force: true" % (vm["name"], exc.message)
            ) from None
        raise


def ensure(
    client: WhiteskyClient,
    *,
    cloudspace_id: str,
    name: str,
    state: str = "present",
    force: bool = False,
    cluster: str | None = None,
    pool: str | None = None,
    location: str | None = None,
    vcpus: int | None = None,
    memory: int | None = None,
    image_id: int | None = None,
    disk_size: int | None = None,
    description: str | None = None,
    first_boot: dict[str, Any] | None = None,
    bootstrap_data: str | None = None,
    provider_id: str | None = None,
    user_data: str | None = None,
    node_labels: dict[str, str] | None = None,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Core of ``machine``: a VM exists (created with first-boot user data, ``node_labels`` handed to its kubelet),
    or is gone.

    With ``cluster``, a change is made holding the cluster's lease (one run at a time per cluster), and planned
    again from what is read once it is held; a machine of a cluster is named ``<cluster>-<rest>``."""
    if cluster:
        markers.check_machine_name(cluster, name)
    m = Asked(
        cloudspace_id,
        state,
        force,
        cluster,
        location,
        Pool(pool, (name,), vcpus, memory, image_id, disk_size),
        description,
        Boot(first_boot or {}, bootstrap_data, provider_id, user_data, dict(node_labels or {})),
    )
    return converge(client, _One(client, m), check_mode)


@dataclass(frozen=True)
class Asked:
    """What :func:`ensure` was asked for: the machine, a pool of one (its pool's name, its size), where, how, and what
    it boots with."""

    cloudspace_id: str
    state: str
    force: bool
    cluster: str | None
    location: str | None
    machine: Pool
    description: str | None
    boot: Boot

    @property
    def name(self) -> str:
        return self.machine.names[0]


@dataclass(frozen=True)
class Found:
    """What :func:`ensure` reads: the VM of the name (None: there is none) and, when a cluster is asked for, the same
    with its owner (``seen``), the location's images (None: not read, nothing to create or no location), and the
    reservations of the cluster's a graceful delete releases first (None: not read)."""

    vm: VM | None
    seen: DescribedVM | None
    images: list[Any] | None
    owned: list[Reservation] | None


@dataclass(frozen=True)
class MachineChange:
    """What :func:`ensure` changes of one machine (:func:`plan_machine`, pure): the VM as it is (``before``, its
    view; empty: none), the VM to create (``create``: the machine, a pool of one, with its rendered ``user_data``)
    or to delete (``delete``, by force or after its reservations ``releases``), and a size warning."""

    name: str
    before: dict[str, Any]
    create: Pool | None = None
    user_data: str = ""
    delete: VM | None = None
    force: bool = False
    releases: tuple[Reservation, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return self.create is not None or self.delete is not None

    def view(self) -> dict[str, Any]:
        """The ``machine`` module's result of the plan: the machine as it is, the diff, the warning, and the vGPUs
        a graceful delete releases."""
        out: dict[str, Any] = {"changed": self.changed, "machine": self.before}
        if self.warnings:
            out["warnings"] = list(self.warnings)
        after: dict[str, Any] = self.before
        if self.create is not None:
            p = self.create
            after = {"name": self.name, "vcpus": p.vcpus, "memory": p.memory, "image_id": p.image}
        elif self.delete is not None:
            after = {}
        out["diff"] = {"before": self.before, "after": after}
        if self.delete is not None and not self.force:
            out["released_vgpus"] = [i["vgpu_name"] for i in self.releases]
        return out


def plan_machine(m: Asked, found: Found) -> MachineChange:
    """What :func:`ensure` changes, from what it read (pure): a VM of the name that is not the cluster's is
    refused; a machine to create must have its size and image (one the location has) and user data that fits; a
    graceful delete needs the cluster and the location."""
    name, cluster, vm, seen = m.name, m.cluster, found.vm, found.seen
    if seen is not None and cluster and seen["owner"] != cluster:
        raise not_owned(name, cluster, seen["description"])
    before = vm_view(vm) if vm else {}
    if m.state == "present":
        if vm is not None:
            warning = size_warning(vm, m.machine)
            return MachineChange(name, before, warnings=(warning,) if warning else ())
        need_size(m.machine, [name])
        data = render_user_data(m.boot, "machine %r" % name)
        if found.images is not None:  # an image the location does not have is refused before anything is made
            check_images(found.images, images_of([m.machine]), known(m.location, "location"))
        return MachineChange(name, before, create=m.machine, user_data=data)
    if vm is None:
        return MachineChange(name, before)
    need_graceful(m.force, cluster, m.location, [name])
    return MachineChange(name, before, delete=vm, force=m.force, releases=tuple(found.owned or ()))


class _One(Concern[Found, MachineChange]):
    """The ``machine`` module's concern: one VM, under its cluster's lease when it has a cluster."""

    def __init__(self, client: WhiteskyClient, m: Asked) -> None:
        self.client, self.m = client, m

    def read(self) -> Found:
        """The VM of the name (described, with a cluster), then the images when it is to be created, or the
        cluster's reservations of it when it is to be deleted gracefully."""
        m, client = self.m, self.client
        vm: VM | None = find_vm(client, m.cloudspace_id, m.name)
        seen = None
        if vm is not None and m.cluster:
            vm = seen = describe(client, m.cloudspace_id, vm)  # None: gone again since it was listed
        images = owned = None
        if m.state == "present":
            if vm is None and m.location:
                images = client.images(m.location)
        elif seen is not None and not m.force and m.location and seen["owner"] == m.cluster:
            owned = Inventory(client, m.location).owned(m.cluster, m.name)
        return Found(vm, seen, images, owned)

    def plan(self, world: Found) -> MachineChange:
        return plan_machine(self.m, world)

    def lease(self, plan: MachineChange) -> Where | None:
        return Where(self.m.cloudspace_id, self.m.cluster) if self.m.cluster else None

    def apply(self, plan: MachineChange, done: dict[str, Any]) -> None:
        m, cs = self.m, self.m.cloudspace_id
        if plan.create is not None:
            done["machine"] = create(self.client, cs, plan.name, plan.create, plan.user_data, m.cluster, m.description)
        elif plan.delete is not None:
            ops = None if plan.force or m.location is None else Ops(self.client, m.location, cs, permanently=True)
            delete(self.client, cs, plan.delete, plan.force, ops, plan.releases)


SIZE_KEYS = ("vcpus", "memory", "image_id", "disk_size")
#: The size options of the modules that create machines (``machine``, ``machine_pool`` and its pools).
SIZE_OPTIONS = {key: dict(type="int") for key in SIZE_KEYS}


def info(
    client: WhiteskyClient,
    *,
    cloudspace_id: str,
    name: str | None = None,
    name_prefix: str | None = None,
    cluster: str | None = None,
    vm_id: int | None = None,
    parallel: int = 32,
) -> dict[str, Any]:
    """Core of ``machine_info``; with ``vm_id``, one read of that VM (none when it is gone), with its owner."""
    if vm_id is not None:
        vm = missing_is_none(client.get_vm, cloudspace_id, vm_id)
        seen = [dict(vm_view(vm), **marker_view(vm.get("description")))] if vm is not None else []
        wanted = dict(name=name, owner=cluster)
        seen = [v for v in seen if all(v[k] == want for k, want in wanted.items() if want)]
        return {"machines": [v for v in seen if not name_prefix or str(v["name"]).startswith(name_prefix)]}
    if cluster:
        vms = [v for v in described(client, cloudspace_id, cluster, parallel) if v["owner"] == cluster]
        if name:
            vms = [v for v in vms if v["name"] == name]
        return {"machines": [dict(vm_view(v), **marker_view(v["description"])) for v in vms]}
    vms = client.vms(cloudspace_id)
    if name:
        vms = [v for v in vms if v["name"] == name]
    if name_prefix:
        vms = [v for v in vms if v["name"].startswith(name_prefix)]
    return {"machines": [vm_view(v) for v in vms]}
