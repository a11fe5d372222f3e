"""A VCOMachineTemplate's status: what one machine of it brings, for the cluster autoscaler to scale its pool from
zero (Cluster API's "Opt-in Autoscaling from Zero"), and whether its GPU type can be had in the location now.

``status.capacity`` holds ``cpu``, ``memory``, ``ephemeral-storage`` (from ``diskSize``) and, for a GPU template,
``nvidia.com/gpu`` (the count), each a quantity string, as the autoscaler's Cluster API provider reads it;
``status.nodeInfo`` the architecture and operating system; ``status.nodeLabels`` the labels the first boot gives the
node (``cluster-api/accelerator``: the GPU type). A GPU template's type is checked against its location's profiles
every drift period: one the location does not offer, or offers with fewer free instances in one profile than one
machine needs, is the condition ``GPUsAvailable`` False with a Warning Event, and its capacity is withdrawn, so
that the autoscaler does not scale up from zero into a machine that fails.  A template's spec never changes (the CRD
refuses it), so nothing else wakes it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import profiles as gpu_profiles
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub
from capvco_controller import objects
from capvco_controller.context import DONE, Context, Result

log = logging.getLogger(__name__)
KIND = "VCOMachineTemplate"
#: The extended resource the NVIDIA device plugin advertises, and the autoscaler's template node carries.
GPU_RESOURCE = "nvidia.com/gpu"
#: Every machine is an x86-64 Linux VM (the platform's images).
NODE_INFO = {"architecture": "amd64", "operatingSystem": "linux"}
CONDITION = "GPUsAvailable"


def machine_spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The template's ``spec.template.spec`` (the CRD has checked its types and bounds)."""
    spec = (obj.get("spec") or {}).get("template") or {}
    got = spec.get("spec") if isinstance(spec, dict) else None
    return got if isinstance(got, dict) else {}


def gpu_of(spec: Mapping[str, Any]) -> tuple[str, int]:
    """``(type, count)`` of a machine spec's GPUs; ``("", 0)`` without."""
    gpu = spec.get("gpu")
    if not isinstance(gpu, dict) or not gpu.get("type"):
        return "", 0
    return str(gpu["type"]), int(gpu.get("count") or 1)


def capacity(spec: Mapping[str, Any]) -> dict[str, str]:
    """What one machine brings, as the autoscaler reads it (pure): ``cpu`` and ``memory`` always, ``ephemeral-storage``
    with a ``diskSize``, ``nvidia.com/gpu`` with GPUs; each a Kubernetes quantity string."""
    out = {"cpu": str(int(spec["vcpus"])), "memory": "%dMi" % int(spec["memory"])}
    if spec.get("diskSize"):
        out["ephemeral-storage"] = "%dGi" % int(spec["diskSize"])
    _gpu_type, count = gpu_of(spec)
    if count:
        out[GPU_RESOURCE] = str(count)
    return out


def node_labels(spec: Mapping[str, Any]) -> dict[str, str]:
    """The labels the first boot gives a node of this spec (pure; refuses a GPU type no label value can hold)."""
    return render.gpu_node_labels(gpu_of(spec)[0] or None)


def location_of(ctx: Context, obj: Mapping[str, Any]) -> str:
    """The template's location: its cluster's VCOCluster's (the cluster from the owner reference Cluster API sets on
    the templates a MachineDeployment uses, or the ``cluster.x-k8s.io/cluster-name`` label); '' while unknown."""
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    labels = meta.get("labels") or {}
    cluster = objects.owner(meta, "Cluster") or str(labels.get(objects.CLUSTER_NAME_LABEL) or "")
    if not cluster:
        return ""
    owner = ctx.cached("Cluster", namespace, cluster)
    infra = objects.infrastructure_name(owner, cluster) if owner is not None else cluster
    vco = ctx.cached("VCOCluster", namespace, infra)
    return str(((vco or {}).get("spec") or {}).get("location") or "")


def availability(
    profiles: list[Any], gpu_type: str, count: int, location: str, profile: str | None = None
) -> tuple[bool, str, str, int]:
    """``(ok, reason, message, free instances in the best profile)`` of ``count`` vGPUs of ``gpu_type`` for one
    machine (pure): all of one machine's vGPUs come from one profile, as the reservation's allocation takes them,
    among those ``profile`` (``gpu.profile``) allows."""
    try:
        matching = gpu_profiles.profiles_of_type(profiles, gpu_type, location)
    except InputError as exc:
        return False, "GPUTypeNotOffered", str(exc), 0
    try:
        matching = gpu_profiles.choose(matching, profile, gpu_type, location)
    except InputError as exc:
        return False, "GPUProfileNotOffered", str(exc), 0
    best = max(int(p.get("available_instances") or 0) for p in matching)
    if best < count:
        return (
            False,
            "InsufficientGPUs",
            "%d free instance(s) of %s in one profile in location %r, one machine needs %d"
            % (best, gpu_type, location, count),
            best,
        )
    return (
        True,
        "Available",
        "%d free instance(s) of %s in location %r, %d per machine"
        % (
            best,
            gpu_type,
            location,
            count,
        ),
        best,
    )


def reconcile(ctx: Context, obj: dict[str, Any]) -> Result:
    obj = ctx.fresh(KIND, obj)
    spec = machine_spec(obj)
    try:
        labels = node_labels(spec)
    except InputError as exc:
        ctx.status(
            KIND,
            obj,
            status={"capacity": None, "nodeLabels": None},
            conditions=[
                {
                    "type": CONDITION,
                    "status": "False",
                    "severity": "Error",
                    "reason": "InvalidConfiguration",
                    "message": str(exc),
                }
            ],
        )
        return DONE
    base: dict[str, Any] = {"capacity": capacity(spec), "nodeInfo": dict(NODE_INFO), "nodeLabels": labels or None}
    gpu_type, count = gpu_of(spec)
    if not count:
        ctx.status(KIND, obj, status=base)
        return DONE
    location = location_of(ctx, obj)
    if not location:
        ctx.status(
            KIND,
            obj,
            status=dict(base, capacity=None, gpu=None),
            conditions=[
                {
                    "type": CONDITION,
                    "status": "Unknown",
                    "reason": "WaitingForCluster",
                    "message": "no VCOCluster names this template's location yet (owner Cluster or the "
                    "cluster.x-k8s.io/cluster-name label)",
                }
            ],
        )
        return Result(ctx.settings.drift_period)
    client = ctx.client()
    wanted = spec.get("gpu")
    profile = str(wanted["profile"]) if isinstance(wanted, dict) and wanted.get("profile") else None
    ok, reason, message, free = availability(client.gpu_profiles(location), gpu_type, count, location, profile)
    price = client.prices(location)
    cost = billing.times(count, billing.price_per_hour(price))
    gpu: dict[str, Any] = {
        "location": location,
        "available": free,
        "perMachine": count,
        # both removed (None) when the location's price is not known: never shown as free
        "costPerMachineHour": cost,
        "currency": billing.currency_of(price) if cost is not None else None,
    }
    event = None
    if not ok and objects.condition(obj, CONDITION).get("reason") != reason:
        event = {"type": "Warning", "reason": reason, "message": scrub(message, 1024)}
    condition = {"type": CONDITION, "status": "True" if ok else "False", "reason": reason, "message": message}
    if not ok:
        condition["severity"] = "Warning"
    ctx.status(
        KIND,
        obj,
        status=dict(base, capacity=base["capacity"] if ok else None, gpu=gpu),
        conditions=[condition],
        event=event,
    )
    return Result(ctx.settings.drift_period)
