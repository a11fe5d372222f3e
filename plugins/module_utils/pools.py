# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster's machines, whole pools per call (pure Python): read once, planned (:func:`plan_machines`, pure), then
created and deleted concurrently (:func:`apply_machines`); the core of ``machine_pool``."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils import cloudspaces, gpu, sweep
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
from ansible_collections.whitesky.capvco.plugins.module_utils.request import Request
from ansible_collections.whitesky.capvco.plugins.module_utils.userdata import pool_user_data
from ansible_collections.whitesky.capvco.plugins.module_utils.vgpu_ops import Ops
from ansible_collections.whitesky.capvco.plugins.module_utils.vms import described, not_owned


def pools_of(p):
    """The pools of a ``machine_pool`` call: ``pools``, or one pool from ``names`` and the size options."""
    if p.get("pools") is not None:
        if p.get("names"):
            raise InputError("give names (one pool) or pools, not both")
        pools = []
        for i, pool in enumerate(p["pools"]):
            if not isinstance(pool, dict) or not isinstance(pool.get("names"), list):
                raise InputError("pools[%d] must be a mapping with names (a list of VM names), got %r" % (i, pool))
            gpu_spec = pool.get("gpu") or None
            if gpu_spec is not None and (not isinstance(gpu_spec, dict) or not gpu_spec.get("type")):
                raise InputError("pools[%d].gpu must be a mapping with type and count, got %r" % (i, gpu_spec))
            pools.append(
                dict(
                    {k: pool.get(k) for k in SIZE_KEYS}, name=pool.get("name"), names=list(pool["names"]), gpu=gpu_spec
                )
            )
        return pools
    return [dict({k: p.get(k) for k in SIZE_KEYS}, name=p.get("pool"), names=list(p.get("names") or []), gpu=None)]


def ensure_pool(req):
    """Core of ``machine_pool``: the machines (see :func:`converge_machines`), then each GPU pool's vGPUs by type
    (the ``vgpu`` core, per pool), or, in a teardown with ``sweep``, every reservation the cluster owns released."""
    p = req.params
    pools = pools_of(p)
    gpu_pools = [pool for pool in pools if pool["gpu"] and pool["names"]]
    if (gpu_pools or p.get("sweep") or not p.get("cloudspace_id")) and not p.get("location"):
        raise InputError(
            "location is required for the vGPUs of a pool (gpu), for sweep and to find a cloudspace by name"
        )
    if p.get("cloudspace_id"):
        result = converge_machines(req, pools)
    else:
        space = cloudspace_by_name(req.client, p["cloudspace"], p["location"])
        made = space is None and p["state"] == "present"
        if made:  # a new cloudspace, the cluster's own (a note on it records that the cluster created it)
            plan = new_cloudspace_plan(pools, p)  # checked before it is created: bad input leaves nothing behind
            if req.check_mode:
                return plan
            space, made = cloudspaces.claim(req.client, p["cloudspace"], p["location"], p["cluster"])
        if space is None:  # gone with its machines: what the cluster reserved may still bill (sweep)
            result = {"changed": False, "machines": [], "created": [], "deleted": [], "cloudspace_id": None}
        else:
            params = dict(p, cloudspace_id=space["cloudspace_id"])
            req = Request(req.client, params, req.check_mode)
            p = req.params
            result = converge_machines(req, pools)
            result["changed"] = result["changed"] or made
    result["cloudspace_id"] = p.get("cloudspace_id")
    if p["state"] == "present" and gpu_pools:
        result["reservations"] = []
        for pool in gpu_pools:
            names = [n for n in pool["names"] if not req.check_mode or n not in result["created"]]
            params = dict(
                location=p["location"],
                cloudspace_id=p["cloudspace_id"],
                cluster=p["cluster"],
                machine=None,
                machines=names,
                type=pool["gpu"]["type"],
                count=int(pool["gpu"].get("count", 1)),
                state="present",
                permanently=True,
                parallel=p["parallel"],
            )
            done = gpu.ensure(Request(req.client, params, req.check_mode)) if names else {"changed": False}
            result["changed"] = result["changed"] or done["changed"] or bool(len(names) < len(pool["names"]))
            result["reservations"] += done.get("reservations", [])
    if p["state"] == "absent" and p.get("sweep"):
        params = dict(location=p["location"], scope="cluster", cluster=p["cluster"], grace_period=0)
        swept = sweep.reclaim(
            Request(req.client, dict(params, permanently=True, parallel=p["parallel"]), req.check_mode)
        )
        result["changed"] = result["changed"] or swept["changed"]
        result["released"] = swept["released"]
        if swept["kept"]:
            raise PartialFailure(
                "%d reservation(s) of cluster %r were not released: %s"
                % (len(swept["kept"]), p["cluster"], ", ".join(k["vgpu_name"] for k in swept["kept"])),
                {"released": swept["released"], "kept": swept["kept"]},
            )
    return result


