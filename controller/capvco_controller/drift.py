"""The drift pass: once per period per location, one read of the location (its cloudspaces, their VMs, its vGPU
reservations) checks every VCOMachine and every VCOCluster there against what their status records, and wakes
only the objects that drifted.  Reconciles stay event-driven; this is what finds what no event says (a VM deleted
behind the controller's back, a vGPU detached, a reservation released, an orphan left by a force delete).

``machine_drift`` and ``cluster_orphans`` are pure: the pass's decisions are tested without a platform.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import kube as seam
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.machine import vm_view
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import run_parallel
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.orphans import OrphanCheck, past_grace
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import deleted, listing, view
from capvco_controller import identity, vcocluster
from capvco_controller.context import Context, Result
from capvco_controller.objects import VCOCluster, VCOMachine
from capvco_controller.vcomachine import provider_id

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import VM

log = logging.getLogger(__name__)
#: How many of a location's cloudspaces are listed at once.
PARALLEL = 8


def machine_drift(
    m: VCOMachine,
    vms: Sequence[VM] | None,
    owned: Iterable[Mapping[str, Any]],
    provider: str,
) -> str | None:
    """Why a converged VCOMachine is not as its status records (pure), or None.

    ``vms``: the VMs of its cloudspace as listed (None: the cloudspace is gone); ``owned``: the location's
    reservations whose names decode to this machine of this cluster."""
    if vms is None:
        return "its cloudspace is gone"
    vm = next((v for v in vms if v.get("vm_id") == m.vm_id), None)
    if vm is None or vm.get("name") != m.vm_name:
        return "VM %s (%s) is gone" % (m.vm_name, m.vm_id)
    recorded = {str(r.get("vgpuID")) for r in m.recorded}
    attached = {str(v) for v in vm_view(vm)["vgpus"]}
    live = {str(r.get("vgpu_id")) for r in owned if not deleted(r)}  # type: ignore[arg-type]
    if len(m.recorded) != m.gpu_count:
        return "the spec asks for %d vGPU(s), the status records %d" % (m.gpu_count, len(m.recorded))
    if attached != recorded:
        return "the VM has vGPU(s) %s attached, the status records %s" % (sorted(attached), sorted(recorded))
    if live != recorded:
        return "the machine's reservations are %s, the status records %s" % (sorted(live), sorted(recorded))
    if m.provider_id != provider:
        return "providerID is %r, not %r" % (m.provider_id, provider)
    return None


def cluster_orphans(
    cluster: str, items: Iterable[Mapping[str, Any]], orphan: OrphanCheck, grace: float, now: float
) -> list[dict[str, Any]]:
    """The cluster's orphans past ``grace`` as report rows (pure): owned by it, its machine gone from the
    location."""
    rows = []
    for item in items:
        owner = item.get("owner")
        if owner is None or not naming.owned_by(owner, cluster):
            continue
        if orphan(owner) and past_grace(owner, grace, now):
            row = view(item)  # type: ignore[arg-type]
            row["age"] = int(now - owner.created)
            row["orphan"] = True
            rows.append(row)
    return rows


@dataclass
class LocationWorld:
    """One read of a location: the VMs of each of its cloudspaces, their names, its reservations (decoded) and
    those by (cluster part, machine part) of their names."""

    listed: dict[str, list[VM]]
    names: set[str]
    items: list[dict[str, Any]]
    by_machine: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)


def read_location(client: WhiteskyClient, location: str) -> LocationWorld:
    spaces = [cs for cs in client.cloudspaces() if cs.get("location") == location]
    jobs: dict[str, Callable[[], list[Any]]] = {
        str(cs["cloudspace_id"]): functools.partial(client.vms, str(cs["cloudspace_id"])) for cs in spaces
    }
    listed, errors = run_parallel(jobs, PARALLEL)
    if errors:  # a partial read would take a cloudspace that failed to list for one whose VMs are gone
        raise next(iter(errors.values()))
    world = LocationWorld(
        listed=listed,
        names={str(v.get("name")) for vms in listed.values() for v in vms},
        items=list(listing(client, location)),  # type: ignore[arg-type]
    )
    for item in world.items:
        owner = item.get("owner")
        if owner is not None:
            world.by_machine.setdefault((owner.cluster, owner.machine), []).append(item)
    return world


def next_pass(period: float, took: float) -> float:
    """How long after a pass's end the next one starts (pure): the passes are timed from their starts, one period
    apart, so a pass's own duration does not add to the next one's wait; a pass that took longer than the period is
    followed at once."""
    return max(0.0, period - took)


def run(ctx: Context, location: str) -> Result:
    """One pass over ``location``; the next one starts one drift period after this one started
    (:func:`next_pass`)."""
    started = time.monotonic()
    here = [c for c in (VCOCluster.read(o) for o in ctx.items("VCOCluster")) if c.location == location]
    here = [c for c in here if not c.deleting]
    if not here:
        return Result()  # no cluster there: the next VCOCluster in the location starts it again
    woken, vms, items = 0, 0, 0
    for group in by_identity(here):
        try:
            with ctx.using(group[0]):  # the clusters of one identity are read with it: one read per identity
                client = ctx.client()
                world = read_location(client, location)
                woken += wake_machines(ctx, location, group, world) + wake_clusters(ctx, client, location, group, world)
        except identity.IdentityError as exc:
            # their reconciles say so (IdentityReady False); the platform is not read with another credential
            log.warning("drift pass of %s: skipping %d cluster(s): %s", location, len(group), exc)
            continue
        vms, items = vms + len(world.names), items + len(world.items)
    took = time.monotonic() - started
    ctx.metrics.drift_pass.observe(took, location=location)
    log.info(
        "drift pass of %s: %d cluster(s), %d VM(s), %d reservation(s), %d woken, %.3f s",
        location,
        len(here),
        vms,
        items,
        woken,
        took,
    )
    return Result(requeue_after=next_pass(ctx.settings.drift_period, took))


def by_identity(clusters: list[VCOCluster]) -> list[list[VCOCluster]]:
    """``clusters`` grouped by the identity they name (``spec.identityRef``; None: the controller's own)."""
    groups: dict[identity.Ref | None, list[VCOCluster]] = {}
    for c in clusters:
        groups.setdefault(identity.Ref.of(c.spec, c.namespace), []).append(c)
    return list(groups.values())


def machine_reason(m: VCOMachine, c: VCOCluster, location: str, world: LocationWorld) -> str | None:
    """Why the pass wakes a machine of a ready cluster (None: it is as recorded)."""
    if not (m.provisioned and m.vm_id is not None):
        return "not ready yet"  # a wait that no event ended: looked at again every period
    try:
        key = (naming.cluster_part(m.cluster), naming.machine_part(m.cluster, m.vm_name))
    except InputError:
        return None
    cs_id = str(m.placement["cloudspaceID"]) if m.placed else c.cloudspace_id  # a machine never moves
    why = machine_drift(
        m,
        world.listed.get(cs_id),
        world.by_machine.get(key, []),
        provider_id(location, cs_id, m.vm_name),
    )
    if why is None and m.gpu_count > 0 and not m.driver_verified:
        why = "its GPU driver is not verified yet"
    return why


def wake_machines(ctx: Context, location: str, here: list[VCOCluster], world: LocationWorld) -> int:
    woken = 0
    ready = {(c.namespace, c.cluster): c for c in here if c.provisioned and c.cloudspace_id and c.cluster}
    for obj in ctx.items("VCOMachine"):
        m = VCOMachine.read(obj)
        c = ready.get((m.namespace, m.cluster))
        if c is None or m.failure or m.deleting:
            continue
        why = machine_reason(m, c, location, world)
        if why is not None:
            log.info("drift: VCOMachine %s/%s: %s", m.namespace, m.name, why)
            ctx.metrics.drift_found.inc(kind="VCOMachine")
            ctx.enqueue(("VCOMachine", m.namespace, m.name))
            woken += 1
    return woken


def wake_clusters(
    ctx: Context, client: WhiteskyClient, location: str, here: list[VCOCluster], world: LocationWorld
) -> int:
    """Each cluster's orphan check from the pass's read: a cluster whose report says something new (or that has
    orphans: a Warning every period) gets it in its reconcile."""
    woken = 0
    orphan = OrphanCheck(world.names)
    price: tuple[float | None, str | None] | None = None
    known: dict[tuple[str, str], set[str]] | None = None  # the VMs the VCOMachines account for, read once a pass
    now = time.time()
    for c in here:
        key = ("VCOCluster", c.namespace, c.name)
        if c.failure:
            continue
        if not (c.provisioned and c.gpu_owner):
            ctx.enqueue(key)
            continue
        late = cluster_orphans(c.gpu_owner, world.items, orphan, c.grace, now)
        if late and price is None:
            got = billing.fetch(client, location, min(now - r["age"] for r in late), now).price
            price = (billing.price_per_hour(got), billing.currency_of(got))
        if known is None:
            known = vcocluster.accounted(ctx)
        vms = vcocluster.unaccounted_vms(
            client, c, c.cloudspace_id, world.listed.get(c.cloudspace_id) or [], known.get((c.namespace, c.cluster), ())
        )
        report: dict[str, Any] = {"reservations": late, "vms": vms, "at": time.monotonic()}
        if late and price is not None:
            report["cost_per_hour"] = billing.times(len(late), price[0])
            report["currency"] = price[1]
        update = vcocluster.orphan_update(c, report)
        if update["event"] is not None or _differs(ctx, c, update):
            ctx.reports[key] = report
            ctx.metrics.drift_found.inc(kind="VCOCluster")
            ctx.enqueue(key)
            woken += 1
        elif c.sriov_enabled and _addon_due(ctx, key):
            ctx.enqueue(key)
    return woken


def _differs(ctx: Context, c: VCOCluster, update: Mapping[str, Any]) -> bool:
    """Whether the orphan report says something the cluster's status does not."""
    meta = {"name": c.name, "namespace": c.namespace, "generation": c.generation}
    obj = {"metadata": meta, "spec": c.spec, "status": c.status}
    _set, patch, _after = seam.plan_write(
        obj,
        "VCOCluster",
        seam.now_iso(),
        status=update.get("status"),
        conditions=update["conditions"],
        gpu_orphans=update["gpu_orphans"],
        v1beta1=ctx.capi.v1beta1,
    )
    return patch is not None


def _addon_due(ctx: Context, key: tuple[str, str, str]) -> bool:
    applied = ctx.addons.get(key)
    return applied is None or time.monotonic() - applied[1] >= ctx.settings.addon_resync
