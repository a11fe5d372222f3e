"""A VCOMachine's reconcile and finalizer, by Cluster API's contract for infrastructure machines ("Contract rules
for InfraMachine", v1beta2: https://cluster-api.sigs.k8s.io/developer/providers/contracts/infra-machine).

It waits for the cluster label, the owner Machine, the Cluster (not paused, and saying its infrastructure is
provisioned) with its VCOCluster, and the Machine's bootstrap data (``spec.bootstrap.dataSecretName``); records
where the VM goes (``placement``), then creates it with the retried first boot wrapped around that data; reserves
and attaches the vGPUs by type (each reservation names its owner the moment it exists); sets ``spec.providerID``
and ``status.initialization.provisioned``; and records ``GPUDriverReady`` from what the first boot reports
(``driver``).  A terminal error is the reason of its conditions, and so of ``Ready``; so is a VM lost behind the
controller's back, which is never made again (``lost``).  Each reconcile writes its status once, at its end
(``scope.Scope``).  The platform work is the collection's core (``machines.machine.ensure``, ``gpu.vgpus.ensure``,
``firstboot.status.info``, ``cluster.run.run`` for the deletion), the same the modules call.
"""

from __future__ import annotations

import logging
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import conditions as conds
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import machine as machines
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import report
from capvco_controller import identity, objects, placement, precheck
from capvco_controller.context import DONE, Context, Result, Retry
from capvco_controller.driver import driver
from capvco_controller.kube import VCOMACHINE
from capvco_controller.lost import lost
from capvco_controller.objects import VCOMachine
from capvco_controller.scope import Scope

log = logging.getLogger(__name__)
KIND = "VCOMachine"
MESSAGE_LIMIT = 4096
PROVISIONED = "VMProvisioned"
RESERVED = "GPUsReserved"


def provider_id(location: str, cloudspace_id: str, vm_name: str) -> str:
    return "whitesky://%s/%s/%s" % (location, cloudspace_id, vm_name)


def summarised(m: VCOMachine) -> tuple[str, ...]:
    """What the machine's ``Ready`` summarises: its VM, and a GPU machine's vGPUs (``GPUDriverReady`` is reported
    beside: the Node, which runs GPU work, joins only once the driver is verified)."""
    return (PROVISIONED, RESERVED) if m.gpu_count > 0 else (PROVISIONED,)


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


def wait(scope: Scope, reason: str, message: str) -> Result:
    """Record what the reconcile waits for (``VMProvisioned`` False, v1beta1 severity Info); a watch wakes it."""
    scope.condition(conds.false(PROVISIONED, reason, message, "Info"))
    return DONE


def infrastructure(ctx: Context, scope: Scope, m: VCOMachine) -> Result | objects.VCOCluster:
    """The machine's provisioned VCOCluster, or the Result of a wait (recorded) or of a paused cluster (the
    ``Paused`` condition, "InfraMachine: pausing")."""
    if not m.cluster:
        return wait(scope, "WaitingForClusterLabel", "the VCOMachine has no cluster.x-k8s.io/cluster-name label yet")
    if not m.owner_machine:
        return wait(scope, "WaitingForOwnerMachine", "no Cluster API Machine owns this VCOMachine yet")
    capi = ctx.cached("Cluster", m.namespace, m.cluster)
    if capi is None:
        return wait(scope, "WaitingForCluster", "Cluster %s is not there" % m.cluster)
    if objects.cluster_paused(capi, m.annotations):
        scope.condition(conds.true("Paused", "Paused", "Cluster %s or this VCOMachine is paused" % m.cluster))
        return DONE
    scope.condition(conds.make("Paused", "False", "NotPaused"))
    vcc_obj = ctx.cached("VCOCluster", m.namespace, objects.infrastructure_name(capi, m.cluster))
    vcc = objects.VCOCluster.read(vcc_obj) if vcc_obj is not None else None
    if vcc is None or not vcc.provisioned or not vcc.cloudspace_id or not objects.infrastructure_provisioned(capi):
        why = "Cluster %s does not say its infrastructure is provisioned yet" % m.cluster
        return wait(scope, "WaitingForClusterInfrastructure", why)
    return vcc


