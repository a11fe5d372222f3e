# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The core of ``machine_pool`` (plain Python, no Ansible): its options made pools (:func:`pools_of`, typed
``spec.pool.Pool`` records), its cloudspace (by id, or by name, claimed when a converge makes it), the pools'
machines (``pools.converge_machines``), then each GPU pool's vGPUs (``vgpus.ensure``), or, in a teardown with
``sweep``, every reservation the cluster owns released (``sweep.release_cluster``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.profiles import type_profiles
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.catalog import images_of, require_images
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.cloudspaces import cloudspace_by_name
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.machine import need_size
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.pools import (
    Scope,
    converge_machines,
    unique_names,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.userdata import Boot, pool_user_data
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers, naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, known
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.sweep import release_cluster
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import GpuSpec, Pool
from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import names_diff

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient


def pools_of(
    pools: Sequence[Any] | None = None,
    names: Sequence[str] | None = None,
    pool: str | None = None,
    size: Mapping[str, Any] | None = None,
) -> list[Pool]:
    """The pools of a ``machine_pool`` call: ``pools``, or one pool (named ``pool``) from ``names`` and ``size``."""
    size = size or {}
    if pools is not None:
        if names:
            raise InputError("give names (one pool) or pools, not both")
        out: list[Pool] = []
        for i, each in enumerate(pools):
            if not isinstance(each, dict) or not isinstance(each.get("names"), list):
                raise InputError("pools[%d] must be a mapping with names (a list of VM names), got %r" % (i, each))
            gpu_spec = each.get("gpu") or None
            if gpu_spec is not None and (not isinstance(gpu_spec, dict) or not gpu_spec.get("type")):
                raise InputError("pools[%d].gpu must be a mapping with type and count, got %r" % (i, gpu_spec))
            out.append(_pool(each, each.get("name"), list(each["names"]), gpu_spec))
        return out
    return [_pool(size, pool, list(names or []), None)]


def _pool(size: Mapping[str, Any], name: str | None, names: list[str], gpu_spec: dict[str, Any] | None) -> Pool:
    """A pool, typed: its name, machines' names, their size (``machines.SIZE_KEYS``) and vGPUs; a name the machines'
    markers cannot carry is refused here, before anything is read or created."""
    if name is not None:
        naming.check_pool(name)
    gpu = None
    if gpu_spec is not None:
        gpu = GpuSpec(
            str(gpu_spec["type"]),
            int(gpu_spec.get("count", 1)),
            str(gpu_spec.get("driver_version") or ""),
            gpu_spec.get("profile"),
        )
    return Pool(
        name,
        tuple(names),
        size.get("vcpus"),
        size.get("memory"),
        size.get("image_id"),
        size.get("disk_size"),
        gpu,
    )


def ensure_pool(
    client: WhiteskyClient,
    *,
    cluster: str,
    cloudspace_id: str | None = None,
    cloudspace: str | None = None,
    names: Sequence[str] | None = None,
    pools: Sequence[Any] | None = None,
    exclusive: bool = False,
    sweep: bool = False,
    state: str = "present",
    pool: str | None = None,
    force: bool = False,
    location: str | None = None,
    vcpus: int | None = None,
    memory: int | None = None,
    image_id: int | None = None,
    disk_size: int | None = None,
    first_boot: dict[str, Any] | None = None,
    bootstrap_data: str | None = None,
    parallel: int = 32,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Core of ``machine_pool``: the machines (see ``pools.converge_machines``) of ``pools`` (or of one pool: ``names``
    and the size), then each GPU pool's vGPUs by type (``vgpus.ensure``, per pool), or, in a teardown with
    ``sweep``, every reservation the cluster owns released (``sweep.release_cluster``)."""
    size = dict(vcpus=vcpus, memory=memory, image_id=image_id, disk_size=disk_size)
    wanted = pools_of(pools, names, pool, size)
    markers.check_machine_names(cluster, [n for each in wanted for n in each.names])
    gpu_pools = [(each, each.gpu) for each in wanted if each.gpu and each.names]
    if (gpu_pools or sweep or not cloudspace_id) and not location:
        raise InputError(
            "location is required for the vGPUs of a pool (gpu), for sweep and to find a cloudspace by name"
        )
    boot = Boot(first_boot or {}, bootstrap_data)
    if state == "present" and gpu_pools:  # every pool's type and profile, before any cloudspace or machine is made
        check_gpus(client, known(location, "location"), [g for _each, g in gpu_pools])
    scope = None
    made = False
    if cloudspace_id:
        scope = Scope(cloudspace_id, cluster, location, state, exclusive, force, parallel)
    else:
        # by name: the module requires cloudspace without cloudspace_id, and location was required above
        location, name = known(location, "location"), known(cloudspace, "cloudspace")
        space: Mapping[str, Any] | None = cloudspace_by_name(client, name, location)
        made = space is None and state == "present"
        if made:  # a new cloudspace, the cluster's own (a note on it records that the cluster created it)
            planned = new_cloudspace_plan(wanted, boot)  # checked before it is created: bad input leaves nothing
            require_images(client, location, images_of(wanted))
            if check_mode:
                return planned
            space, made = cloudspaces.claim(client, name, location, cluster)
        if space is not None:
            scope = Scope(space["cloudspace_id"], cluster, location, state, exclusive, force, parallel)
    if scope is None:  # gone with its machines: what the cluster reserved may still bill (sweep)
        result: dict[str, Any] = {"changed": False, "machines": [], "created": [], "deleted": []}
        result["cloudspace_id"] = cloudspace_id
    else:
        result = converge_machines(client, wanted, scope, boot, check_mode)
        result["changed"] = result["changed"] or made
        result["cloudspace_id"] = scope.cloudspace_id
    if state == "present" and gpu_pools:
        # location was required above for a GPU pool; a missing cloudspace was created (state=present)
        scope, location = known(scope, "the cloudspace"), known(location, "location")
        result["reservations"] = []
        for each, gpu_spec in gpu_pools:
            targets = [n for n in each.names if not check_mode or n not in result["created"]]
            done: dict[str, Any] = {"changed": False}
            if targets:
                done = vgpus.ensure(
                    client,
                    location=location,
                    cloudspace_id=scope.cloudspace_id,
                    cluster=cluster,
                    machines=targets,
                    gpu_type=gpu_spec.type,
                    count=gpu_spec.count,
                    profile=gpu_spec.profile,
                    parallel=parallel,
                    check_mode=check_mode,
                )
            result["changed"] = result["changed"] or done["changed"] or bool(len(targets) < len(each.names))
            result["reservations"] += done.get("reservations", [])
    if state == "absent" and sweep:
        _sweep(client, known(location, "location"), cluster, parallel, check_mode, result)
    return result


def _sweep(
    client: WhiteskyClient, location: str, cluster: str, parallel: int, check_mode: bool, result: dict[str, Any]
) -> None:
    """Every reservation the cluster owns released (a teardown's last step); one not released fails the call."""
    swept = release_cluster(client, location=location, cluster=cluster, parallel=parallel, check_mode=check_mode)
    result["changed"] = result["changed"] or swept["changed"]
    result["released"] = swept["released"]


def check_gpus(client: WhiteskyClient, location: str, gpus: Sequence[GpuSpec]) -> None:
    """Refuse a GPU pool whose type the location does not offer, or whose ``profile`` the type does not have there
    (``profiles.type_profiles``, naming the valid ones), on one read of the location's profiles."""
    offered = client.gpu_profiles(location)
    for gpu in gpus:
        type_profiles(offered, gpu.type, location, gpu.profile)


def new_cloudspace_plan(pools: Sequence[Pool], boot: Boot) -> dict[str, Any]:
    """What a call would do in check mode when the cloudspace it names is not there yet: create it and every
    machine (whose sizes and user data are checked); no vGPU can be planned before a machine exists."""
    names = unique_names(pools)
    for pool in pools:
        if pool.names:
            need_size(pool, pool.names)
    pool_user_data(boot, pools)
    result: dict[str, Any] = {"changed": True, "machines": [], "created": names, "deleted": [], "cloudspace_id": None}
    result.update(cloudspace_made=True, diff=names_diff("machine", [], sorted(names)))
    if any(pool.gpu and pool.names for pool in pools):
        result["reservations"] = []
    return result
