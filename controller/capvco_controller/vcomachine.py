"""A VCOMachine's reconcile and finalizer, by Cluster API's contract for infrastructure machines.

It waits for the cluster label, the owner Machine, the Cluster and its ready VCOCluster, and the bootstrap data;
creates the VM with the retried first boot wrapped around that data; reserves and attaches the vGPUs by type (each
reservation names its owner the moment it exists); sets ``spec.providerID`` and ``status.ready``; and records
``GPUDriverReady`` from what the first boot reports.  A terminal error goes to ``status.failureReason``; so does a
VM lost behind the controller's back, which is never made again (:func:`lost`).  The
platform work is the collection's core (``machines.machine.ensure``, ``gpu.vgpus.ensure``,
``firstboot.status.info``, ``cluster.run.run`` for the deletion), the same the modules call.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import status as first_boot
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot.errors import MachineNotFound
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import machine as machines
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import release, report
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.orphans import OrphanCheck, machines_in_location
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import Inventory, attached_to, owner_of
from capvco_controller import objects, precheck
from capvco_controller.context import DONE, Context, Result, Retry
from capvco_controller.kube import VCOMACHINE
from capvco_controller.objects import VCOMachine

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

log = logging.getLogger(__name__)
KIND = "VCOMachine"
MESSAGE_LIMIT = 4096
#: ``failureReason`` of a machine whose VM was lost: Cluster API's ``UpdateError`` (capierrors.UpdateMachineError,
#: what other providers report for an instance deleted behind their back); the conditions say ``VMDeleted``.
VM_DELETED_FAILURE = "UpdateError"


def provider_id(location: str, cloudspace_id: str, vm_name: str) -> str:
    return "whitesky://%s/%s/%s" % (location, cloudspace_id, vm_name)


def converged(m: VCOMachine, seen: list[dict[str, Any]], provider: str) -> bool:
    """Whether the VM, read by the id the status records, and its vGPUs are what the status records (pure)."""
    recorded = m.recorded
    return (
        len(seen) == 1
        and sorted(str(v) for v in seen[0].get("vgpus") or []) == sorted(str(r.get("vgpuID")) for r in recorded)
        and len(recorded) == m.gpu_count
        and all(r.get("attached") is True for r in recorded)
        and m.provider_id == provider
    )


def first_boot_options(m: VCOMachine) -> dict[str, Any]:
    """The machine's first boot: its packages and attempts, and for a GPU machine the pinned driver step."""
    given = m.spec.get("firstBoot")
    given = given if isinstance(given, dict) else {}
    out: dict[str, Any] = {"packages": list(given.get("packages") or []), "attempts": int(given.get("attempts", 5))}
    if m.gpu_count > 0:
        version = m.gpu.get("driverVersion", "")
        out["gpu_driver"] = {"version": "" if version is None else str(version), "count": m.gpu_count}
    return out


def wait(ctx: Context, obj: dict[str, Any], reason: str, message: str) -> Result:
    """Record what the reconcile waits for (``VMProvisioned`` False, severity Info); a watch wakes it again."""
    ctx.status(
        KIND,
        obj,
        conditions=[
            {"type": "VMProvisioned", "status": "False", "severity": "Info", "reason": reason, "message": message}
        ],
    )
    return DONE


def infrastructure(ctx: Context, obj: dict[str, Any], m: VCOMachine) -> Result | objects.VCOCluster:
    """The machine's ready VCOCluster, or the Result of a wait (recorded) or of a paused cluster."""
    if not m.cluster:
        return wait(ctx, obj, "WaitingForClusterLabel", "the VCOMachine has no cluster.x-k8s.io/cluster-name label yet")
    if not m.owner_machine:
        return wait(ctx, obj, "WaitingForOwnerMachine", "no Cluster API Machine owns this VCOMachine yet")
    capi = ctx.cached("Cluster", m.namespace, m.cluster)
    if capi is None:
        return wait(ctx, obj, "WaitingForCluster", "Cluster %s is not there" % m.cluster)
    if objects.cluster_paused(capi, m.annotations):
        return DONE
    vcc_obj = ctx.cached("VCOCluster", m.namespace, objects.infrastructure_name(capi, m.cluster))
    vcc = objects.VCOCluster.read(vcc_obj) if vcc_obj is not None else None
    if vcc is None or not vcc.ready or not vcc.cloudspace_id:
        return wait(ctx, obj, "WaitingForClusterInfrastructure", "the VCOCluster of %s is not ready" % m.cluster)
    return vcc