def bootstrap_data(ctx: Context, scope: Scope, m: VCOMachine) -> Result | str:
    """The owner Machine's bootstrap data, or the Result of a wait (recorded) or of a terminal failure."""
    owner = ctx.cached("Machine", m.namespace, m.owner_machine)
    secret_name = objects.bootstrap_secret(owner)
    if not secret_name:
        return wait(scope, "WaitingForBootstrapData", "Machine %s has no bootstrap data Secret yet" % m.owner_machine)
    data = ctx.kube.secret(m.namespace, secret_name)
    if data is None or "value" not in data:
        return wait(scope, "WaitingForBootstrapData", "Secret %s has no bootstrap data yet" % secret_name)
    fmt = data.get("format", "")
    if fmt not in ("", "cloud-config"):
        bad = InputError(
            "bootstrap data format %s is not supported; the first boot wraps cloud-config or a script" % fmt
        )
        failed(ctx, scope, m, None, PROVISIONED, "Read the bootstrap data Secret", bad)
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
    with Scope(ctx, KIND, obj, summarised(m)) as scope:
        vcc = infrastructure(ctx, scope, m)
        if isinstance(vcc, Result):
            return vcc
        try:
            with ctx.using(vcc):  # the cluster's identity, for every platform call of its machines
                return provision(ctx, scope, m, vcc)
        except identity.IdentityError as exc:
            return wait(scope, "WaitingForClusterIdentity", "Cluster %s's identity: %s" % (m.cluster, exc))


def provision(ctx: Context, scope: Scope, m: VCOMachine, vcc: objects.VCOCluster) -> Result:
    """The machine of a provisioned cluster: its VM read by the id the status records (reported when lost), else
    placed (that reconcile writes the placement and ends: the next one makes the VM) and made, its vGPUs, then its
    driver's report."""
    if m.placed:  # a machine never moves: its recorded cluster, location and cloudspace, whatever changed since
        location, cs_id = str(m.placement["location"]), str(m.placement["cloudspaceID"])
        placement.label_check(scope, m)
    else:
        location, cs_id = vcc.location, vcc.cloudspace_id
    provider = provider_id(location, cs_id, m.vm_name)
    is_converged = False
    if m.vm_id is not None:  # the VM the status records: one read, by its id (an idle reconcile's only one)
        seen = machines.info(ctx.client(), cloudspace_id=cs_id, vm_id=m.vm_id)["machines"]
        if not (seen and seen[0].get("name") == m.vm_name and seen[0].get("owner") == m.cluster):
            try:
                return lost(ctx, scope, m, location, seen)
            except WhiteskyError as exc:
                failed(ctx, scope, m, location, RESERVED, "Release the vGPUs of the lost VM %s" % m.vm_name, exc)
        if not m.placed:  # made by a controller that recorded no placement: recorded now, from what it is
            m = placement.place(scope, m, vcc)
        is_converged = m.provisioned and converged(m, seen, provider)
    vm_id = m.vm_id
    if not is_converged:
        bootstrap: str | None = None
        if m.vm_id is None:
            got = bootstrap_data(ctx, scope, m)
            if isinstance(got, Result):
                return got
            bootstrap = got
            if not m.placed:  # written before the VM is made: from then on the machine is the cluster's
                placement.place(scope, m, vcc)
                scope.condition(conds.false(PROVISIONED, "Placed", "VM %s goes to cloudspace %s" % (m.vm_name, cs_id)))
                return Result(requeue_after=0.0)
        vm_id = converge(ctx, scope, m, location, cs_id, provider, bootstrap)
    if m.gpu_count > 0 and vm_id is not None and not (is_converged and m.driver_verified):
        return driver(ctx, scope, m, cs_id, vm_id)
    return DONE


