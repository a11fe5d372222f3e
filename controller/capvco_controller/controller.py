"""The controller: informers for the five kinds it watches (``kube.ClusterAPI.watched``: Cluster and Machine at the
version the management cluster serves), one work queue, a pool of workers, and the drift pass of each location as
a key of the same queue.

Which changes wake what (an idle object wakes nothing; the drift pass looks at it every period):

- a VCOMachine or VCOCluster: when it is added needing work (not converged by its own record, being deleted,
  without its finalizer), and when its metadata or spec changes; its status, which the controller writes, does not
  wake it;
- a VCOCluster's status (provisioned, its cloudspace): the machines of its cluster that are not provisioned yet;
- a Cluster: its VCOCluster and the machines not provisioned yet (it appeared, was paused or resumed, or says its
  infrastructure is provisioned);
- a Machine: its VCOMachine, while that has no VM yet (the bootstrap data arrived);
- a VCOMachineTemplate: when it is added, and when its metadata changes (its spec never does); it is looked at again
  every drift period (its image in the location, a GPU type's availability), and when its cluster's VCOCluster
  appears.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError
from capvco_controller import drift, objects, vcocluster, vcomachine, vcomachinetemplate
from capvco_controller.context import DONE, Context, Key, Result, Retry, Settings
from capvco_controller.credentials import Credentials
from capvco_controller.informer import Informer
from capvco_controller.kube import CURRENT, ClusterAPI, Kube
from capvco_controller.metrics import Counted, Gauge, Registry
from capvco_controller.objects import VCOCluster, VCOMachine
from capvco_controller.workqueue import WorkQueue

log = logging.getLogger(__name__)
LOCATION = "Location"
_IGNORED_META = ("resourceVersion", "managedFields", "generation", "finalizers", "creationTimestamp", "uid")


def fingerprint(obj: dict[str, Any] | None) -> str:
    """What of an object wakes its reconcile: its metadata (but versions, managed fields, finalizers) and spec."""
    if obj is None:
        return ""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _IGNORED_META}
    return json.dumps([meta, obj.get("spec")], sort_keys=True, default=str)


def machine_needs_work(obj: dict[str, Any]) -> bool:
    """Whether a VCOMachine, as listed, needs a reconcile now (pure); one converged by its own record waits for
    the drift pass."""
    m = VCOMachine.read(obj)
    if m.deleting:
        return objects.MACHINE_FINALIZER in m.finalizers
    if m.failure:
        return False
    if objects.MACHINE_FINALIZER not in m.finalizers or not m.provisioned or m.vm_id is None:
        return True
    return m.gpu_count > 0 and not m.driver_verified


def cluster_needs_work(obj: dict[str, Any]) -> bool:
    c = VCOCluster.read(obj)
    if c.deleting:
        return objects.CLUSTER_FINALIZER in c.finalizers
    if c.failure:
        return False
    if objects.CLUSTER_FINALIZER not in c.finalizers or not c.provisioned or not c.gpu_owner:
        return True
    return c.sriov_enabled and c.condition_status("SRIOVAddonReady") != "True"


class Controller:
    def __init__(
        self,
        kube: Kube,
        credentials: Credentials,
        settings: Settings,
        workers: int = 4,
        metrics: Registry | None = None,
        capi: ClusterAPI = CURRENT,
    ) -> None:
        self.kube = kube
        self.capi = capi
        self.settings = settings
        self.workers = workers
        self.metrics = metrics or Registry()
        self.stop = threading.Event()
        self.queue: WorkQueue[Key] = WorkQueue()
        namespaces = settings.namespaces or None
        self.informers = {
            k.kind: Informer(kube, k, namespaces, self._handler(k.kind), self.stop, on_error=self._watch_error)
            for k in capi.watched()
        }
        self.ctx = Context(
            kube,
            {kind: inf.store for kind, inf in self.informers.items()},
            credentials,
            settings,
            self.metrics,
            enqueue=self.queue.add,
            capi=capi,
        )
        self.locations: set[str] = set()
        self._locations_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.active = 0
        self._active_lock = threading.Lock()
        self.started = False
        #: which change wakes what, by kind (the informers' handlers)
        self.handlers: dict[str, Callable[[str, dict[str, Any] | None, dict[str, Any] | None], None]] = {
            "VCOMachine": self._on_vcomachine,
            "VCOCluster": self._on_vcocluster,
            vcomachinetemplate.KIND: self._on_vcomachinetemplate,
            "Cluster": self._on_cluster,
            "Machine": self._on_machine,
        }
        #: which reconcile a key of a kind runs
        self.reconciles: dict[str, Callable[[Context, dict[str, Any]], Result]] = {
            "VCOMachine": vcomachine.reconcile,
            "VCOCluster": vcocluster.reconcile,
            vcomachinetemplate.KIND: vcomachinetemplate.reconcile,
        }
        m = self.metrics
        m.add(Gauge("workqueue_depth", "Keys waiting.", lambda: [((("name", "capvco"),), float(self.queue.depth()))]))
        m.add(
            Gauge(
                "capvco_workqueue_delayed", "Keys waiting for their time.", lambda: [((), float(self.queue.delayed()))]
            )
        )
        m.add(Counted("workqueue_adds_total", "Keys added.", lambda: [((("name", "capvco"),), float(self.queue.adds))]))
        m.add(
            Counted(
                "workqueue_retries_total", "Keys retried.", lambda: [((("name", "capvco"),), float(self.queue.retries))]
            )
        )
        m.add(
            Gauge(
                "controller_runtime_max_concurrent_reconciles",
                "Workers.",
                lambda: [((("controller", "capvco"),), float(self.workers))],
            )
        )
        m.add(
            Gauge(
                "controller_runtime_active_workers",
                "Workers reconciling now.",
                lambda: [((("controller", "capvco"),), float(self.active))],
            )
        )
        m.add(
            Gauge(
                "capvco_informer_objects",
                "Objects in the informers' stores.",
                lambda: [((("kind", kind),), float(len(inf.store))) for kind, inf in self.informers.items()],
            )
        )

    # the informers' handlers
    def _handler(self, kind: str) -> Callable[[str, dict[str, Any] | None, dict[str, Any] | None], None]:
        def handle(etype: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            if new is not None:
                self.ctx.seen(kind, new)
            self.handlers[kind](etype, old, new)

        return handle

    def _watch_error(self, kind: str) -> None:
        self.metrics.watch_errors.inc(kind=kind)

    @staticmethod
    def _key(kind: str, obj: dict[str, Any]) -> Key:
        meta = obj.get("metadata") or {}
        return kind, str(meta.get("namespace") or ""), str(meta.get("name") or "")

    def _on_vcomachine(self, etype: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            return
        if (etype == "ADDED" and machine_needs_work(new)) or (
            etype == "MODIFIED" and fingerprint(old) != fingerprint(new)
        ):
            self.queue.add(self._key("VCOMachine", new))

    def _on_vcocluster(self, etype: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            if old is not None:
                self.ctx.reports.pop(self._key("VCOCluster", old), None)
            return
        c = VCOCluster.read(new)
        if c.location:
            self._schedule(c.location)
        if (etype == "ADDED" and cluster_needs_work(new)) or (
            etype == "MODIFIED" and fingerprint(old) != fingerprint(new)
        ):
            self.queue.add(self._key("VCOCluster", new))
        before = VCOCluster.read(old) if old is not None else None
        if before is None or (before.provisioned, before.cloudspace_id) != (c.provisioned, c.cloudspace_id):
            self._wake_machines(c.namespace, c.cluster)
        if before is None or before.location != c.location:
            self._wake_templates(c.namespace)

    def _on_vcomachinetemplate(self, etype: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None or (etype == "MODIFIED" and fingerprint(old) == fingerprint(new)):
            return
        self.queue.add(self._key(vcomachinetemplate.KIND, new))

    def _wake_templates(self, namespace: str) -> None:
        """The templates of a namespace whose location is not known yet (their cluster's VCOCluster arrived)."""
        for obj in self.ctx.items(vcomachinetemplate.KIND):
            if (obj.get("metadata") or {}).get("namespace") != namespace:
                continue
            if objects.condition(obj, vcomachinetemplate.CONFIG).get("reason") == "WaitingForCluster":
                self.queue.add(self._key(vcomachinetemplate.KIND, obj))

    def _on_cluster(self, etype: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            return
        provisioned = objects.infrastructure_provisioned(new) != objects.infrastructure_provisioned(old)
        if etype == "MODIFIED" and fingerprint(old) == fingerprint(new) and not provisioned:
            return
        meta = new.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        infra = objects.infrastructure_name(new, name)
        if self.ctx.cached("VCOCluster", ns, infra) is not None:
            self.queue.add(("VCOCluster", ns, infra))
        self._wake_machines(ns, name)

    def _on_machine(self, etype: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None or objects.bootstrap_secret(new) == objects.bootstrap_secret(old):
            return
        group, kind, name = objects.infrastructure_ref(new)
        if (group, kind) != (objects.INFRA_GROUP, "VCOMachine"):
            return
        ns = str((new.get("metadata") or {}).get("namespace") or "")
        obj = self.ctx.cached("VCOMachine", ns, name)
        if obj is not None and VCOMachine.read(obj).vm_id is None:
            self.queue.add(self._key("VCOMachine", obj))

    def _wake_machines(self, namespace: str, cluster: str) -> None:
        if not cluster:
            return
        for obj in self.ctx.items("VCOMachine"):
            m = VCOMachine.read(obj)
            if m.namespace == namespace and m.cluster == cluster and not m.provisioned and not m.failure:
                self.queue.add(self._key("VCOMachine", obj))

    def _schedule(self, location: str) -> None:
        with self._locations_lock:
            if location in self.locations:
                return
            self.locations.add(location)
        self.queue.add((LOCATION, "", location))

    # the workers
    def reconcile(self, key: Key) -> Result:
        kind, namespace, name = key
        if kind == LOCATION:
            result = drift.run(self.ctx, name)
            if result.requeue_after is None:
                with self._locations_lock:
                    self.locations.discard(name)
            return result
        obj = self.ctx.cached(kind, namespace, name)
        if obj is None or kind not in self.reconciles:
            return DONE  # gone (its finalizer was removed)
        return self.reconciles[kind](self.ctx, obj)

    def _work(self) -> None:
        while True:
            got = self.queue.get()
            if got is None:
                return
            key, waited = got
            controller = key[0].lower()
            self.metrics.queue_duration.observe(waited, name=controller)
            with self._active_lock:
                self.active += 1
            started = time.monotonic()
            result = "success"
            try:
                outcome = self.reconcile(key)
                self.queue.forget(key)
                if outcome.requeue_after is not None:
                    self.queue.add_after(key, outcome.requeue_after)
                    result = "requeue_after"
            except Retry as exc:
                result = "error"
                delay = self.queue.add_rate_limited(key)
                log.warning("%s %s/%s: %s; again in %.0f s", key[0], key[1], key[2], exc, delay)
            except WhiteskyError as exc:  # the platform's or Kubernetes's error: retried with backoff
                result = "error"
                self.metrics.platform_errors.inc(controller=controller)
                delay = self.queue.add_rate_limited(key)
                log.warning("%s %s/%s: %s; again in %.0f s", key[0], key[1], key[2], self.ctx.say(exc, 2048), delay)
            except Exception:  # a bug: logged with its trace, retried with backoff, never the end of the worker
                result = "error"
                delay = self.queue.add_rate_limited(key)
                log.exception("%s %s/%s failed; again in %.0f s", key[0], key[1], key[2], delay)
            finally:
                elapsed = time.monotonic() - started
                with self._active_lock:
                    self.active -= 1
                self.queue.done(key)
                self.metrics.reconcile_time.observe(elapsed, controller=controller)
                self.metrics.reconcile_total.inc(controller=controller, result=result)
                if result == "error":
                    self.metrics.reconcile_errors.inc(controller=controller)

    # the process
    def start(self, sync_timeout: float = 120.0) -> None:
        """Start the informers, wait until each has listed, then the workers."""
        for inf in self.informers.values():
            inf.start()
        deadline = time.monotonic() + sync_timeout
        for inf in self.informers.values():
            while not inf.synced.wait(0.2):
                if self.stop.is_set() or time.monotonic() > deadline:
                    raise RuntimeError(
                        "the informer of %s did not list within %.0f s" % (inf.kind.plural, sync_timeout)
                    )
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name="worker-%d" % i, daemon=True)
            t.start()
            self._threads.append(t)
        self.started = True
        log.info(
            "reconciling with %d worker(s): %s",
            self.workers,
            ", ".join("%d %s" % (len(inf.store), inf.kind.plural) for inf in self.informers.values()),
        )

    def healthy(self) -> bool:
        return all(inf.alive() for inf in self.informers.values()) and all(t.is_alive() for t in self._threads)

    def ready(self) -> bool:
        return self.started and all(inf.synced.is_set() for inf in self.informers.values())

    def shutdown(self, grace: float = 25.0) -> None:
        """Stop taking keys; wait for the reconciles under way (at most ``grace`` seconds)."""
        self.stop.set()
        self.queue.shutdown()
        deadline = time.monotonic() + grace
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