def bootstrap_data(ctx: Context, obj: dict[str, Any], m: VCOMachine) -> Result | str:
    """The owner Machine's bootstrap data, or the Result of a wait (recorded) or of a terminal failure."""
    owner = ctx.cached("Machine", m.namespace, m.owner_machine)
    secret_name = objects.bootstrap_secret(owner)
    if not secret_name:
        return wait(
            ctx, obj, "WaitingForBootstrapData", "Machine %s has no bootstrap data Secret yet" % m.owner_machine
        )
    data = ctx.kube.secret(m.namespace, secret_name)
    if data is None or "value" not in data:
        return wait(ctx, obj, "WaitingForBootstrapData", "Secret %s has no bootstrap data yet" % secret_name)
    fmt = data.get("format", "")
    if fmt not in ("", "cloud-config"):
        bad = InputError(
            "bootstrap data format %s is not supported; the first boot wraps cloud-config or a script" % fmt
        )
        failed(ctx, obj, m, None, "VMProvisioned", "Read the bootstrap data Secret", bad)
        return DONE
    return data["value"]


def reconcile(ctx: Context, obj: dict[str, Any]) -> Result:
    obj = ctx.fresh(KIND, obj)
    m = VCOMachine.read(obj)
    if m.deleting:
        return finalize(ctx, obj, m)
    if objects.MACHINE_FINALIZER not in m.finalizers:
        ctx.set_finalizers(VCOMACHINE, obj, m.finalizers + [objects.MACHINE_FINALIZER])
    if m.failure:
        return DONE  # terminal: delete the Machine to replace it
    vcc = infrastructure(ctx, obj, m)
    if isinstance(vcc, Result):
        return vcc
    return provision(ctx, obj, m, vcc)


def provision(ctx: Context, obj: dict[str, Any], m: VCOMachine, vcc: objects.VCOCluster) -> Result:
    """The machine of a ready cluster: its VM read by the id the status records (reported when lost), else made,
    its vGPUs, then its driver's report."""
    if m.placed:  # a machine never moves: its recorded cluster, location and cloudspace, whatever changed since
        location, cs_id = str(m.placement["location"]), str(m.placement["cloudspaceID"])
        ctx.status(KIND, obj, **label_check(m))
    else:
        location, cs_id = vcc.location, vcc.cloudspace_id
    provider = provider_id(location, cs_id, m.vm_name)
    is_converged = False
    if m.vm_id is not None:  # the VM the status records: one read, by its id (an idle reconcile's only one)
        seen = machines.info(ctx.client(), cloudspace_id=cs_id, vm_id=m.vm_id)["machines"]
        if not (seen and seen[0].get("name") == m.vm_name and seen[0].get("owner") == m.cluster):
            return lost(ctx, obj, m, location, seen)
        if not m.placed:  # made by a controller that recorded no placement: recorded now, from what it is
            place(ctx, obj, m, vcc)
        is_converged = m.ready and converged(m, seen, provider)
    vm_id = m.vm_id
    if not is_converged:
        bootstrap: str | None = None
        if m.vm_id is None:
            got = bootstrap_data(ctx, obj, m)
            if isinstance(got, Result):
                return got
            bootstrap = got
            if not m.placed:  # recorded before the VM is made: from then on the machine is the cluster's
                place(ctx, obj, m, vcc)
        vm_id = converge(ctx, obj, m, location, cs_id, provider, bootstrap)
    if m.gpu_count > 0 and vm_id is not None and not (is_converged and m.driver_verified):
        return driver(ctx, obj, m, cs_id, vm_id)
    return DONE


def place(ctx: Context, obj: dict[str, Any], m: VCOMachine, vcc: objects.VCOCluster) -> None:
    """Record where the machine's VM is (``status.placement``), before it is made: its cluster, location,
    cloudspace and VM name. From then on the controller acts for that cluster and in that cloudspace only (a
    changed label is reported, never followed; an edited VCOCluster never moves it), and the finalizer releases
    and deletes what it records."""
    placement = {
        "cluster": m.cluster,
        "location": vcc.location,
        "cloudspace": vcc.cloudspace,
        "cloudspaceID": vcc.cloudspace_id,
        "vmName": m.vm_name,
    }
    recorded = VCOMachine.read(dict(obj, status=dict(m.status, placement=placement)))
    ctx.status(KIND, obj, status={"placement": placement}, **label_check(recorded))


