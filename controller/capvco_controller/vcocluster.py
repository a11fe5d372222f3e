"""A VCOCluster's reconcile and finalizer, by Cluster API's contract for infrastructure clusters.

It waits for the owner Cluster, claims the cluster's name as the owner of its vGPU reservations in the location
(once per location: ``ClusterNameInUse`` otherwise), makes sure the cloudspace exists (one it creates is the
cluster's by a note on it), sets ``status.ready``, records the orphan check: reservations the cluster owns whose
machine is gone, past the grace period, as ``GPUReservationsClean``, ``status.gpu`` and a Warning Event; and then
deploys the SR-IOV add-on when labelled (an add-on that fails does not keep the orphan check from being recorded).
The drift pass runs the orphan check of every cluster of a location every period and hands its report here; an
event-driven reconcile makes its own.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import sweep
from capvco_controller import addon, objects
from capvco_controller.context import DONE, Context, Result, Retry
from capvco_controller.kube import VCOCLUSTER
from capvco_controller.objects import VCOCluster

log = logging.getLogger(__name__)
KIND = "VCOCluster"
MESSAGE_LIMIT = 4096
#: How long a drift pass's orphan report stands in for the reconcile's own read.
REPORT_FRESH = 120.0


def orphan_report(ctx: Context, c: VCOCluster) -> dict[str, Any]:
    """The cluster's orphans past its grace period, with their cost per hour when all of them are (the platform's
    figures), as ``vgpu_info orphans_only=true with_cost=true`` gives them."""
    got = sweep.info(ctx.client(), location=c.location, cluster=c.cluster, orphans_only=True, with_cost=True)
    rows = list(got.get("reservations") or [])
    late = [r for r in rows if int(r.get("age") or 0) >= c.grace]
    return {
        "reservations": late,
        "cost_per_hour": got.get("cost_per_hour") if len(late) == len(rows) else None,
        "currency": got.get("currency"),
    }


def orphan_update(c: VCOCluster, report: dict[str, Any]) -> dict[str, Any]:
    """The status write of an orphan report (pure): ``status.gpu``, ``GPUReservationsClean``, and an Event (a
    Warning while there are orphans, on every pass; one when they are gone)."""
    late = list(report.get("reservations") or [])
    was_dirty = objects.condition({"status": c.status}, "GPUReservationsClean").get("status") == "False"
    if late:
        names = ", ".join(str(r.get("vgpu_name")) for r in late)
        message = (
            "%d orphaned vGPU reservation(s) still billed: %s; release them with whitesky.capvco.gpu_orphans "
            "-e reclaim=true" % (len(late), names)
        )
    else:
        message = "no orphaned vGPU reservations"
    orphans: dict[str, Any] = {"reservations": late}
    if report.get("cost_per_hour") is not None:
        orphans["cost_per_hour"] = report["cost_per_hour"]
    if report.get("currency"):
        orphans["currency"] = report["currency"]
    cond: dict[str, Any] = {
        "type": "GPUReservationsClean",
        "status": "False" if late else "True",
        "reason": "OrphansFound" if late else "NoOrphans",
        "message": message,
    }
    if late:
        cond["severity"] = "Warning"
    event = None
    if late:
        event = {"type": "Warning", "reason": "GPUOrphansFound", "message": message}
    elif was_dirty:
        event = {"reason": "GPUOrphansCleared", "message": message}
    return {"gpu_orphans": orphans, "conditions": [cond], "event": event}


def cloudspace_condition(status: str, reason: str, message: str, severity: str | None = None) -> dict[str, str]:
    cond = {"type": "CloudspaceReady", "status": status, "reason": reason, "message": message}
    if severity:
        cond["severity"] = severity
    return cond


def failed(ctx: Context, obj: dict[str, Any], reason: str, message: str) -> Result:
    """A terminal failure: recorded, and the reconcile stops."""
    ctx.status(
        KIND,
        obj,
        status={"ready": False, "failureReason": reason, "failureMessage": message},
        conditions=[cloudspace_condition("False", reason, message, "Error")],
        event={"type": "Warning", "reason": reason, "message": message},
    )
    return DONE


def rivals(ctx: Context, c: VCOCluster) -> list[str]:
    """The namespaces of other VCOClusters that own reservations under this cluster's name in its location."""
    out = []
    for other_obj in ctx.items(KIND):
        other = VCOCluster.read(other_obj)
        if other.uid != c.uid and other.location == c.location and other.gpu_owner == c.cluster:
            out.append(other.namespace)
    return sorted(out)


