"""The controller's reads and writes of Kubernetes objects other than status: which versions of Cluster API's
kinds the management cluster serves (discovery), lists and watches of the kinds it follows, a Secret by its name,
finalizers, and the leader election's Lease.

Status, providerID and Events go through the collection's one write seam (``faces.kube.write_status``), with the
same ApiClient.  Every object comes back as its JSON document (a dict), never as a client model: the informers keep
thousands of them.
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import urllib3
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import kube as seam
from ansible_collections.whitesky.capvco.plugins.module_utils.faces.errors import KubeError

#: The longest Secret value the controller reads (a bootstrap document or a kubeconfig).
SECRET_LIMIT = 1 << 20


@dataclass(frozen=True)
class Kind:
    """A kind the controller lists and watches (every one is served as a custom resource)."""

    kind: str
    group: str
    version: str
    plural: str

    @property
    def api_version(self) -> str:
        return "%s/%s" % (self.group, self.version)


VCOCLUSTER = Kind("VCOCluster", seam.GROUP, seam.VERSION, "vcoclusters")
VCOMACHINE = Kind("VCOMachine", seam.GROUP, seam.VERSION, "vcomachines")
VCOMACHINETEMPLATE = Kind("VCOMachineTemplate", seam.GROUP, seam.VERSION, "vcomachinetemplates")
LEASE = Kind("Lease", "coordination.k8s.io", "v1", "leases")
#: Cluster API's group, and the versions of it the controller reads, the newest first.
CAPI_GROUP = "cluster.x-k8s.io"
CAPI_VERSIONS = ("v1beta2", "v1beta1")


@dataclass(frozen=True)
class ClusterAPI:
    """What the management cluster serves of Cluster API's core (``/apis/cluster.x-k8s.io``, found at start): the
    version the controller reads Cluster and Machine at (v1beta2 when served: Cluster API 1.11 and later; v1beta1
    on 1.10), and whether the v1beta1 contract's fields are still written (while Cluster API serves v1beta1: it
    reads them from a provider of that contract until it stops serving it, in 1.16)."""

    served: tuple[str, ...]

    @property
    def version(self) -> str:
        return next(v for v in CAPI_VERSIONS if v in self.served)

    @property
    def v1beta1(self) -> bool:
        return "v1beta1" in self.served

    @property
    def cluster(self) -> Kind:
        return Kind("Cluster", CAPI_GROUP, self.version, "clusters")

    @property
    def machine(self) -> Kind:
        return Kind("Machine", CAPI_GROUP, self.version, "machines")

    def watched(self) -> tuple[Kind, ...]:
        """What the controller watches: its own kinds, and the Cluster API objects they hang from."""
        return (VCOCLUSTER, VCOMACHINE, self.cluster, self.machine, VCOMACHINETEMPLATE)


#: Cluster API 1.11 to 1.15 (the tests' and the benchmarks' default when no server is asked).
CURRENT = ClusterAPI(("v1beta2", "v1beta1"))


class Gone(Exception):
    """A watch's resourceVersion is too old (410 Gone): list again."""