def label_check(m: VCOMachine) -> dict[str, Any]:
    """The ``ClusterLabelUnchanged`` condition of a placed machine (pure, as ``ctx.status``'s arguments): True while
    the ``cluster.x-k8s.io/cluster-name`` label names the recorded cluster; False (a Warning Event when it becomes
    so) when it names another one, or none: the controller keeps acting for the recorded cluster."""
    if m.label_cluster == m.cluster:
        cond = {
            "type": "ClusterLabelUnchanged",
            "status": "True",
            "reason": "AsRecorded",
            "message": "cluster %s, as recorded before its VM was made" % m.cluster,
        }
        return {"conditions": [cond]}
    message = (
        "the label %s says %r, but this machine is cluster %s's: recorded before its VM %s was made in cloudspace "
        "%s (%s). A machine never moves to another cluster: the controller acts for %s only, and its finalizer "
        "deletes what it recorded. Put the label back, or delete the machine and make one in the other cluster"
        % (
            objects.CLUSTER_NAME_LABEL,
            m.label_cluster,
            m.cluster,
            m.vm_name,
            m.placement.get("cloudspace"),
            m.placement.get("cloudspaceID"),
            m.cluster,
        )
    )
    cond = {
        "type": "ClusterLabelUnchanged",
        "status": "False",
        "severity": "Warning",
        "reason": "ClusterLabelChanged",
        "message": message,
    }
    was = m.condition("ClusterLabelUnchanged")
    event = None
    if was.get("status") != "False" or was.get("message") != message:
        event = {"type": "Warning", "reason": "ClusterLabelChanged", "message": message}
    return {"conditions": [cond], "event": event}


def converge(
    ctx: Context,
    obj: dict[str, Any],
    m: VCOMachine,
    location: str,
    cs_id: str,
    provider: str,
    bootstrap: str | None,
) -> int | None:
    """The VM, then its vGPUs; the VM's id (None after a terminal failure).  A failure is recorded with what is
    reserved so far."""
    client = ctx.client()
    make = "The VM, created with the retried first boot wrapped around the bootstrap data"
    condition, step = "VMProvisioned", make
    try:
        created = False
        if m.vm_id is None:
            # what the VM is made from, and the vGPUs it will hold, checked before it is made (and billed)
            precheck.machine_config(client, location, m.spec, m.vm_name)  # an image the location lacks: terminal
            condition, step = "GPUsReserved", "Check the location's free vGPUs before the VM is made"
            precheck.gpus_now(client, location, m.spec, m.vm_name)  # too few now: retried, and no VM made meanwhile
            condition, step = "VMProvisioned", make
            size = objects.snake(m.spec)
            vm = machines.ensure(
                client,
                cloudspace_id=cs_id,
                name=m.vm_name,
                vcpus=size.get("vcpus"),
                memory=size.get("memory"),
                image_id=size.get("image"),
                disk_size=size.get("disk_size"),
                cluster=m.cluster,
                first_boot=first_boot_options(m),
                bootstrap_data=bootstrap,
                provider_id=provider,
                node_labels=render.gpu_node_labels(str(m.gpu.get("type") or "") if m.gpu_count > 0 else None),
            )
            vm_id, created = int(vm["machine"]["vm_id"]), bool(vm.get("changed"))
        else:  # read by its id just now: never made again here (a lost one is reported, :func:`lost`)
            vm_id = m.vm_id
        ctx.status(
            KIND,
            obj,
            provider_id=provider,
            vm_id=vm_id,
            status={"addresses": [{"type": "Hostname", "address": m.vm_name}]},
            conditions=[
                {
                    "type": "VMProvisioned",
                    "status": "True",
                    "reason": "Provisioned",
                    "message": "VM %s (%s)" % (m.vm_name, vm_id),
                }
            ],
            event={"reason": "VMCreated", "message": "created VM " + m.vm_name} if created else None,
        )
        condition, step = "GPUsReserved", "Reserve and attach the vGPUs by type"
        reservations: list[dict[str, Any]] = []
        if m.gpu_count > 0:
            got = vgpus.ensure(
                client,
                location=location,
                cloudspace_id=cs_id,
                cluster=m.cluster,
                machines=[m.vm_name],
                gpu_type=str(m.gpu.get("type") or ""),
                count=m.gpu_count,
                profile=str(m.gpu["profile"]) if m.gpu.get("profile") else None,
            )
            reservations = list(got.get("reservations") or [])
        step = "Record the machine as ready, with its reservations"
        ctx.status(
            KIND,
            obj,
            status={"ready": True, "failureReason": None, "failureMessage": None},
            gpu_reservations=reservations,
            conditions=(
                [
                    {
                        "type": "GPUsReserved",
                        "status": "True",
                        "reason": "Reserved",
                        "message": "%d x %s" % (m.gpu_count, m.gpu.get("type")),
                    }
                ]
                if m.gpu_count > 0
                else []
            ),
        )
        return vm_id
    except WhiteskyError as exc:
        failed(ctx, obj, m, location, condition, step, exc)  # raises Retry unless the input is at fault
        return None


