"""An informer: one list, then one watch, per kind (and per watched namespace), into an in-memory store.

Reconciles read the store, never the API server; each change is handed to a handler as ``(type, old, new)``.  A
watch that ends is started again from the last resourceVersion it saw (bookmarks keep that fresh); one that is too
old (410 Gone) lists again, and the differences from the store are handed on as events, so nothing is missed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from capvco_controller.kube import Gone, Kind, Kube

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)
#: ``(type, old, new)``: ADDED (old None), MODIFIED, DELETED (new None)
Handler = Callable[[str, "dict[str, Any] | None", "dict[str, Any] | None"], None]


def key_of(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class Store:
    """The objects of one kind, by ``(namespace, name)``; reads take a snapshot under the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[Key, dict[str, Any]] = {}

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._items.get((namespace, name))

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._items.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def put(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        with self._lock:
            key = key_of(obj)
            old = self._items.get(key)
            self._items[key] = obj
            return old

    def pop(self, key: Key) -> dict[str, Any] | None:
        with self._lock:
            return self._items.pop(key, None)

    def replace(self, objs: list[dict[str, Any]], namespace: str | None) -> list[tuple[str, Any, Any]]:
        """The store's objects (of ``namespace``, or all) replaced by a fresh list: the events that make up the
        difference."""
        fresh = {key_of(o): o for o in objs}
        events: list[tuple[str, Any, Any]] = []
        with self._lock:
            for key, old in list(self._items.items()):
                if (namespace is None or key[0] == namespace) and key not in fresh:
                    del self._items[key]
                    events.append(("DELETED", old, None))
            for key, new in fresh.items():
                prior = self._items.get(key)
                self._items[key] = new
                if prior is None:
                    events.append(("ADDED", None, new))
                elif prior.get("metadata", {}).get("resourceVersion") != new.get("metadata", {}).get("resourceVersion"):
                    events.append(("MODIFIED", prior, new))
        return events


class Informer:
    """List and watch ``kind`` in each of ``namespaces`` (None: all) into ``store``; call ``handler`` per change."""

    def __init__(
        self,
        kube: Kube,
        kind: Kind,
        namespaces: list[str] | None,
        handler: Handler,
        stop: threading.Event,
        watch_timeout: int = 300,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.kube = kube
        self.kind = kind
        self.namespaces: list[str | None] = list(namespaces) if namespaces else [None]
        self.handler = handler
        self.stop = stop
        self.watch_timeout = watch_timeout
        self.on_error = on_error
        self.store = Store()
        self.synced = threading.Event()
        self._listed: set[str | None] = set()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for ns in self.namespaces:
            t = threading.Thread(target=self._run, args=(ns,), name="informer-%s-%s" % (self.kind.plural, ns or "all"))
            t.daemon = True
            t.start()
            self._threads.append(t)

    def alive(self) -> bool:
        return all(t.is_alive() for t in self._threads)

    def _run(self, namespace: str | None) -> None:
        backoff = 0.5
        version = ""
        while not self.stop.is_set():
            try:
                if not version:
                    version = self._list(namespace)
                for seen in self._watch(namespace, version):
                    version, backoff = seen, 0.5
            except Gone:
                log.info("watch of %s is too old: listing again", self.kind.plural)
                version = ""
            except Exception as exc:  # the API server away, a broken stream: wait, then go on from where it was
                log.warning("watch of %s failed: %s; retrying in %.1f s", self.kind.plural, exc, backoff)
                if self.on_error is not None:
                    self.on_error(self.kind.kind)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _list(self, namespace: str | None) -> str:
        items, version = self.kube.list_all(self.kind, namespace)
        for etype, old, new in self.store.replace(items, namespace):
            self._hand(etype, old, new)
        self._listed.add(namespace)
        if len(self._listed) == len(self.namespaces):
            self.synced.set()
        return version

    def _watch(self, namespace: str | None, version: str) -> Iterator[str]:
        """Handle the watch's events; yields the resourceVersion after each one (a bookmark's too)."""
        for etype, obj in self.kube.watch(self.kind, namespace, version, self.watch_timeout):
            if self.stop.is_set():
                return
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if etype == "BOOKMARK":
                yield version
                continue
            obj.setdefault("apiVersion", self.kind.api_version)
            obj.setdefault("kind", self.kind.kind)
            if etype == "DELETED":
                old = self.store.pop(key_of(obj))
                self._hand("DELETED", old or obj, None)
            elif etype in ("ADDED", "MODIFIED"):
                old = self.store.put(obj)
                self._hand("ADDED" if old is None else "MODIFIED", old, obj)
            yield version

    def _hand(self, etype: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        try:
            self.handler(etype, old, new)
        except Exception:  # a handler's bug must not stop the watch
            log.exception("handling %s of a %s", etype, self.kind.kind)