class Kube:
    """The controller's Kubernetes client (one ApiClient; the ``kubernetes`` library is thread-safe per call)."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)
        self.leases = k8s.CustomObjectsApi(single_try(api))

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> Kube:
        return cls(seam.api_client(kubeconfig, context))

    def cluster_api(self) -> ClusterAPI:
        """Which versions of ``cluster.x-k8s.io`` the API server serves (discovery: one GET of ``/apis``, its
        APIGroupList); a group it does not serve, or serves at no version the controller reads, is an error naming
        what it found."""
        try:
            groups = k8s.ApisApi(self.api).get_api_versions().groups or []
        except ApiException as exc:
            raise KubeError("discovering the API groups (/apis)", exc) from None
        served = tuple(str(v.version) for g in groups if g.name == CAPI_GROUP for v in g.versions or [] if v.version)
        if not any(v in served for v in CAPI_VERSIONS):
            found = "it serves %s at %s" % (CAPI_GROUP, ", ".join(served)) if served else "Cluster API is not installed"
            raise KubeError(
                "discovering %s: none of %s is served" % (CAPI_GROUP, ", ".join(CAPI_VERSIONS)),
                ApiException(404, found + " (clusterctl init installs it)"),
            )
        return ClusterAPI(served)

    def list_all(self, kind: Kind, namespace: str | None) -> tuple[list[dict[str, Any]], str]:
        """Every object of ``kind`` (in ``namespace``, or all), and the list's resourceVersion to watch from."""
        try:
            if namespace:
                got = self.custom.list_namespaced_custom_object(kind.group, kind.version, namespace, kind.plural)
            else:
                got = self.custom.list_cluster_custom_object(kind.group, kind.version, kind.plural)
        except ApiException as exc:
            raise KubeError("listing %s" % kind.plural, exc) from None
        doc = cast("dict[str, Any]", got)
        items = [i for i in doc.get("items") or [] if isinstance(i, dict)]
        for item in items:  # a list's items carry neither
            item.setdefault("apiVersion", kind.api_version)
            item.setdefault("kind", kind.kind)
        return items, str((doc.get("metadata") or {}).get("resourceVersion") or "")

    def watch(
        self, kind: Kind, namespace: str | None, resource_version: str, timeout: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(type, object)`` events from ``resource_version`` on, bookmarks included, for ``timeout`` seconds.

        Raises :class:`Gone` when the version is too old (the informer lists again)."""
        w = k8s_watch.Watch()  # type: ignore[no-untyped-call]
        if namespace:
            func: Any = self.custom.list_namespaced_custom_object
            args: tuple[str, ...] = (kind.group, kind.version, namespace, kind.plural)
        else:
            func = self.custom.list_cluster_custom_object
            args = (kind.group, kind.version, kind.plural)
        try:
            for event in w.stream(  # type: ignore[no-untyped-call]
                func,
                *args,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout,
                _request_timeout=timeout + 30,
            ):
                etype, obj = event.get("type"), event.get("object")
                if etype == "ERROR":
                    code = obj.get("code") if isinstance(obj, dict) else None
                    if code == 410:
                        raise Gone(str(obj.get("message") if isinstance(obj, dict) else ""))
                    raise KubeError("watching %s" % kind.plural, ApiException(status=code or 500, reason=str(obj)))
                if isinstance(etype, str) and isinstance(obj, dict):
                    yield etype, obj
        except ApiException as exc:
            if exc.status == 410:
                raise Gone(str(exc.reason)) from None
            raise KubeError("watching %s" % kind.plural, exc) from None
        finally:
            w.stop()  # type: ignore[no-untyped-call]

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        """One object, or None when it does not exist."""
        try:
            got = self.custom.get_namespaced_custom_object(kind.group, kind.version, namespace, kind.plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise KubeError("reading %s %s/%s" % (kind.kind, namespace, name), exc) from None
        return cast("dict[str, Any]", got)

    def secret(self, namespace: str, name: str) -> dict[str, str] | None:
        """A Secret's data, decoded (None when it does not exist); a value that is not base64 or too long is an
        error naming the Secret and the key, never the value."""
        got = self.secret_object(namespace, name)
        return None if got is None else got[0]

    def secret_object(self, namespace: str, name: str) -> tuple[dict[str, str], dict[str, str], str] | None:
        """A Secret read by its name (one GET): ``(data decoded, annotations, resourceVersion)``, None when it does
        not exist (:meth:`secret`'s rules for its values)."""
        try:
            got = self.core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise KubeError("reading Secret %s/%s" % (namespace, name), exc) from None
        out: dict[str, str] = {}
        for key, value in (got.data or {}).items():
            if not isinstance(value, str) or len(value) > SECRET_LIMIT * 4 // 3 + 4:
                too_long = ValueError("key %s is longer than %d bytes" % (key, SECRET_LIMIT))
                raise KubeError("reading Secret %s/%s" % (namespace, name), too_long)
            try:
                out[key] = base64.b64decode(value, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise KubeError(
                    "reading Secret %s/%s" % (namespace, name), ValueError("key %s is not base64 of UTF-8 text" % key)
                ) from None
        meta = got.metadata
        annotations = dict((meta.annotations if meta is not None else None) or {})
        return out, annotations, str((meta.resource_version if meta is not None else None) or "")

    def set_finalizers(self, kind: Kind, obj: Mapping[str, Any], finalizers: list[str]) -> dict[str, Any]:
        """``metadata.finalizers`` replaced, guarded by the object's resourceVersion (a JSON patch whose ``test``
        fails with 409/422 when someone changed them since)."""
        meta = obj["metadata"]
        if not finalizers and not meta.get("finalizers"):
            return dict(obj)
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
            {"op": "add", "path": "/metadata/finalizers", "value": finalizers},  # [] lets a deleted object go
        ]
        try:
            got = self.custom.patch_namespaced_custom_object(
                kind.group,
                kind.version,
                meta["namespace"],
                kind.plural,
                meta["name"],
                ops,
                _content_type="application/json-patch+json",
            )
        except ApiException as exc:
            raise KubeError(
                "setting the finalizers of %s %s/%s" % (kind.kind, meta["namespace"], meta["name"]), exc
            ) from None
        return cast("dict[str, Any]", got)

    # The leader election's Lease (coordination.k8s.io/v1, a built-in kind served at the same kind of path).  Each
    # call has a ``timeout`` (seconds, for the whole request: it is made once, never retried), so that a leader whose
    # API server went silent finds out within its renew deadline instead of waiting on a socket (leader.py).
    def lease(self, namespace: str, name: str, *, timeout: float) -> dict[str, Any] | None:
        """The Lease, or None when it does not exist."""
        try:
            got = self.leases.get_namespaced_custom_object(
                LEASE.group, LEASE.version, namespace, LEASE.plural, name, _request_timeout=timeout
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise KubeError("reading Lease %s/%s" % (namespace, name), exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError("reading Lease %s/%s" % (namespace, name), exc) from None
        return cast("dict[str, Any]", got)

    def create_lease(self, namespace: str, body: dict[str, Any], *, timeout: float) -> dict[str, Any] | None:
        """The Lease created, or None when another replica created it first (409)."""
        what = "creating Lease %s/%s" % (namespace, body["metadata"]["name"])
        try:
            got = self.leases.create_namespaced_custom_object(
                LEASE.group, LEASE.version, namespace, LEASE.plural, body, _request_timeout=timeout
            )
        except ApiException as exc:
            if exc.status == 409:
                return None
            raise KubeError(what, exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(what, exc) from None
        return cast("dict[str, Any]", got)

    def replace_lease(self, namespace: str, body: dict[str, Any], *, timeout: float) -> dict[str, Any] | None:
        """The Lease replaced (its resourceVersion guards it), or None when another replica changed it first."""
        what = "updating Lease %s/%s" % (namespace, body["metadata"]["name"])
        try:
            got = self.leases.replace_namespaced_custom_object(
                LEASE.group,
                LEASE.version,
                namespace,
                LEASE.plural,
                body["metadata"]["name"],
                body,
                _request_timeout=timeout,
            )
        except ApiException as exc:
            if exc.status == 409:
                return None
            raise KubeError(what, exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise KubeError(what, exc) from None
        return cast("dict[str, Any]", got)


def single_try(api: Any) -> Any:
    """An ApiClient as ``api`` (its server, credentials, headers) whose requests are made once: urllib3 retries a
    GET or a PUT that timed out three more times by default, each with the whole timeout again."""
    cfg = copy.deepcopy(api.configuration)
    cfg.retries = False
    out = k8s.ApiClient(cfg)
    out.default_headers = dict(api.default_headers)
    return out