def reconcile(ctx: Context, obj: dict[str, Any]) -> Result:
    key = (KIND, str(obj["metadata"].get("namespace")), str(obj["metadata"].get("name")))
    obj = ctx.fresh(KIND, obj)
    c = VCOCluster.read(obj)
    if c.deleting:
        return finalize(ctx, obj, c)
    if objects.CLUSTER_FINALIZER not in c.finalizers:
        ctx.set_finalizers(VCOCLUSTER, obj, c.finalizers + [objects.CLUSTER_FINALIZER])
    if c.failure:
        return DONE
    if not c.cluster:
        ctx.status(
            KIND,
            obj,
            conditions=[
                cloudspace_condition(
                    "False", "WaitingForOwnerCluster", "no Cluster API Cluster owns this VCOCluster yet", "Info"
                )
            ],
        )
        return DONE
    capi = ctx.cached("Cluster", c.namespace, c.cluster)
    if objects.cluster_paused(capi, c.annotations):
        return DONE
    if not c.gpu_owner:
        taken = rivals(ctx, c)
        if taken:
            return failed(
                ctx,
                obj,
                "ClusterNameInUse",
                "a cluster named %s in namespace %s already owns vGPU reservations in %s; cluster names must be "
                "unique per location, since they are the owner encoded in the reservation names"
                % (c.cluster, ", ".join(taken), c.location),
            )
    client = ctx.client()
    try:
        cs = cloudspaces.ensure(client, name=c.cloudspace, location=c.location, cluster=c.cluster)
    except WhiteskyError as exc:
        message = ctx.say(exc, MESSAGE_LIMIT)
        ctx.status(
            KIND,
            obj,
            conditions=[cloudspace_condition("False", "ReconcileFailed", message, "Error")],
            event={"type": "Warning", "reason": "ReconcileFailed", "message": "the cluster's cloudspace: " + message},
        )
        raise Retry(message) from None
    cs_id = str(cs["cloudspace"]["cloudspace_id"])
    ctx.status(
        KIND,
        obj,
        status={"ready": True, "cloudspaceID": cs_id, "gpuOwner": c.cluster},
        conditions=[
            cloudspace_condition("True", "Ready", "cloudspace %s (%s) in %s" % (c.cloudspace, cs_id, c.location))
        ],
        event={"reason": "CloudspaceCreated", "message": "created cloudspace " + c.cloudspace}
        if cs.get("changed")
        else None,
    )
    report = ctx.reports.pop(key, None)
    if report is None or time.monotonic() - float(report.get("at", 0)) > REPORT_FRESH:
        report = orphan_report(ctx, c)
    ctx.status(KIND, obj, **orphan_update(c, report))
    if c.sriov_enabled:
        addon.ensure(ctx, key, obj, c, cs_id)
    return DONE


def finalize(ctx: Context, obj: dict[str, Any], c: VCOCluster) -> Result:
    """Sweep every reservation the cluster owns (those of machines deleted by force included), delete what is left
    of its VMs (those carrying its marker), and the cloudspace when a note records the cluster as its creator and
    nothing else is left in it; then drop the finalizer.  A cluster that never claimed its name owns nothing."""
    if objects.CLUSTER_FINALIZER not in c.finalizers:
        return DONE
    if c.gpu_owner:
        spec = {"cluster": {"name": c.gpu_owner, "location": c.location, "cloudspace": c.cloudspace}}
        ctx.teardown(KIND, obj, "cluster " + c.gpu_owner, spec=spec, force=True, delete_cloudspace=True)
    ctx.set_finalizers(VCOCLUSTER, obj, [f for f in c.finalizers if f != objects.CLUSTER_FINALIZER])
    ctx.addons.pop((KIND, c.namespace, c.name), None)
    return DONE