def lost(ctx: Context, obj: dict[str, Any], m: VCOMachine, location: str, seen: list[dict[str, Any]]) -> Result:
    """The VM the status records is gone (or its id is now another VM's): it is not made again (a VM made again
    would boot without its bootstrap data, which was for one boot, and never become a Node), as Cluster API expects
    of an infrastructure provider: ``Ready`` False, reason ``VMDeleted``, and the v1beta1 contract's
    ``failureReason``, so that the Machine's owner replaces it (a MachineHealthCheck).  The vGPU reservations it held
    are released at once (a reservation without its VM still bills): those the orphan rule finds without their
    machine and attached to no VM.  A failure to release is retried with backoff."""
    what = "VM %s (%s)" % (m.vm_name, m.vm_id)
    why = (
        "is gone from the platform"
        if not seen
        else "is now %r of %s, not this machine" % (seen[0].get("name"), seen[0].get("owner") or "no cluster")
    )
    try:
        released, kept = release_lost(ctx.client(), location, m.cluster, m.vm_name)
    except WhiteskyError as exc:
        failed(ctx, obj, m, location, "GPUsReserved", "Release the vGPUs of the lost %s" % what, exc)  # Retry
        return DONE
    message = (
        "%s %s (deleted behind the controller's back); a lost VM is not made again: delete the Machine or let a "
        "MachineHealthCheck replace it" % (what, why)
    )
    if released:
        message += "; its %d vGPU reservation(s) were released: %s" % (
            len(released),
            ", ".join(sorted(str(i["vgpu_name"]) for i in released)),
        )
    if kept:
        message += "; %d reservation(s) attached to another VM are left: %s" % (
            len(kept),
            ", ".join(sorted(str(i["vgpu_name"]) for i in kept)),
        )
    message = scrub(message, MESSAGE_LIMIT)
    down = {"status": "False", "severity": "Error", "reason": "VMDeleted", "message": message}
    conditions = [dict(down, type="Ready"), dict(down, type="VMProvisioned")]
    if m.gpu_count > 0:
        conditions.append(dict(down, type="GPUsReserved"))
    ctx.status(
        KIND,
        obj,
        status={"ready": False, "failureReason": VM_DELETED_FAILURE, "failureMessage": message},
        gpu_reservations=kept,
        conditions=conditions,
        event={"type": "Warning", "reason": "VMDeleted", "message": message},
    )
    return DONE


def release_lost(client: WhiteskyClient, location: str, cluster: str, vm_name: str) -> tuple[list[Any], list[Any]]:
    """``(released, kept)`` of the reservations a lost machine owns: those whose machine the orphan rule finds gone
    from the location (listed before its VMs, so that one made meanwhile is never taken for an orphan) and that are
    attached to no VM are released, permanently; the others are kept."""
    owned = Inventory(client, location).owned(cluster, vm_name)
    if not owned:
        return [], []
    orphan = OrphanCheck(machines_in_location(client, location))
    going = [i for i in owned if orphan(owner_of(i)) and attached_to(i) is None]
    if going:
        release.release(client, location, going, permanently=True, parallel=4)
    return going, [i for i in owned if i not in going]


