"""Typed views of the objects the controller reconciles, read from their documents (the API server validated them
against the CRDs; a field of another type still reads as absent, never as a crash); and what it reads of Cluster
API's Cluster and Machine, at v1beta2 or v1beta1 (``kube.ClusterAPI``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MACHINE_FINALIZER = "vcomachine.infrastructure.cluster.x-k8s.io"
CLUSTER_FINALIZER = "vcocluster.infrastructure.cluster.x-k8s.io"
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
PAUSED = "cluster.x-k8s.io/paused"
FORCE_DELETE = "capvco.whitesky.cloud/force-delete"
SRIOV_LABEL = "addons.capvco.whitesky.cloud/sriov"
DEFAULT_GRACE = 900
INFRA_GROUP = "infrastructure.cluster.x-k8s.io"
#: The reasons of a terminal error (the v1beta2 contract's "terminal failures" are a condition's reason): the
#: machine's input (``InvalidConfiguration``), its VM lost (``VMDeleted``), a cluster's name taken
#: (``ClusterNameInUse``).  The reconcile stops; the owner replaces the object.
TERMINAL = frozenset({"InvalidConfiguration", "VMDeleted", "ClusterNameInUse"})


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def owner(meta: Mapping[str, Any], kind: str) -> str:
    """The name of the Cluster API owner of ``kind`` (cluster.x-k8s.io/...), or ''."""
    for item in _list(meta.get("ownerReferences")):
        ref = _dict(item)
        if ref.get("kind") == kind and _str(ref.get("apiVersion")).startswith("cluster.x-k8s.io/"):
            return _str(ref.get("name"))
    return ""


def condition(obj: Mapping[str, Any], ctype: str) -> dict[str, Any]:
    for c in _list(_dict(obj.get("status")).get("conditions")):
        if _dict(c).get("type") == ctype:
            return dict(c)
    return {}


@dataclass(frozen=True)
class Common:
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]
    deleting: bool
    spec: dict[str, Any]
    status: dict[str, Any]
    #: ``metadata.generation`` (what the conditions' ``observedGeneration`` says was seen)
    generation: int

    @staticmethod
    def fields(obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = _dict(obj.get("metadata"))
        generation = meta.get("generation")
        return {
            "namespace": _str(meta.get("namespace")),
            "name": _str(meta.get("name")),
            "uid": _str(meta.get("uid")),
            "labels": {str(k): _str(v) for k, v in _dict(meta.get("labels")).items()},
            "annotations": {str(k): _str(v) for k, v in _dict(meta.get("annotations")).items()},
            "finalizers": [f for f in _list(meta.get("finalizers")) if isinstance(f, str)],
            "deleting": bool(meta.get("deletionTimestamp")),
            "spec": _dict(obj.get("spec")),
            "status": _dict(obj.get("status")),
            "generation": generation if isinstance(generation, int) and not isinstance(generation, bool) else 0,
        }

    @property
    def failure(self) -> str:
        """The terminal error's reason: the ``Ready`` condition's, when it is one of :data:`TERMINAL`, or the
        v1beta1 ``failureReason`` (what an older controller recorded); '' while there is none."""
        ready = self.condition("Ready")
        if ready.get("status") == "False" and ready.get("reason") in TERMINAL:
            return _str(ready.get("reason"))
        return _str(self.status.get("failureReason"))

    @property
    def provisioned(self) -> bool:
        """``status.initialization.provisioned`` (the v1beta2 contract), or the v1beta1 ``status.ready`` of an
        older controller's record."""
        init = _dict(self.status.get("initialization"))
        return init.get("provisioned") is True or self.status.get("ready") is True

    def condition(self, ctype: str) -> dict[str, Any]:
        return condition({"status": self.status}, ctype)

    def condition_status(self, ctype: str) -> str:
        return _str(self.condition(ctype).get("status"))


@dataclass(frozen=True)
class VCOMachine(Common):
    #: the machine's cluster: the one ``status.placement`` records once it has (or is making) a VM, else its label's
    cluster: str
    owner_machine: str
    #: what the ``cluster.x-k8s.io/cluster-name`` label says now (the controller never acts on a change of it)
    label_cluster: str = ""

    @classmethod
    def read(cls, obj: Mapping[str, Any]) -> VCOMachine:
        f = cls.fields(obj)
        meta = _dict(obj.get("metadata"))
        label = f["labels"].get(CLUSTER_NAME_LABEL, "")
        recorded = _str(_dict(f["status"].get("placement")).get("cluster"))
        return cls(cluster=recorded or label, owner_machine=owner(meta, "Machine"), label_cluster=label, **f)

    @property
    def placement(self) -> dict[str, Any]:
        """``status.placement``: the cluster, location, cloudspace (name and id) and VM name recorded before its VM
        was made ({} before); a machine never moves from them."""
        return _dict(self.status.get("placement"))

    @property
    def placed(self) -> bool:
        p = self.placement
        return bool(p.get("cluster") and p.get("location") and p.get("cloudspace") and p.get("cloudspaceID"))

    @property
    def vm_name(self) -> str:
        """The VM's (and Node's) name: the recorded one, else the object's, prefixed with the cluster's unless it
        starts with it."""
        recorded = _str(self.placement.get("vmName"))
        if recorded:
            return recorded
        return self.name if self.name.startswith(self.cluster + "-") else "%s-%s" % (self.cluster, self.name)

    @property
    def vm_id(self) -> int | None:
        got = self.status.get("vmID")
        return got if isinstance(got, int) and not isinstance(got, bool) else None

    @property
    def gpu(self) -> dict[str, Any]:
        return _dict(self.spec.get("gpu"))

    @property
    def gpu_count(self) -> int:
        if "gpu" not in self.spec:
            return 0
        count = self.gpu.get("count", 1)
        return count if isinstance(count, int) and not isinstance(count, bool) else 1

    @property
    def recorded(self) -> list[dict[str, Any]]:
        """``status.gpu.reservations``."""
        return [_dict(r) for r in _list(_dict(self.status.get("gpu")).get("reservations"))]

    @property
    def provider_id(self) -> str:
        return _str(self.spec.get("providerID"))

    @property
    def force_delete(self) -> bool:
        return self.annotations.get(FORCE_DELETE, "").strip().lower() in ("true", "yes", "1", "on")

    @property
    def driver_verified(self) -> bool:
        return self.condition_status("GPUDriverReady") == "True"


