"""What every reconcile works with: the informers' stores, the platform client of its worker thread, what the
management cluster serves of Cluster API, and the controller's writes to Kubernetes, each skipped when the cached
object says it would change nothing (a reconcile writes its object's status once, through its ``scope.Scope``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import run as cluster_run
from ansible_collections.whitesky.capvco.plugins.module_utils.faces import kube as seam
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import Connection
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import HINTS, WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub
from capvco_controller import identity
from capvco_controller.credentials import Credentials, refused
from capvco_controller.informer import Store
from capvco_controller.kube import CURRENT, ClusterAPI, Kind, Kube
from capvco_controller.metrics import Registry

if TYPE_CHECKING:
    from capvco_controller.objects import VCOCluster
    from capvco_controller.scope import Scope

#: A work queue key: (kind, namespace, name); kind "Location" is the drift pass of a location ("", location).
Key = tuple[str, str, str]
MESSAGE_LIMIT = 4096


@dataclass(frozen=True)
class Result:
    """A reconcile's outcome: done (None), or to be looked at again after ``requeue_after`` seconds."""

    requeue_after: float | None = None


DONE = Result()


class Retry(Exception):
    """A reconcile failed in a way a later try can fix: the key goes back with backoff (the message is logged and
    was recorded on the object)."""


@dataclass
class Settings:
    """The controller's own settings (``main`` reads them from the command line)."""

    drift_period: float = 540.0
    driver_poll: float = 60.0
    addon_resync: float = 3600.0
    ansible_playbook: str = "ansible-playbook"
    namespaces: list[str] = field(default_factory=list)


