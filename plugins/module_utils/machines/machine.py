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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.ops import Ops
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.catalog import IMAGE_HINT, require_images
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.userdata import Boot
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.userdata import user_data as render_user_data
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease, markers
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    InputError,
    Resolved,
    gone_is_done,
    known,
    missing_is_none,
)
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
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import VM, Reservation


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


def size_warning(vm: VM, p: Mapping[str, Any]) -> str | None:
    """A warning when an existing machine's size differs from the one asked for (it is never resized)."""
    wanted = {k: p[k] for k in ("vcpus", "memory") if p.get(k) is not None}
    differs = {k: (vm.get(k), v) for k, v in wanted.items() if vm.get(k) != v}
    if not differs:
        return None
    return "machine %r exists with %s; it is not resized" % (
        vm["name"],
        ", ".join("%s=%s (wanted %s)" % (k, a, b) for k, (a, b) in differs.items()),
    )


def need_size(p: Mapping[str, Any], names: Iterable[str]) -> None:
    """Refuse to create machines without vcpus, memory and an image (``image_id``: a VM made without one boots
    nothing, and the platform shows it as image 0)."""
    listed = ", ".join(repr(n) for n in names)
    if not p.get("vcpus") or not p.get("memory"):
        raise InputError("creating machine(s) %s needs vcpus and memory" % listed)
    image = p.get("image_id")
    if isinstance(image, bool) or not isinstance(image, int) or image < 1:
        raise InputError(
            "creating machine(s) %s needs image_id (a cluster spec's control_plane.image or pools[].image)%s: the "
            "id of the image it boots, one of its location's (%s); nothing was created"
            % (listed, "" if image is None else ", not %r" % (image,), IMAGE_HINT)
        )


def create(client: WhiteskyClient, cs: str, name: str, p: Mapping[str, Any], data: str) -> dict[str, Any]:
    """Create one VM with the cluster's marker (or the given description); a lost answer is resolved by name, and a
    VM found there must carry the marker.  Returns its view."""
    cluster = p.get("cluster")
    if cluster:
        description = markers.machine_marker(cluster, p.get("pool"))
    else:
        description = p.get("description") or "capvco machine"

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
        vcpus=p["vcpus"],
        memory=p["memory"],
        image_id=p.get("image_id"),
        disk_size=p.get("disk_size"),
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
    m = _Machine(
        cloudspace_id,
        name,
        state,
        force,
        cluster,
        location,
        {"vcpus": vcpus, "memory": memory, "image_id": image_id, "disk_size": disk_size},
        {"cluster": cluster, "pool": pool, "description": description},
        Boot(first_boot or {}, bootstrap_data, provider_id, user_data, dict(node_labels or {})),
    )
    result = _ensure(client, m, write=False)
    if check_mode or not result["changed"]:
        return result
    if not cluster:
        return _ensure(client, m, write=True)
    with lease.held(client, cloudspace_id, cluster):
        return _ensure(client, m, write=True)


@dataclass(frozen=True)
class _Machine:
    """What :func:`ensure` was asked for."""

    cloudspace_id: str
    name: str
    state: str
    force: bool
    cluster: str | None
    location: str | None
    size: dict[str, Any]
    owner: dict[str, Any]
    boot: Boot


def _ensure(client: WhiteskyClient, m: _Machine, write: bool) -> dict[str, Any]:
    """:func:`ensure`'s reads and plan, and with ``write`` its changes."""
    cs, name, cluster, location, force = m.cloudspace_id, m.name, m.cluster, m.location, m.force
    vm: VM | None = find_vm(client, cs, name)
    if vm is not None and cluster:
        vm = describe(client, cs, vm)
        if vm is not None and vm["owner"] != cluster:
            raise not_owned(name, cluster, vm.get("description"))
    before = vm_view(vm) if vm else {}
    result: dict[str, Any] = {"changed": False, "machine": before}
    if m.state == "present":
        if vm is not None:
            warning = size_warning(vm, m.size)
            if warning:
                result["warnings"] = [warning]
            result["diff"] = {"before": before, "after": before}
            return result
        need_size(m.size, [name])
        data = render_user_data(m.boot, "machine %r" % name)
        if location:  # an image the location does not have is refused before anything is made
            require_images(client, location, {m.size["image_id"]: [name]})
        after = {"name": name, "vcpus": m.size["vcpus"], "memory": m.size["memory"], "image_id": m.size["image_id"]}
        result.update(changed=True, diff={"before": {}, "after": after})
        if not write:
            return result
        result["machine"] = create(client, cs, name, {**m.size, **m.owner}, data)
        return result
    if vm is None:
        result["diff"] = {"before": {}, "after": {}}
        return result
    result.update(changed=True, diff={"before": before, "after": {}})
    need_graceful(force, cluster, location, [name])
    owned: list[Reservation] = []
    if not force:
        owned = Inventory(client, known(location, "location")).owned(cluster, name)
        result["released_vgpus"] = [i["vgpu_name"] for i in owned]
    if not write:
        return result
    ops = None if force or location is None else Ops(client, location, cs, permanently=True)
    delete(client, cs, vm, force, ops, owned)
    return result


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