@dataclass(frozen=True)
class VCOCluster(Common):
    cluster: str

    @classmethod
    def read(cls, obj: Mapping[str, Any]) -> VCOCluster:
        f = cls.fields(obj)
        meta = _dict(obj.get("metadata"))
        return cls(cluster=owner(meta, "Cluster") or f["labels"].get(CLUSTER_NAME_LABEL, ""), **f)

    @property
    def location(self) -> str:
        return _str(self.spec.get("location"))

    @property
    def cloudspace(self) -> str:
        return _str(self.spec.get("cloudspace"))

    @property
    def cloudspace_id(self) -> str:
        return _str(self.status.get("cloudspaceID"))

    @property
    def gpu_owner(self) -> str:
        return _str(self.status.get("gpuOwner"))

    @property
    def grace(self) -> int:
        got = self.spec.get("gpuOrphanGracePeriod", DEFAULT_GRACE)
        return got if isinstance(got, int) and not isinstance(got, bool) and got >= 0 else DEFAULT_GRACE

    @property
    def endpoint(self) -> str:
        """``spec.controlPlaneEndpoint.host`` ('' when none is given)."""
        return _str(_dict(self.spec.get("controlPlaneEndpoint")).get("host"))

    @property
    def sriov(self) -> dict[str, Any]:
        return _dict(self.spec.get("sriov"))

    @property
    def sriov_enabled(self) -> bool:
        return self.labels.get(SRIOV_LABEL, "") in ("enabled", "true") and "sriov" in self.spec


def cluster_paused(capi: Mapping[str, Any] | None, annotations: Mapping[str, str]) -> bool:
    """Whether reconciles are paused: the Cluster's ``spec.paused``, or the object's ``cluster.x-k8s.io/paused``
    annotation ("InfraMachine: pausing")."""
    return bool(capi and _dict(capi.get("spec")).get("paused") is True) or PAUSED in annotations


def infrastructure_ref(obj: Mapping[str, Any] | None) -> tuple[str, str, str]:
    """``(group, kind, name)`` of a Cluster's or a Machine's ``spec.infrastructureRef``: a v1beta2 reference says
    ``apiGroup``, a v1beta1 one ``apiVersion`` (group/version)."""
    ref = _dict(_dict((obj or {}).get("spec")).get("infrastructureRef"))
    group = _str(ref.get("apiGroup")) or _str(ref.get("apiVersion")).split("/")[0]
    return group, _str(ref.get("kind")), _str(ref.get("name"))


def infrastructure_name(capi: Mapping[str, Any] | None, default: str) -> str:
    """The name of a Cluster's VCOCluster (``spec.infrastructureRef.name``)."""
    return infrastructure_ref(capi)[2] or default


def infrastructure_provisioned(capi: Mapping[str, Any] | None) -> bool:
    """Whether a Cluster says its infrastructure is provisioned: a v1beta2 one's
    ``status.initialization.infrastructureProvisioned`` (it has no ``status.infrastructureReady``), a v1beta1 one's
    ``status.infrastructureReady``."""
    status = _dict((capi or {}).get("status"))
    if _str((capi or {}).get("apiVersion")).endswith("/v1beta2"):
        return _dict(status.get("initialization")).get("infrastructureProvisioned") is True
    return status.get("infrastructureReady") is True


def endpoint(capi: Mapping[str, Any] | None) -> str:
    """A Cluster's ``spec.controlPlaneEndpoint.host`` ('' when it has none yet)."""
    return _str(_dict(_dict((capi or {}).get("spec")).get("controlPlaneEndpoint")).get("host"))


def bootstrap_secret(machine: Mapping[str, Any] | None) -> str:
    """A Machine's bootstrap data: ``spec.bootstrap.dataSecretName``, at either version (its
    ``status.initialization.bootstrapDataSecretCreated``, v1beta1's ``status.bootstrapReady``, says it exists; the
    contract's rule is the name)."""
    return _str(_dict(_dict(_dict((machine or {}).get("spec")).get("bootstrap"))).get("dataSecretName"))


def snake(spec: Mapping[str, Any]) -> dict[str, Any]:
    """firstBoot -> first_boot, driverVersion -> driver_version (the core's argument names), one level deep."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        name = "".join("_" + c.lower() if c.isupper() else c for c in key)
        out[name] = value
    return out