class Context:
    def __init__(
        self,
        kube: Kube,
        stores: Mapping[str, Store],
        credentials: Credentials,
        settings: Settings,
        metrics: Registry,
        enqueue: Callable[[Key], None] | None = None,
        capi: ClusterAPI = CURRENT,
    ) -> None:
        self.kube = kube
        self.capi = capi
        self.kinds = {k.kind: k for k in capi.watched()}
        self.stores = stores
        self.credentials = credentials
        #: the VCOClusters' own identities (``spec.identityRef``)
        self.identities = identity.Identities(credentials.environ)
        self.settings = settings
        self.metrics = metrics
        self.enqueue: Callable[[Key], None] = enqueue or (lambda key: None)
        self._local = threading.local()
        self._lock = threading.Lock()
        # per key, the resourceVersion of the controller's last write that the cache has not shown yet: until it has,
        # the cache is not trusted to say that a write would change nothing
        self._pending: dict[Key, str] = {}
        # the drift pass's orphan report per VCOCluster, for its reconcile: key -> report
        self.reports: dict[Key, dict[str, Any]] = {}
        # the SR-IOV add-on: key -> (digest of what was applied, monotonic time)
        self.addons: dict[Key, tuple[str, float]] = {}

    # the platform
    @contextlib.contextmanager
    def using(self, vcc: VCOCluster | None) -> Iterator[None]:
        """The platform calls of this thread, inside, use the identity of the VCOCluster ``vcc`` (its
        ``spec.identityRef``), or the controller's own credential when it names none (or is None);
        :class:`identity.IdentityError` when it names one it may not use (nothing is called then)."""
        ref = identity.Ref.of(vcc.spec, vcc.namespace) if vcc is not None else None
        if vcc is not None:
            identity.unchanged(vcc.status, ref)
        before = getattr(self._local, "identity", None)
        if ref is None or vcc is None:
            self._local.identity = None
        else:
            connection, key = self.identities.resolve(self.kube, ref, vcc.namespace)
            self._local.identity = (ref, connection, key)
        try:
            yield
        finally:
            self._local.identity = before

    @property
    def connection(self) -> Connection:
        """The platform credential now: the identity in use (:meth:`using`), else the controller's own
        (``credentials.Credentials``: a mounted Secret's change is read)."""
        current = getattr(self._local, "identity", None)
        return current[1] if current is not None else self.credentials.connection

    def client(self) -> WhiteskyClient:
        """This worker thread's platform client for the credential in use (one per thread and credential, made
        anew when the credential changed: the controller's files, or a new version of an identity's Secret)."""
        current = getattr(self._local, "identity", None)
        if current is not None:
            clients: dict[tuple[str, str], tuple[tuple[str, str, str], WhiteskyClient]]
            clients = self._local.__dict__.setdefault("identity_clients", {})
            key = current[2]
            made = clients.get(key[:2])
            if made is None or made[0] != key:
                if made is not None:
                    made[1].close()
                made = (key, WhiteskyClient.connect(current[1]))
                clients[key[:2]] = made
            return made[1]
        connection, generation = self.credentials.current()
        got: WhiteskyClient | None = getattr(self._local, "client", None)
        if got is None or self._local.generation != generation:
            if got is not None:
                got.close()
            got = WhiteskyClient.connect(connection)
            self._local.client, self._local.generation = got, generation
        return got

    def say(self, exc: BaseException, limit: int = MESSAGE_LIMIT) -> str:
        """An error fit for a condition, an Event or the log: scrubbed of every token the process held, and a
        refused credential named with where it comes from (``Credentials.say``, or the identity in use)."""
        current = getattr(self._local, "identity", None)
        if current is None:
            return scrub(self.credentials.say(exc, limit), limit, secrets=self.identities.tokens())
        text = str(exc)
        if refused(exc):
            text = text.replace(HINTS[401], "") + (
                "; the platform refused the identity %s, for customer %s (read again on every reconcile: update the "
                "Secret)" % (current[0], current[1].customer_id)
            )
        return self.credentials.say(Exception(scrub(text, limit, secrets=self.identities.tokens())), limit)

    # the caches
    def cached(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.stores[kind].get(namespace, name)

    def items(self, kind: str) -> list[dict[str, Any]]:
        return self.stores[kind].items()

    def seen(self, kind: str, obj: Mapping[str, Any]) -> None:
        """The informer's note of an object it now holds: a pending write of the controller's is in the cache."""
        meta = obj.get("metadata") or {}
        key = (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        with self._lock:
            if self._pending.get(key) == meta.get("resourceVersion"):
                del self._pending[key]

    def _wrote(self, key: Key, version: object) -> None:
        with self._lock:
            if isinstance(version, str) and version:
                self._pending[key] = version
            else:
                self._pending[key] = "?"  # unknown: never matches, until the object is read after a reconcile

    def fresh(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` from the cache, or from the API server when the controller wrote to it since the cache last
        showed it."""
        meta = obj.get("metadata") or {}
        key = (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        with self._lock:
            pending = key in self._pending
        if not pending:
            return obj
        got = self.kube.get(self.kinds[kind], key[1], key[2])
        if got is None:
            return obj
        self._wrote(key, (got.get("metadata") or {}).get("resourceVersion"))  # cleared once the cache shows it
        return got

    # the writes
    def status(
        self, kind: str, obj: Mapping[str, Any], *, events: Sequence[Mapping[str, Any]] = (), **fields: Any
    ) -> dict[str, Any] | None:
        """``faces.kube.write_status`` for ``obj`` (its status in one merge patch, its providerID, its Events:
        ``fields`` are its ``status``, ``conditions``, ``gpu_reservations``, ``vm_id``, ``gpu_orphans`` and
        ``provider_id``), or nothing at all (None) when the object, as the reconcile holds it, already says all of
        it and there is no Event to emit."""
        meta = obj.get("metadata") or {}
        key = (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        fields["v1beta1"] = self.capi.v1beta1
        if not events:
            with self._lock:
                pending = key in self._pending
            if not pending:
                set_provider, patch, _after = seam.plan_write(obj, kind, seam.now_iso(), **fields)
                if not set_provider and patch is None:
                    return None
        result = seam.write_status(kind=kind, name=key[2], namespace=key[1], events=events, api=self.kube.api, **fields)
        if result.get("resource_version") is not None:
            self._wrote(key, result["resource_version"])
        return result

    def teardown(self, scope: Scope, what: str, **options: Any) -> dict[str, Any]:
        """A finalizer's deletion (``cluster.run.run`` with ``state=absent``); a failure is written on the object
        (``Ready`` False, ``Deleting``, and a Warning Event ``DeleteFailed``: the scope's one write), and
        :class:`Retry`."""
        try:
            # a finalizer deletes what its resource recorded: it never searches the customer's other cloudspaces
            return cluster_run.run(self.client(), state="absent", look_elsewhere=False, **options)
        except WhiteskyError as exc:
            message = "deleting %s: %s" % (what, self.say(exc))
            scope.deleting = message
            scope.event("DeleteFailed", message, warning=True)
            scope.close()
            raise Retry(message) from None

    def set_finalizers(self, kind: Kind, obj: Mapping[str, Any], finalizers: list[str]) -> None:
        got = self.kube.set_finalizers(kind, obj, finalizers)
        meta = obj.get("metadata") or {}
        self._wrote(
            (kind.kind, str(meta.get("namespace") or ""), str(meta.get("name") or "")),
            (got.get("metadata") or {}).get("resourceVersion"),
        )
