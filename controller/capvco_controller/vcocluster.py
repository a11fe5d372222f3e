"""A VCOCluster's reconcile and finalizer, by Cluster API's contract for infrastructure clusters ("Contract rules
for InfraCluster", v1beta2: https://cluster-api.sigs.k8s.io/developer/providers/contracts/infra-cluster).

It waits for the owner Cluster, claims the cluster's name as the owner of its vGPU reservations in the location
(once per location: the terminal ``ClusterNameInUse`` otherwise), makes sure the cloudspace exists (one it creates
is the cluster's by a note on it), sets ``status.initialization.provisioned`` (the controller makes no endpoint:
``spec.controlPlaneEndpoint`` is the user's, as the contract allows when it is "provided by other means"), records
the orphan check: reservations the cluster owns whose machine is gone, past the grace period, as
``GPUReservationsClean``, ``status.gpu`` and a Warning Event; and then deploys the SR-IOV add-on when labelled (an
add-on that fails does not keep the orphan check from being recorded).  The drift pass runs the orphan check of
every cluster of a location every period and hands its report here; an event-driven reconcile makes its own.  Each
reconcile writes its status once, at its end (``scope.Scope``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import conditions as conds
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.machine import vm_view
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError, missing_is_none
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import report
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import marker_view
from capvco_controller import addon, identity, objects
from capvco_controller.context import DONE, Context, Result, Retry
from capvco_controller.kube import VCOCLUSTER
from capvco_controller.objects import VCOCluster, VCOMachine
from capvco_controller.scope import Scope

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import VM

log = logging.getLogger(__name__)
KIND = "VCOCluster"
MESSAGE_LIMIT = 4096
#: How long a drift pass's orphan report stands in for the reconcile's own read.
REPORT_FRESH = 120.0
CLOUDSPACE = "CloudspaceReady"
CLEAN = "GPUReservationsClean"
#: What the cluster's ``Ready`` summarises: its cloudspace (the orphan check and the add-on are reported beside).
SUMMARY = (CLOUDSPACE,)
#: When a VCOCluster whose identity cannot be used is looked at again (the controller watches no Secret).
IDENTITY_RETRY = 30.0


def orphan_report(ctx: Context, c: VCOCluster, cs_id: str) -> dict[str, Any]:
    """The cluster's orphans past its grace period, with their cost per hour when all of them are (the platform's
    figures), as ``vgpu_info orphans_only=true with_cost=true`` gives them; and the VMs of its cloudspace that carry
    its marker and no VCOMachine accounts for (:func:`unaccounted_vms`)."""
    client = ctx.client()
    got = report.info(client, location=c.location, cluster=c.cluster, orphans_only=True, with_cost=True)
    rows = list(got.get("reservations") or [])
    late = [r for r in rows if int(r.get("age") or 0) >= c.grace]
    return {
        "reservations": late,
        "cost_per_hour": got.get("cost_per_hour") if len(late) == len(rows) else None,
        "currency": got.get("currency"),
        "vms": unaccounted_vms(
            client, c, cs_id, client.vms(cs_id), accounted(ctx).get((c.namespace, c.cluster), set())
        ),
    }


def accounted(ctx: Context) -> dict[tuple[str, str], set[str]]:
    """``{(namespace, cluster): names}`` of the VMs the VCOMachines account for (their recorded or would-be VM
    names; a machine whose VM is being made is among them, since it was in the cache before its VM was made)."""
    names: dict[tuple[str, str], set[str]] = {}
    for obj in ctx.items("VCOMachine"):
        m = VCOMachine.read(obj)
        names.setdefault((m.namespace, m.cluster), set()).add(m.vm_name)
    return names


def unaccounted_vms(
    client: WhiteskyClient, c: VCOCluster, cs_id: str, vms: Iterable[VM], known: Collection[str]
) -> list[dict[str, Any]]:
    """The live VMs of the cluster's cloudspace that carry its marker and that no VCOMachine of the cluster
    (``known``: their VM names) accounts for, nor a pool (a marker that names a pool is a playbook's cluster pool):
    each with its vGPUs and their price per hour (the location's vGPU price; absent when unknown, never 0).  The
    marker is read (``getVirtualMachineInfo``, now) only for the VMs whose names may be the cluster's and that no
    machine accounts for: none, in the steady state."""
    candidates = [v for v in vms if markers.may_own(c.cluster, v.get("name")) and v.get("name") not in known]
    rows: list[dict[str, Any]] = []
    per_hour: tuple[float | None, str | None] | None = None
    for vm in candidates:
        full = missing_is_none(client.get_vm, cs_id, vm["vm_id"])  # now, not a marker read before: it may be gone
        got = marker_view(full.get("description")) if full is not None else None
        if got is None or got["owner"] != c.cluster or got["pool"]:
            continue
        vgpus = sorted(str(g) for g in vm_view(vm)["vgpus"])
        row: dict[str, Any] = {"name": vm["name"], "vmID": vm["vm_id"], "cloudspaceID": cs_id, "vgpus": len(vgpus)}
        if vgpus:
            if per_hour is None:
                price = client.prices(c.location)
                per_hour = (billing.price_per_hour(price), billing.currency_of(price))
            cost = billing.times(len(vgpus), per_hour[0])
            if cost is not None:
                row["costPerHour"] = ("%s %s" % (cost, per_hour[1] or "")).strip()
        rows.append(row)
    return rows


def orphan_update(c: VCOCluster, report: dict[str, Any]) -> dict[str, Any]:
    """The status write of an orphan report (pure): ``status.gpu``, ``GPUReservationsClean``, and an Event (a
    Warning while there are orphans, on every pass; one when they are gone)."""
    late = list(report.get("reservations") or [])
    vms = list(report.get("vms") or [])
    was_dirty = objects.condition({"status": c.status}, CLEAN).get("status") == "False"
    said = []
    if late:
        names = ", ".join(str(r.get("vgpu_name")) for r in late)
        said.append(
            "%d orphaned vGPU reservation(s) still billed: %s; release them with whitesky.capvco.gpu_orphans "
            "-e reclaim=true" % (len(late), names)
        )
    if vms:
        said.append(
            "%d VM(s) carry the cluster's marker but no VCOMachine of it accounts for them, billed: %s; delete them "
            "with whitesky.capvco.machine_delete"
            % (
                len(vms),
                ", ".join(
                    "%s (%s, %d vGPU(s)%s)"
                    % (v["name"], v["vmID"], v["vgpus"], ", " + v["costPerHour"] if v.get("costPerHour") else "")
                    for v in vms
                ),
            )
        )
    message = "; ".join(said) or "no orphaned vGPU reservations, and no VM without its VCOMachine"
    orphans: dict[str, Any] = {"reservations": late}
    if report.get("cost_per_hour") is not None:
        orphans["cost_per_hour"] = report["cost_per_hour"]
    if report.get("currency"):
        orphans["currency"] = report["currency"]
    dirty = bool(late or vms)
    reason = "OrphansFound" if late else "UnaccountedVMs" if vms else "NoOrphans"
    cond = conds.false(CLEAN, reason, message, "Warning") if dirty else conds.true(CLEAN, reason, message)
    event = None
    if dirty:
        event = {"type": "Warning", "reason": "GPUOrphansFound", "message": message}
    elif was_dirty:
        event = {"reason": "GPUOrphansCleared", "message": message}
    update: dict[str, Any] = {"gpu_orphans": orphans, "conditions": [cond], "event": event}
    if "vms" in report:
        update["status"] = {"gpu": {"unaccountedVMs": vms}}
    return update


def record_orphans(scope: Scope, update: dict[str, Any]) -> None:
    """An orphan report's update (:func:`orphan_update`) in the reconcile's write."""
    scope.condition(*update["conditions"])
    scope.orphans = update["gpu_orphans"]
    if update.get("status"):
        scope.set(**update["status"])
    event = update.get("event")
    if event:
        scope.event(event["reason"], event["message"], warning=event.get("type") == "Warning")


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
        if objects.CLUSTER_FINALIZER not in c.finalizers or not c.gpu_owner:
            return finalize(ctx, obj, c)
        try:
            with ctx.using(c):
                return finalize(ctx, obj, c)
        except identity.IdentityError as exc:
            with Scope(ctx, KIND, obj, SUMMARY) as scope:
                refuse_identity(scope, exc)
            raise Retry(str(exc)) from None
    if objects.CLUSTER_FINALIZER not in c.finalizers:
        ctx.set_finalizers(VCOCLUSTER, obj, c.finalizers + [objects.CLUSTER_FINALIZER])
    if c.failure:
        return DONE
    with Scope(ctx, KIND, obj, SUMMARY) as scope:
        try:
            with ctx.using(c):
                if ref_of(c) is not None:
                    scope.condition(conds.true(identity.CONDITION, "IdentityReady", "using the %s" % ref_of(c)))
                elif objects.condition({"status": c.status}, identity.CONDITION):  # one said before: say it is fine
                    own = "using the controller's own credential"
                    scope.condition(conds.true(identity.CONDITION, "IdentityReady", own))
                return provision(ctx, scope, key, c)
        except identity.IdentityError as exc:
            refuse_identity(scope, exc)
            return Result(requeue_after=IDENTITY_RETRY)


def ref_of(c: VCOCluster) -> identity.Ref | None:
    return identity.Ref.of(c.spec, c.namespace)


def refuse_identity(scope: Scope, exc: identity.IdentityError) -> None:
    """A VCOCluster naming an identity it may not use: ``IdentityReady`` False (and ``CloudspaceReady``, which
    ``Ready`` summarises), a Warning Event; nothing is done on the platform, and its machines wait."""
    message = str(exc)
    scope.condition(conds.false(identity.CONDITION, exc.reason, message, "Error"))
    scope.condition(conds.false(CLOUDSPACE, exc.reason, message, "Error"))
    scope.event(exc.reason, message, warning=True)


def provision(ctx: Context, scope: Scope, key: tuple[str, str, str], c: VCOCluster) -> Result:
    """The owner Cluster's infrastructure: the name claimed, the cloudspace, the orphan check, the add-on."""
    if not c.cluster:
        waiting = "no Cluster API Cluster owns this VCOCluster yet"
        scope.condition(conds.false(CLOUDSPACE, "WaitingForOwnerCluster", waiting, "Info"))
        return DONE
    capi = ctx.cached("Cluster", c.namespace, c.cluster)
    if objects.cluster_paused(capi, c.annotations):
        scope.condition(conds.true("Paused", "Paused", "Cluster %s or this VCOCluster is paused" % c.cluster))
        return DONE
    scope.condition(conds.make("Paused", "False", "NotPaused"))
    if not c.endpoint and not objects.endpoint(capi):
        # the contract's rule for a provider that makes no endpoint: wait for the Cluster's ("InfraCluster: control
        # plane endpoint"); one the user gives the VCOCluster is its spec's before it says provisioned
        waiting = (
            "no control plane endpoint yet: set the VCOCluster's spec.controlPlaneEndpoint (the controller makes no "
            "load balancer), or Cluster %s's" % c.cluster
        )
        scope.condition(conds.false(CLOUDSPACE, "WaitingForControlPlaneEndpoint", waiting, "Info"))
        return DONE
    if not c.gpu_owner:
        taken = rivals(ctx, c)
        if taken:
            message = (
                "a cluster named %s in namespace %s already owns vGPU reservations in %s; cluster names must be "
                "unique per location, since they are the owner encoded in the reservation names"
                % (c.cluster, ", ".join(taken), c.location)
            )
            scope.provisioned(False)
            scope.terminal("ClusterNameInUse", message)
            scope.condition(conds.false(CLOUDSPACE, "ClusterNameInUse", message, "Error"))
            scope.event("ClusterNameInUse", message, warning=True)
            return DONE
    client = ctx.client()
    try:
        cs = cloudspaces.ensure(client, name=c.cloudspace, location=c.location, cluster=c.cluster)
    except WhiteskyError as exc:
        message = ctx.say(exc, MESSAGE_LIMIT)
        scope.condition(conds.false(CLOUDSPACE, "ReconcileFailed", message, "Error"))
        scope.event("ReconcileFailed", "the cluster's cloudspace: " + message, warning=True)
        raise Retry(message) from None
    cs_id = str(cs["cloudspace"]["cloudspace_id"])
    scope.provisioned(True)  # the contract's "initialization completed": the cloudspace exists
    scope.set(cloudspaceID=cs_id, gpuOwner=c.cluster, identity=identity.recorded(ref_of(c)) or None)
    where = "cloudspace %s (%s) in %s" % (c.cloudspace, cs_id, c.location)
    scope.condition(conds.true(CLOUDSPACE, "Ready", where))
    if cs.get("changed"):
        scope.event("CloudspaceCreated", "created cloudspace " + c.cloudspace)
    report = ctx.reports.pop(key, None)
    if report is None or time.monotonic() - float(report.get("at", 0)) > REPORT_FRESH:
        report = orphan_report(ctx, c, cs_id)
    record_orphans(scope, orphan_update(c, report))
    if c.sriov_enabled:
        addon.ensure(ctx, scope, key, c, cs_id)
    return DONE


def finalize(ctx: Context, obj: dict[str, Any], c: VCOCluster) -> Result:
    """Sweep every reservation the cluster owns (those of machines deleted by force included), delete what is left
    of its VMs (those carrying its marker), and the cloudspace when a note records the cluster as its creator and
    nothing else is left in it; then drop the finalizer.  A cluster that never claimed its name owns nothing."""
    if objects.CLUSTER_FINALIZER not in c.finalizers:
        return DONE
    if c.gpu_owner:
        spec = {"cluster": {"name": c.gpu_owner, "location": c.location, "cloudspace": c.cloudspace}}
        scope = Scope(ctx, KIND, obj, SUMMARY)
        ctx.teardown(scope, "cluster " + c.gpu_owner, spec=spec, force=True, delete_cloudspace=True)
    ctx.set_finalizers(VCOCLUSTER, obj, [f for f in c.finalizers if f != objects.CLUSTER_FINALIZER])
    ctx.addons.pop((KIND, c.namespace, c.name), None)
    return DONE