def converge(
    ctx: Context,
    scope: Scope,
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
    condition, step = PROVISIONED, make
    try:
        created = False
        if m.vm_id is None:
            # what the VM is made from, and the vGPUs it will hold, checked before it is made (and billed)
            precheck.machine_config(client, location, m.spec, m.vm_name)  # an image the location lacks: terminal
            condition, step = RESERVED, "Check the location's free vGPUs before the VM is made"
            precheck.gpus_now(client, location, m.spec, m.vm_name)  # too few now: retried, and no VM made meanwhile
            condition, step = PROVISIONED, make
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
        else:  # read by its id just now: never made again here (a lost one is reported, ``lost``)
            vm_id = m.vm_id
        scope.provider_id, scope.vm_id = provider, vm_id
        scope.set(addresses=[{"type": "Hostname", "address": m.vm_name}])
        scope.condition(conds.true(PROVISIONED, "Provisioned", "VM %s (%s)" % (m.vm_name, vm_id)))
        if created:
            scope.event("VMCreated", "created VM " + m.vm_name)
        condition, step = RESERVED, "Reserve and attach the vGPUs by type"
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
            scope.condition(conds.true(RESERVED, "Reserved", "%d x %s" % (m.gpu_count, m.gpu.get("type"))))
        scope.reserved(reservations)
        scope.provisioned(True)  # the contract's "initialization completed": the VM and its vGPUs exist
        scope.recovered()
        return vm_id
    except WhiteskyError as exc:
        failed(ctx, scope, m, location, condition, step, exc)  # raises Retry unless the input is at fault
        return None


def failed(
    ctx: Context,
    scope: Scope,
    m: VCOMachine,
    location: str | None,
    condition: str,
    step: str,
    exc: WhiteskyError,
) -> None:
    """Record a failure and every reservation owned for the machine so far.  Invalid input is terminal (the
    condition's reason ``InvalidConfiguration``, and the v1beta1 ``failureReason``); anything else raises
    :class:`Retry`, and the key comes back with backoff."""
    terminal = isinstance(exc, InputError)
    message = ctx.say(exc, MESSAGE_LIMIT)
    if location:
        try:
            scope.reserved(
                report.info(ctx.client(), location=location, cluster=m.cluster, machine=m.vm_name)["reservations"]
            )
        except WhiteskyError as again:
            log.warning("%s/%s: reading its reservations after a failure: %s", m.namespace, m.name, ctx.say(again))
    reason = "InvalidConfiguration" if terminal else "ReconcileFailed"
    if terminal:
        scope.set(ready=False)
        scope.terminal(reason, message)
    scope.condition(conds.false(condition, reason, message, "Error"))
    scope.event(reason, "%s: %s" % (step, message), warning=True)
    if not terminal:
        raise Retry("%s: %s" % (step, message))


def finalize(ctx: Context, obj: dict[str, Any], m: VCOMachine) -> Result:
    """Release the machine's vGPUs, then delete its VM (with the force annotation: delete it with its vGPUs
    attached, release nothing: the cluster's sweep and the orphan check pick those up), where ``status.placement``
    records them; then drop the finalizer.  A deletion that fails says so (``Ready`` False, ``Deleting``)."""
    if objects.MACHINE_FINALIZER not in m.finalizers:
        return DONE
    capi = ctx.cached("Cluster", m.namespace, m.cluster) if m.cluster else None
    vcc_obj = ctx.cached("VCOCluster", m.namespace, objects.infrastructure_name(capi, m.cluster)) if m.cluster else None
    if vcc_obj is not None:  # without the cluster's infrastructure there is nothing to delete (its sweep has run)
        vcc = objects.VCOCluster.read(vcc_obj)
        where = m.placement if m.placed else {"location": vcc.location, "cloudspace": vcc.cloudspace}
        # what it recorded (the recorded cluster's, whatever the label says now), else its cluster's
        spec = {"cluster": {"name": m.cluster, "location": where["location"], "cloudspace": where["cloudspace"]}}
        scope = Scope(ctx, KIND, obj, summarised(m))
        try:
            with ctx.using(vcc):
                done = ctx.teardown(scope, "VM " + m.vm_name, spec=spec, machine=m.vm_name, force=m.force_delete)
        except identity.IdentityError as exc:
            message = "deleting VM %s: Cluster %s's identity: %s" % (m.vm_name, m.cluster, exc)
            scope.deleting = message
            scope.event("DeleteFailed", message, warning=True)
            scope.close()
            raise Retry(message) from None
        for warning in done.get("warnings") or []:
            log.warning("%s/%s: %s", m.namespace, m.name, scrub(warning, MESSAGE_LIMIT))
    ctx.set_finalizers(VCOMACHINE, obj, [f for f in m.finalizers if f != objects.MACHINE_FINALIZER])
    return DONE