def unique_names(pools):
    """Every pool's machine names, in order; a name in two places fails, naming it."""
    names = [n for pool in pools for n in pool["names"]]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError("machine names must be unique across the pools; repeated: %s" % ", ".join(dupes))
    return names


def new_cloudspace_plan(pools, p):
    """What a call would do in check mode when the cloudspace it names is not there yet: create it and every
    machine (whose sizes and user data are checked); no vGPU can be planned before a machine exists."""
    names = unique_names(pools)
    for pool in pools:
        if pool["names"]:
            need_size(pool, pool["names"])
    pool_user_data(p, pools)
    result = {"changed": True, "machines": [], "created": names, "deleted": [], "cloudspace_id": None}
    result.update(cloudspace_made=True, diff={"before": [], "after": sorted(names)})
    if any(pool["gpu"] and pool["names"] for pool in pools):
        result["reservations"] = []
    return result


def converge_machines(req, pools, world=None):
    """A cluster's machines, whole pools per call.

    One listing, each VM's description read in parallel; every VM of one of the names must carry the cluster's
    marker, checked for all of them before anything is changed (:func:`plan_machines`, pure).  Then the missing
    machines are created and the ones to go deleted, concurrently (:func:`apply_machines`).  With ``exclusive``, the
    cluster's machines named in no pool go too (a scale-down; with ``state=absent``, every machine the cluster
    owns).  ``world`` holds what a caller read already: ``vms`` (described) and ``inventory``.
    """
    world = world or {}
    p = req.params
    client, cs, cluster = req.client, p["cloudspace_id"], p["cluster"]
    names = unique_names(pools)
    result = {"changed": False, "machines": [], "created": [], "deleted": []}
    if not names and not p.get("exclusive"):
        result["diff"] = {"before": [], "after": []}
        return result
    listing = world["vms"] if "vms" in world else described(client, cs, p["parallel"])
    planned = plan_machines(pools, listing, cluster, p["state"] == "present", p.get("exclusive"))
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
    data = pool_user_data(p, [dict(pool, names=[n for q, n in creates if q is pool]) for pool in pools])
    if deletes:
        need_graceful(p, [v["name"] for v in deletes])
    reservations = {}
    if deletes and not p.get("force"):
        inventory = world.get("inventory") or Inventory(client, p["location"])
        reservations = {v["name"]: inventory.owned(cluster, v["name"]) for v in deletes}
        result["released_vgpus"] = sorted(i["vgpu_name"] for items in reservations.values() for i in items)
    result.update(changed=True, created=[n for _p, n in creates], deleted=[v["name"] for v in deletes])
    if not req.check_mode:
        apply_machines(client, p, pools, planned, data, reservations, result)
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


def apply_machines(client, p, pools, planned, data, reservations, result):
    """Create and delete the planned machines, concurrently; ``result`` says what was done, also on failure."""
    cs, cluster, force = p["cloudspace_id"], p["cluster"], p.get("force")
    creates, deletes = planned["creates"], planned["deletes"]
    ops = None if force else Ops(client, p["location"], cs, permanently=True)
    jobs = {}
    for i, pool in enumerate(pools):  # each pool's user data: a GPU pool's first boot has its driver step
        spec = dict(pool, cluster=cluster, pool=pool["name"])
        for name in [n for q, n in creates if q is pool]:
            jobs[("create", name)] = lambda n=name, spec=spec, d=data[i]: create(client, cs, n, spec, d)
    for vm in deletes:
        jobs[("delete", vm["name"])] = lambda v=vm: delete(client, cs, v, force, ops, reservations.get(v["name"], ()))
    done, errors = run_parallel(jobs, p["parallel"])
    result["created"] = [n for _p, n in creates if ("create", n) in done]
    result["deleted"] = [v["name"] for v in deletes if ("delete", v["name"]) in done]
    if p["state"] == "present":
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