def failed(
    ctx: Context,
    obj: dict[str, Any],
    m: VCOMachine,
    location: str | None,
    condition: str,
    step: str,
    exc: WhiteskyError,
) -> None:
    """Record a failure and every reservation owned for the machine so far.  Invalid input is terminal
    (``failureReason``); anything else raises :class:`Retry`, and the key comes back with backoff."""
    terminal = isinstance(exc, InputError)
    message = ctx.say(exc, MESSAGE_LIMIT)
    owned: list[dict[str, Any]] | None = None
    if location:
        try:
            owned = report.info(ctx.client(), location=location, cluster=m.cluster, machine=m.vm_name)["reservations"]
        except WhiteskyError as again:
            log.warning("%s/%s: reading its reservations after a failure: %s", m.namespace, m.name, ctx.say(again))
    reason = "InvalidConfiguration" if terminal else "ReconcileFailed"
    ctx.status(
        KIND,
        obj,
        status={"ready": False, "failureReason": reason, "failureMessage": message} if terminal else None,
        gpu_reservations=owned,
        conditions=[{"type": condition, "status": "False", "severity": "Error", "reason": reason, "message": message}],
        event={"type": "Warning", "reason": reason, "message": "%s: %s" % (step, message)},
    )
    if not terminal:
        raise Retry("%s: %s" % (step, message))


def driver(ctx: Context, obj: dict[str, Any], m: VCOMachine, cs_id: str, vm_id: int) -> Result:
    """``GPUDriverReady`` from what the first boot reports (through the platform's guest agent); looked at again
    after the driver poll until the driver is verified (the first boot's verdict is final then)."""
    before = m.condition("GPUDriverReady")
    try:
        cond = first_boot.info(ctx.client(), cloudspace_id=cs_id, vm_id=vm_id, gpu=True)["gpu_driver_ready"]
    except MachineNotFound as exc:
        cond = {
            "type": "GPUDriverReady",
            "status": "False",
            "severity": "Error",
            "reason": "MachineNotFound",
            "message": scrub(str(exc), MESSAGE_LIMIT),
        }
    event = None
    if cond.get("status") == "False" and cond.get("message") != before.get("message"):
        event = {"type": "Warning", "reason": "GPUDriverFailed", "message": cond.get("message")}
    ctx.status(KIND, obj, conditions=[cond], event=event)
    if cond.get("reason") == "MachineNotFound":
        return Result(requeue_after=0.0)  # at once: the reconcile reads the VM by its id and reports it lost
    if cond.get("status") == "True":
        return DONE
    return Result(requeue_after=ctx.settings.driver_poll)


def finalize(ctx: Context, obj: dict[str, Any], m: VCOMachine) -> Result:
    """Release the machine's vGPUs, then delete its VM (with the force annotation: delete it with its vGPUs
    attached, release nothing: the cluster's sweep and the orphan check pick those up), where ``status.placement``
    records them; then drop the finalizer."""
    if objects.MACHINE_FINALIZER not in m.finalizers:
        return DONE
    capi = ctx.cached("Cluster", m.namespace, m.cluster) if m.cluster else None
    vcc_obj = ctx.cached("VCOCluster", m.namespace, objects.infrastructure_name(capi, m.cluster)) if m.cluster else None
    if vcc_obj is not None:  # without the cluster's infrastructure there is nothing to delete (its sweep has run)
        vcc = objects.VCOCluster.read(vcc_obj)
        where = m.placement if m.placed else {"location": vcc.location, "cloudspace": vcc.cloudspace}
        # what it recorded (the recorded cluster's, whatever the label says now), else its cluster's
        spec = {"cluster": {"name": m.cluster, "location": where["location"], "cloudspace": where["cloudspace"]}}
        done = ctx.teardown(KIND, obj, "VM " + m.vm_name, spec=spec, machine=m.vm_name, force=m.force_delete)
        for warning in done.get("warnings") or []:
            log.warning("%s/%s: %s", m.namespace, m.name, scrub(warning, MESSAGE_LIMIT))
    ctx.set_finalizers(VCOMACHINE, obj, [f for f in m.finalizers if f != objects.MACHINE_FINALIZER])
    return DONE
