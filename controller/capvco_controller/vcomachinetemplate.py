"""A VCOMachineTemplate's status: what one machine of it brings, for the cluster autoscaler to scale its pool from
zero (Cluster API's "Opt-in Autoscaling from Zero"), and whether its GPU type can be had in the location now.

``status.capacity`` holds ``cpu``, ``memory``, ``ephemeral-storage`` (from ``diskSize``) and, for a GPU template,
``nvidia.com/gpu`` (the count), each a quantity string, as the autoscaler's Cluster API provider reads it;
``status.nodeInfo`` the architecture and operating system; ``status.nodeLabels`` the labels the first boot gives the
node (``cluster-api/accelerator``: the GPU type). Every drift period a template is checked as a machine of it is
before its VM is made (``precheck``): its size and image against the location's images (``MachineConfigValid``),
and a GPU template's type and profile against the location's profiles (``GPUsAvailable``: one the location does not
offer, or offers with fewer free instances in one profile than one machine needs, is False). A condition that is
False comes with a Warning Event, and the capacity is withdrawn, so that the autoscaler does not scale up from zero
into a machine that fails.  A template's spec never changes (the CRD refuses it), so nothing else wakes it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import conditions as conds
from ansible_collections.whitesky.capvco.plugins.module_utils.faces.conditions import Condition
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub
from capvco_controller import objects
from capvco_controller.context import DONE, Context, Result
from capvco_controller.precheck import availability, gpu_of, machine_config
from capvco_controller.scope import Scope

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

log = logging.getLogger(__name__)
KIND = "VCOMachineTemplate"
#: The extended resource the NVIDIA device plugin advertises, and the autoscaler's template node carries.
GPU_RESOURCE = "nvidia.com/gpu"
#: Every machine is an x86-64 Linux VM (the platform's images).
NODE_INFO = {"architecture": "amd64", "operatingSystem": "linux"}
CONDITION = "GPUsAvailable"
#: Whether a machine of the template could be made there: its size and image (every template).
CONFIG = "MachineConfigValid"


def machine_spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The template's ``spec.template.spec`` (the CRD has checked its types and bounds)."""
    spec = (obj.get("spec") or {}).get("template") or {}
    got = spec.get("spec") if isinstance(spec, dict) else None
    return got if isinstance(got, dict) else {}


def capacity(spec: Mapping[str, Any]) -> dict[str, str]:
    """What one machine brings, as the autoscaler reads it (pure): ``cpu`` and ``memory`` always, ``ephemeral-storage``
    with a ``diskSize``, ``nvidia.com/gpu`` with GPUs; each a Kubernetes quantity string."""
    out = {"cpu": str(int(spec["vcpus"])), "memory": "%dMi" % int(spec["memory"])}
    if spec.get("diskSize"):
        out["ephemeral-storage"] = "%dGi" % int(spec["diskSize"])
    _gpu_type, count, _profile = gpu_of(spec)
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


def reconcile(ctx: Context, obj: dict[str, Any]) -> Result:
    obj = ctx.fresh(KIND, obj)
    with Scope(ctx, KIND, obj) as scope:
        return publish(ctx, scope, obj)


def publish(ctx: Context, scope: Scope, obj: dict[str, Any]) -> Result:
    """The template's status: what one machine brings, its conditions and their Events, in the one write."""
    spec = machine_spec(obj)
    try:
        labels = node_labels(spec)
    except InputError as exc:
        scope.set(capacity=None, nodeLabels=None)
        scope.condition(conds.false(CONDITION, "InvalidConfiguration", str(exc), "Error"))
        return DONE
    base: dict[str, Any] = {"capacity": capacity(spec), "nodeInfo": dict(NODE_INFO), "nodeLabels": labels or None}
    gpu_type, count, profile = gpu_of(spec)
    location = location_of(ctx, obj)
    if not location:
        waiting = (
            "no VCOCluster names this template's location yet (owner Cluster or the cluster.x-k8s.io/cluster-name "
            "label)"
        )
        scope.set(**dict(base, capacity=None, gpu=None))
        scope.condition(conds.unknown(CONFIG, "WaitingForCluster", waiting))
        if count:
            scope.condition(conds.unknown(CONDITION, "WaitingForCluster", waiting))
        return Result(ctx.settings.drift_period)
    client = ctx.client()
    name = str((obj.get("metadata") or {}).get("name") or "")
    config = config_condition(client, location, spec, name)
    config_ok = config.status == "True"
    scope.condition(config)
    if not config_ok and objects.condition(obj, CONFIG).get("message") != config.message:
        scope.event(config.reason, scrub(config.message, 1024), warning=True)
    if not count:
        scope.set(**dict(base, capacity=base["capacity"] if config_ok else None))
        return Result(ctx.settings.drift_period)  # the location's images are looked at again every period
    ok, reason, message, free = availability(client.gpu_profiles(location), gpu_type, count, location, profile, name)
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
    if not ok and objects.condition(obj, CONDITION).get("reason") != reason:
        scope.event(reason, scrub(message, 1024), warning=True)
    scope.condition(conds.true(CONDITION, reason, message) if ok else conds.false(CONDITION, reason, message))
    scope.set(**dict(base, capacity=base["capacity"] if ok and config_ok else None, gpu=gpu))
    return Result(ctx.settings.drift_period)


def config_condition(client: WhiteskyClient, location: str, spec: Mapping[str, Any], name: str) -> Condition:
    """``MachineConfigValid``: whether a machine of the template could be made in ``location`` (its size and image,
    checked as a machine's are: ``precheck.machine_config``); False with ``InvalidConfiguration`` and the reason
    (no image, an image the location lacks, naming its images)."""
    try:
        machine_config(client, location, spec, name)
    except InputError as exc:
        return conds.false(CONFIG, "InvalidConfiguration", scrub(str(exc), 1024), "Error")
    return conds.true(
        CONFIG,
        "Valid",
        "image %s in location %r, %s vCPU(s), %s MiB"
        % (spec.get("image"), location, spec.get("vcpus"), spec.get("memory")),
    )
