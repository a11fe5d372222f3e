# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster's machines, whole pools per call (pure Python): read once, planned (:func:`plan_machines`, pure), then
created and deleted concurrently (:func:`apply_machines`); the core of ``machine_pool``."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ansible_collections.whitesky.capvco.plugins.module_utils import cloudspaces, gpu
from ansible_collections.whitesky.capvco.plugins.module_utils.cloudspaces import cloudspace_by_name
from ansible_collections.whitesky.capvco.plugins.module_utils.errors import InputError, PartialFailure
from ansible_collections.whitesky.capvco.plugins.module_utils.inventory import Inventory
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import (
    SIZE_KEYS,
    create,
    delete,
    need_graceful,
    need_size,
    size_warning,
    vm_view,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.parallel import run_parallel
from ansible_collections.whitesky.capvco.plugins.module_utils.sweep import reclaim as reclaim_vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.userdata import Boot, pool_user_data
from ansible_collections.whitesky.capvco.plugins.module_utils.vgpu_ops import Ops
from ansible_collections.whitesky.capvco.plugins.module_utils.vms import described, not_owned


@dataclass(frozen=True)
class Scope:
    """The machines a converge may touch, and how: the cloudspace and the cluster that must own them, the location
    of their vGPUs, ``present`` or ``absent``, whether the cluster's machines named in no pool go too
    (``exclusive``), whether deletes skip the graceful release (``force``), and how many machines at once."""

    cloudspace_id: str
    cluster: str
    location: str | None = None
    state: str = "present"
    exclusive: bool = False
    force: bool = False
    parallel: int = 32


def pools_of(pools=None, names=None, pool=None, size=None):
    """The pools of a ``machine_pool`` call: ``pools``, or one pool (named ``pool``) from ``names`` and ``size``."""
    size = size or {}
    if pools is not None:
        if names:
            raise InputError("give names (one pool) or pools, not both")
        out = []
        for i, each in enumerate(pools):
            if not isinstance(each, dict) or not isinstance(each.get("names"), list):
                raise InputError("pools[%d] must be a mapping with names (a list of VM names), got %r" % (i, each))
            gpu_spec = each.get("gpu") or None
            if gpu_spec is not None and (not isinstance(gpu_spec, dict) or not gpu_spec.get("type")):
                raise InputError("pools[%d].gpu must be a mapping with type and count, got %r" % (i, gpu_spec))
            out.append(
                dict(
                    {k: each.get(k) for k in SIZE_KEYS}, name=each.get("name"), names=list(each["names"]), gpu=gpu_spec
                )
            )
        return out
    return [dict({k: size.get(k) for k in SIZE_KEYS}, name=pool, names=list(names or []), gpu=None)]


def ensure_pool(
    client,
    *,
    cluster,
    cloudspace_id=None,
    cloudspace=None,
    names=None,
    pools=None,
    exclusive=False,
    sweep=False,
    state="present",
    pool=None,
    force=False,
    location=None,
    vcpus=None,
    memory=None,
    image_id=None,
    disk_size=None,
    first_boot=None,
    bootstrap_data=None,
    parallel=32,
    check_mode=False,
):
    """Core of ``machine_pool``: the machines (see :func:`converge_machines`) of ``pools`` (or of one pool: ``names``
    and the size), then each GPU pool's vGPUs by type (:func:`gpu.ensure`, per pool), or, in a teardown with
    ``sweep``, every reservation the cluster owns released (:func:`sweep.reclaim`)."""
    size = dict(vcpus=vcpus, memory=memory, image_id=image_id, disk_size=disk_size)
    wanted = pools_of(pools, names, pool, size)
    gpu_pools = [each for each in wanted if each["gpu"] and each["names"]]
    if (gpu_pools or sweep or not cloudspace_id) and not location:
        raise InputError(
            "location is required for the vGPUs of a pool (gpu), for sweep and to find a cloudspace by name"
        )
    boot = Boot(first_boot or {}, bootstrap_data)
    scope = Scope(cloudspace_id, cluster, location, state, exclusive, force, parallel)
    if cloudspace_id:
        result = converge_machines(client, wanted, scope, boot, check_mode)
    else:
        space = cloudspace_by_name(client, cloudspace, location)
        made = space is None and state == "present"
        if made:  # a new cloudspace, the cluster's own (a note on it records that the cluster created it)
            planned = new_cloudspace_plan(wanted, boot)  # checked before it is created: bad input leaves nothing
            if check_mode:
                return planned
            space, made = cloudspaces.claim(client, cloudspace, location, cluster)
        if space is None:  # gone with its machines: what the cluster reserved may still bill (sweep)
            result = {"changed": False, "machines": [], "created": [], "deleted": [], "cloudspace_id": None}
        else:
            scope = replace(scope, cloudspace_id=space["cloudspace_id"])
            result = converge_machines(client, wanted, scope, boot, check_mode)
            result["changed"] = result["changed"] or made
    result["cloudspace_id"] = scope.cloudspace_id
    if state == "present" and gpu_pools:
        result["reservations"] = []
        for each in gpu_pools:
            targets = [n for n in each["names"] if not check_mode or n not in result["created"]]
            done = {"changed": False}
            if targets:
                done = gpu.ensure(
                    client,
                    location=location,
                    cloudspace_id=scope.cloudspace_id,
                    cluster=cluster,
                    machines=targets,
                    gpu_type=each["gpu"]["type"],
                    count=int(each["gpu"].get("count", 1)),
                    parallel=parallel,
                    check_mode=check_mode,
                )
            result["changed"] = result["changed"] or done["changed"] or bool(len(targets) < len(each["names"]))
            result["reservations"] += done.get("reservations", [])
    if state == "absent" and sweep:
        _sweep(client, location, cluster, parallel, check_mode, result)
    return result


def _sweep(client, location, cluster, parallel, check_mode, result):
    """Every reservation the cluster owns released (a teardown's last step); one not released fails the call."""
    swept = reclaim_vgpus(
        client,
        location=location,
        scope="cluster",
        cluster=cluster,
        grace_period=0,
        parallel=parallel,
        check_mode=check_mode,
    )
    result["changed"] = result["changed"] or swept["changed"]
    result["released"] = swept["released"]
    if swept["kept"]:
        raise PartialFailure(
            "%d reservation(s) of cluster %r were not released: %s"
            % (len(swept["kept"]), cluster, ", ".join(k["vgpu_name"] for k in swept["kept"])),
            {"released": swept["released"], "kept": swept["kept"]},
        )


def unique_names(pools):
    """Every pool's machine names, in order; a name in two places fails, naming it."""
    names = [n for pool in pools for n in pool["names"]]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError("machine names must be unique across the pools; repeated: %s" % ", ".join(dupes))
    return names


def new_cloudspace_plan(pools, boot):
    """What a call would do in check mode when the cloudspace it names is not there yet: create it and every
    machine (whose sizes and user data are checked); no vGPU can be planned before a machine exists."""
    names = unique_names(pools)
    for pool in pools:
        if pool["names"]:
            need_size(pool, pool["names"])
    pool_user_data(boot, pools)
    result = {"changed": True, "machines": [], "created": names, "deleted": [], "cloudspace_id": None}
    result.update(cloudspace_made=True, diff={"before": [], "after": sorted(names)})
    if any(pool["gpu"] and pool["names"] for pool in pools):
        result["reservations"] = []
    return result


def converge_machines(client, pools, scope, boot=None, check_mode=False, world=None):
    """A cluster's machines, whole pools per call, within ``scope`` (:class:`Scope`); new ones boot with ``boot``.

    One listing, each VM's description read in parallel; every VM of one of the names must carry the cluster's
    marker, checked for all of them before anything is changed (:func:`plan_machines`, pure).  Then the missing
    machines are created and the ones to go deleted, concurrently (:func:`apply_machines`).  With ``exclusive``, the
    cluster's machines named in no pool go too (a scale-down; with ``state=absent``, every machine the cluster
    owns).  ``world`` holds what a caller read already: ``vms`` (described) and ``inventory``.
    """
    world = world or {}
    cs, cluster = scope.cloudspace_id, scope.cluster
    names = unique_names(pools)
    result = {"changed": False, "machines": [], "created": [], "deleted": []}
    if not names and not scope.exclusive:
        result["diff"] = {"before": [], "after": []}
        return result
    listing = world["vms"] if "vms" in world else described(client, cs, scope.parallel)
    planned = plan_machines(pools, listing, cluster, scope.state == "present", scope.exclusive)
    creates, deletes = planned["creates"], planned["deletes"]
    result.update(machines=[vm_view(v) for v in planned["listed"]], diff=planned["diff"])
    if planned["warnings"]:
        result["warnings"] = planned["warnings"]
    if not creates and not deletes:
        return result
    for pool in pools:
        missing = [n for q, n in creates if q is pool]
        if missing:
            need_size(pool, missing)
    data = pool_user_data(boot or Boot(), [dict(pool, names=[n for q, n in creates if q is pool]) for pool in pools])
    if deletes:
        need_graceful(scope.force, cluster, scope.location, [v["name"] for v in deletes])
    reservations = {}
    if deletes and not scope.force:
        inventory = world.get("inventory") or Inventory(client, scope.location)
        reservations = {v["name"]: inventory.owned(cluster, v["name"]) for v in deletes}
        result["released_vgpus"] = sorted(i["vgpu_name"] for items in reservations.values() for i in items)
    result.update(changed=True, created=[n for _p, n in creates], deleted=[v["name"] for v in deletes])
    if not check_mode:
        apply_machines(client, scope, pools, planned, data, reservations, result)
    return result


def plan_machines(pools, listing, cluster, present, exclusive):
    """What converging the pools changes, from the cloudspace's VMs with their owners (pure): ``creates`` (pool,
    name), ``deletes`` and ``listed`` (VMs), the ``diff`` of the cluster's machine names and size ``warnings``.  A
    planned name that a VM the cluster does not own holds is refused."""
    names = [n for pool in pools for n in pool["names"]]
    by_name = {v["name"]: v for v in listing}
    foreign = [by_name[n] for n in names if n in by_name and by_name[n]["owner"] != cluster]
    if foreign:
        raise InputError(
            "; ".join(str(not_owned(v["name"], cluster, v.get("description"))) for v in foreign)
            + "; nothing was changed"
        )
    owned = sorted((v for v in by_name.values() if v["owner"] == cluster), key=lambda v: v["name"])
    creates, listed = [], [by_name[n] for n in names if n in by_name]
    if present:
        creates = [(pool, n) for pool in pools for n in pool["names"] if n not in by_name]
        deletes = [v for v in owned if v["name"] not in names] if exclusive else []
    else:
        deletes = owned if exclusive else listed
        listed = deletes
    before = [v["name"] for v in owned]
    gone = {v["name"] for v in deletes}
    after = sorted({n for n in before if n not in gone} | {n for _p, n in creates})
    warnings = []
    if present:
        warnings = [
            w for pool in pools for w in (size_warning(by_name[n], pool) for n in pool["names"] if n in by_name)
        ]
    return {
        "creates": creates,
        "deletes": deletes,
        "listed": listed,
        "diff": {"before": before, "after": after},
        "warnings": [w for w in warnings if w],
    }


def apply_machines(client, scope, pools, planned, data, reservations, result):
    """Create and delete the planned machines, concurrently; ``result`` says what was done, also on failure."""
    cs, cluster, force = scope.cloudspace_id, scope.cluster, scope.force
    creates, deletes = planned["creates"], planned["deletes"]
    ops = None if force else Ops(client, scope.location, cs, permanently=True)
    jobs = {}
    for i, pool in enumerate(pools):  # each pool's user data: a GPU pool's first boot has its driver step
        spec = dict(pool, cluster=cluster, pool=pool["name"])
        for name in [n for q, n in creates if q is pool]:
            jobs[("create", name)] = lambda n=name, spec=spec, d=data[i]: create(client, cs, n, spec, d)
    for vm in deletes:
        jobs[("delete", vm["name"])] = lambda v=vm: delete(client, cs, v, force, ops, reservations.get(v["name"], ()))
    done, errors = run_parallel(jobs, scope.parallel)
    result["created"] = [n for _p, n in creates if ("create", n) in done]
    result["deleted"] = [v["name"] for v in deletes if ("delete", v["name"]) in done]
    if scope.state == "present":
        result["machines"] += [done[("create", n)] for _p, n in creates if ("create", n) in done]
    if errors:
        raise PartialFailure(
            "%d machine(s) did not converge: %s"
            % (len(errors), "; ".join("%s %s: %s" % (what, n, e) for (what, n), e in sorted(errors.items()))),
            {
                "created": result["created"],
                "deleted": result["deleted"],
                "failed_machines": sorted(n for _what, n in errors),
            },
        )
