#!/usr/bin/env python3
"""A fake Kubernetes API server: the client boundary of the controller tests.

There is no kube-apiserver here, so the tests talk to this one over real HTTP,
with the real ``kubernetes`` client and kubernetes.core modules. It keeps
objects in memory and serves what those clients use:

* discovery (``/version``, ``/api``, ``/apis``, the group/version resource lists);
* get, list (label and field selectors), create (``generateName`` too),
  replace, delete, and patch as JSON merge patch, strategic merge patch (taken
  as a merge patch) or JSON patch;
* the ``status`` subresource: writes to the object keep its status, writes to
  ``/status`` change only the status;
* finalizers: a delete sets ``deletionTimestamp`` until the last finalizer goes;
* CustomResourceDefinitions: creating one serves its kind, and its custom
  resources are defaulted and validated against its schema (strict fields), and an update against its transition
  rules (``x-kubernetes-validations``: the one rule ``self == oldSelf``, immutability; ``crdschema``);
* namespaces must exist; ``resourceVersion`` conflicts give 409;
* watches (``?watch=true``) of a kind, in a namespace or in all: from a ``resourceVersion`` (an ADDED event per
  matching object first when none is given, or ``0``), ADDED, MODIFIED and DELETED events as newline-delimited
  JSON, selectors applied, ``timeoutSeconds`` honoured, ``BOOKMARK`` events when asked for
  (``allowWatchBookmarks``); a version older than the history kept (``--watch-history`` events) is answered with
  an ERROR event of code 410 (Gone), as the API server does, so a client lists again;
* stand-ins for the Deployment and DaemonSet controllers: a Deployment reports
  Available (a DaemonSet, ready on its 2 nodes) ``--deployment-ready-after``
  seconds after each change (never, when negative).

Every request is recorded; ``GET /_fake/requests`` returns them (method, path,
query, content type) and ``DELETE`` clears them.

    python tests/kubefake.py --port 0 [--token T] [--deployment-ready-after 1]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import datetime
import json
import re
import threading
import time
import uuid

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

import crdschema  # beside this file: a script's own folder is on its path

# (group, version, plural, kind, namespaced, status subresource)
BUILTIN = [
    ("", "v1", "namespaces", "Namespace", False, True),
    ("", "v1", "secrets", "Secret", True, False),
    ("", "v1", "configmaps", "ConfigMap", True, False),
    ("", "v1", "serviceaccounts", "ServiceAccount", True, False),
    ("", "v1", "events", "Event", True, False),
    ("", "v1", "pods", "Pod", True, True),
    ("apps", "v1", "deployments", "Deployment", True, True),
    ("apps", "v1", "daemonsets", "DaemonSet", True, True),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True, False),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, False),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, False),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, False),
    ("coordination.k8s.io", "v1", "leases", "Lease", True, False),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False, True),
    ("k8s.cni.cncf.io", "v1", "network-attachment-definitions", "NetworkAttachmentDefinition", True, False),
    # Cluster API's own kinds, as if its core provider were installed
    ("cluster.x-k8s.io", "v1beta1", "clusters", "Cluster", True, True),
    ("cluster.x-k8s.io", "v1beta1", "machines", "Machine", True, True),
    ("cluster.x-k8s.io", "v1beta1", "machinedeployments", "MachineDeployment", True, True),
]


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def json_patch(doc, ops):
    """RFC 6902 (add, replace, remove, test)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1]
        if isinstance(parent, list):
            idx = len(parent) if last == "-" else int(last)
            if op["op"] == "add":
                parent.insert(idx, op["value"])
            elif op["op"] == "replace":
                parent[idx] = op["value"]
            elif op["op"] == "remove":
                del parent[idx]
            elif op["op"] == "test" and parent[idx] != op["value"]:
                raise ValueError("test failed at %s" % op["path"])
        elif op["op"] in ("add", "replace"):
            parent[last] = op["value"]
        elif op["op"] == "remove":
            del parent[last]
        elif op["op"] == "test" and parent.get(last) != op["value"]:
            raise ValueError("test failed at %s" % op["path"])
    return doc


def selector_match(selector, labels):
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def field_match(selector, obj):
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        neg = "!=" in term
        path, want = term.split("!=" if neg else "=", 1)
        value = obj
        for p in path.lstrip("=").split("."):
            value = value.get(p) if isinstance(value, dict) else None
        if (str(value if value is not None else "") == want) == neg:
            return False
    return True


class Failure(Exception):
    def __init__(self, code, reason, message):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


class Store:
    def __init__(self, ready_after=0.5, token=None, history=20000):
        self.lock = threading.Lock()
        #: what watches serve: ``(resource version, type, key, object as viewed)``, the oldest first, at most
        #: ``history`` of them
        self.events = []
        self.history = history
        self.types = {}  # (group, version, plural) -> dict(kind, namespaced, status, schema)
        self.objects = {}  # (group, version, plural, namespace, name) -> object
        self.requests = []
        self.rv = 100
        self.ready_after = ready_after
        self.token = token
        for g, v, plural, kind, namespaced, status in BUILTIN:
            self.types[(g, v, plural)] = dict(kind=kind, namespaced=namespaced, status=status, schema=None)
        for ns in ("default", "kube-system"):
            self._put(
                ("", "v1", "namespaces", "", ns),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}, "status": {"phase": "Active"}},
            )

    # -- bookkeeping
    def _next_rv(self):
        self.rv += 1
        return str(self.rv)

    def _put(self, key, obj):
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now_iso())
        meta["resourceVersion"] = self._next_rv()
        if key[2] in ("deployments", "daemonsets") and "_ready_at" not in obj:  # a new object, or a new spec
            obj["_ready_at"] = time.time() + self.ready_after if self.ready_after >= 0 else None
        kind = "MODIFIED" if key in self.objects else "ADDED"
        self.objects[key] = obj
        self._event(kind, key, obj)

    def _event(self, kind, key, obj):
        """One event for the watches (the object as it is now, viewed), the history bounded."""
        self.events.append((int(obj["metadata"]["resourceVersion"]), kind, key, self.view(obj)))
        if len(self.events) > self.history:
            del self.events[: len(self.events) - self.history]

    def _remove(self, key):
        obj = self.objects.pop(key)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._event("DELETED", key, obj)

    def watch_from(self, g, v, plural, ns, since):
        """The events of a kind (in ``ns``, or all namespaces) after resource version ``since``; None when
        ``since`` is older than the history kept (the API server's 410 Gone)."""
        if self.events and since < self.events[0][0] - 1:
            return None
        return [e for e in self.events if e[0] > since and e[2][:3] == (g, v, plural) and (ns is None or e[2][3] == ns)]

    def kind_of(self, g, v, plural):
        t = self.types.get((g, v, plural))
        if t is None:
            raise Failure(
                404,
                "NotFound",
                "the server could not find the requested resource (%s/%s %s)" % (g or "core", v, plural),
            )
        return t

    def view(self, obj):
        out = copy.deepcopy(obj)
        ready_at = out.pop("_ready_at", "absent")
        if ready_at != "absent" and out["kind"] == "DaemonSet":
            ok = ready_at is not None and time.time() >= ready_at
            out["status"] = {
                "desiredNumberScheduled": 2,
                "currentNumberScheduled": 2,
                "numberReady": 2 if ok else 0,
                "numberAvailable": 2 if ok else 0,
                "updatedNumberScheduled": 2,
            }
        elif ready_at != "absent":
            replicas = out.get("spec", {}).get("replicas", 1)
            ok = ready_at is not None and time.time() >= ready_at
            out["status"] = {
                "observedGeneration": out["metadata"].get("generation", 1),
                "replicas": replicas,
                "updatedReplicas": replicas,
                "readyReplicas": replicas if ok else 0,
                "availableReplicas": replicas if ok else 0,
                "conditions": [
                    {
                        "type": "Available",
                        "status": "True" if ok else "False",
                        "reason": "MinimumReplicasAvailable" if ok else "MinimumReplicasUnavailable",
                        "lastTransitionTime": out["metadata"]["creationTimestamp"],
                    }
                ],
            }
        return out

    # -- CRDs
    def _serve_crd(self, crd):
        spec = crd["spec"]
        for version in spec["versions"]:
            self.types[(spec["group"], version["name"], spec["names"]["plural"])] = dict(
                kind=spec["names"]["kind"],
                namespaced=spec["scope"] == "Namespaced",
                status="status" in (version.get("subresources") or {}),
                schema=version["schema"]["openAPIV3Schema"],
            )
        crd["status"] = {
            "conditions": [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}],
            "acceptedNames": spec["names"],
        }

    @staticmethod
    def _string_data(plural, obj):
        """A Secret's stringData goes into data, base64-encoded, as the API server does."""
        if plural == "secrets" and obj.get("stringData"):
            data = obj.setdefault("data", {})
            for key, value in obj.pop("stringData").items():
                data[key] = base64.b64encode(str(value).encode("utf-8")).decode("ascii")
        return obj

    def _admit(self, t, obj):
        if t["schema"] is None:
            return obj
        obj, errors = crdschema.validate(t["schema"], obj)
        if errors:
            raise Failure(
                422,
                "Invalid",
                "%s %r is invalid: %s" % (t["kind"], obj.get("metadata", {}).get("name"), "; ".join(errors)),
            )
        return obj

    # -- verbs
    def list(self, g, v, plural, ns, labels=None, fields=None):
        t = self.kind_of(g, v, plural)
        items = [
            self.view(o)
            for (og, ov, op, ons, _), o in sorted(self.objects.items())
            if (og, ov, op) == (g, v, plural)
            and (ns is None or ons == ns)
            and selector_match(labels, o["metadata"].get("labels") or {})
            and field_match(fields, o)
        ]
        return {
            "apiVersion": "%s/%s" % (g, v) if g else v,
            "kind": t["kind"] + "List",
            "metadata": {"resourceVersion": str(self.rv)},
            "items": items,
        }

    def get(self, g, v, plural, ns, name):
        self.kind_of(g, v, plural)
        obj = self.objects.get((g, v, plural, ns or "", name))
        if obj is None:
            raise Failure(404, "NotFound", '%s "%s" not found' % (plural, name))
        return obj

    def _check_ns(self, t, ns):
        if t["namespaced"] and ("", "v1", "namespaces", "", ns) not in self.objects:
            raise Failure(404, "NotFound", 'namespaces "%s" not found' % ns)

    def create(self, g, v, plural, ns, body):
        t = self.kind_of(g, v, plural)
        self._check_ns(t, ns)
        meta = body.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise Failure(422, "Invalid", "metadata.name or metadata.generateName is required")
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if t["namespaced"]:
            meta["namespace"] = ns
        key = (g, v, plural, ns or "", meta["name"])
        if key in self.objects:
            raise Failure(409, "AlreadyExists", '%s "%s" already exists' % (plural, meta["name"]))
        body = self._admit(t, self._string_data(plural, body))
        body["metadata"]["generation"] = 1
        body["apiVersion"], body["kind"] = ("%s/%s" % (g, v) if g else v), t["kind"]
        if plural == "customresourcedefinitions":
            self._serve_crd(body)
        self._put(key, body)
        return body

    def update(self, g, v, plural, ns, name, new, sub=None):
        t = self.kind_of(g, v, plural)
        key = (g, v, plural, ns or "", name)
        old = self.get(g, v, plural, ns, name)
        rv = (new.get("metadata") or {}).get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise Failure(
                409,
                "Conflict",
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        if sub == "status":
            merged = copy.deepcopy(old)
            merged["status"] = new.get("status") or {}
        else:
            merged = copy.deepcopy(new)
            merged["metadata"] = merge_patch(
                old["metadata"],
                {
                    k: new.get("metadata", {}).get(k)
                    for k in ("labels", "annotations", "finalizers", "ownerReferences")
                    if k in new.get("metadata", {})
                },
            )
            if t["status"]:
                merged.pop("status", None)
                if "status" in old:
                    merged["status"] = old["status"]
            if merged.get("spec") != old.get("spec"):
                merged["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        merged.pop("_ready_at", None)
        if "_ready_at" in old and merged.get("spec") == old.get("spec"):
            merged["_ready_at"] = old["_ready_at"]
        merged = self._admit(t, self._string_data(plural, merged))
        changes = crdschema.transition_errors(t["schema"], old, merged) if t["schema"] is not None else []
        if changes:
            raise Failure(422, "Invalid", "%s %r is invalid: %s" % (t["kind"], name, "; ".join(changes)))
        if plural == "customresourcedefinitions":
            self._serve_crd(merged)
        if old["metadata"].get("deletionTimestamp") and not merged["metadata"].get("finalizers"):
            self._remove(key)
            return merged
        self._put(key, merged)
        return merged

    def delete(self, g, v, plural, ns, name):
        obj = self.get(g, v, plural, ns, name)
        if obj["metadata"].get("finalizers"):
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = now_iso()
                obj["metadata"]["resourceVersion"] = self._next_rv()
                self._event("MODIFIED", (g, v, plural, ns or "", name), obj)
            return obj
        self._remove((g, v, plural, ns or "", name))
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name}}


def _route(path):
    """(group, version, namespace, plural, name, subresource) of an API path."""
    m = re.match(
        r"^/(?:api/(?P<cv>v1)|apis/(?P<g>[^/]+)/(?P<v>[^/]+))"
        r"(?:/namespaces/(?P<ns>[^/]+)(?=/))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$",
        path,
    )
    if not m:
        return None
    g, v = ("", "v1") if m.group("cv") else (m.group("g"), m.group("v"))
    plural, name = m.group("plural"), m.group("name")
    return g, v, m.group("ns"), plural, name, m.group("sub")


def _watch(store, g, v, ns, plural, q):
    """A watch of a kind, streamed (newline-delimited JSON events) until ``timeoutSeconds`` or the client goes."""
    store.kind_of(g, v, plural)
    labels, fields = q.get("labelSelector"), q.get("fieldSelector")
    bookmarks = q.get("allowWatchBookmarks") in ("1", "true")
    timeout = float(q.get("timeoutSeconds") or 1800)
    rv = q.get("resourceVersion") or "0"
    if not rv.isdigit():
        raise Failure(400, "BadRequest", "invalid resourceVersion %r" % rv)
    since = int(rv)
    first = []
    if since == 0:  # no version: the state as it is now, each object ADDED, then what follows
        first = [
            json.dumps({"type": "ADDED", "object": o}) + "\n"
            for o in store.list(g, v, plural, ns, labels, fields)["items"]
        ]
        since = store.rv

    def matches(obj):
        return selector_match(labels, obj["metadata"].get("labels") or {}) and field_match(fields, obj)

    async def stream():
        nonlocal since
        for line in first:
            yield line
        deadline = time.monotonic() + timeout
        last_bookmark = time.monotonic()
        while time.monotonic() < deadline:
            with store.lock:
                events = store.watch_from(g, v, plural, ns, since)
                now_rv = store.rv
            if events is None:
                gone = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired"}
                gone["message"] = "too old resource version: %d (%d)" % (since, now_rv)
                yield json.dumps({"type": "ERROR", "object": gone}) + "\n"
                return
            for event_rv, kind, _key, obj in events:
                since = event_rv
                if matches(obj):
                    yield json.dumps({"type": kind, "object": obj}) + "\n"
            if bookmarks and time.monotonic() - last_bookmark > 1.0:
                since = max(since, now_rv)
                last_bookmark = time.monotonic()
                mark = {"kind": store.kind_of(g, v, plural)["kind"], "apiVersion": "%s/%s" % (g, v) if g else v}
                mark["metadata"] = {"resourceVersion": str(since)}
                yield json.dumps({"type": "BOOKMARK", "object": mark}) + "\n"
            await asyncio.sleep(0.05)

    return StreamingResponse(stream(), media_type="application/json")


def make_app(store):
    def status(exc):
        return JSONResponse(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": exc.message,
                "reason": exc.reason,
                "code": exc.code,
            },
            status_code=exc.code,
        )

    def discovery(request: Request):
        path = request.url.path.rstrip("/")
        with store.lock:
            if path == "/version":
                return JSONResponse(
                    {"major": "1", "minor": "30", "gitVersion": "v1.30.0-kubefake", "platform": "linux/amd64"}
                )
            if path == "/api":
                return JSONResponse({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
            if path == "/apis":
                groups = {}
                for g, v, _ in store.types:
                    if g:
                        groups.setdefault(g, [])
                        if v not in groups[g]:
                            groups[g].append(v)
                return JSONResponse(
                    {
                        "kind": "APIGroupList",
                        "apiVersion": "v1",
                        "groups": [
                            {
                                "name": g,
                                "versions": [{"groupVersion": "%s/%s" % (g, v), "version": v} for v in vs],
                                "preferredVersion": {"groupVersion": "%s/%s" % (g, vs[0]), "version": vs[0]},
                            }
                            for g, vs in sorted(groups.items())
                        ],
                    }
                )
            g, v = ("", "v1") if path == "/api/v1" else tuple(path.split("/")[2:4])
            resources = []
            for (tg, tv, plural), t in sorted(store.types.items()):
                if (tg, tv) != (g, v):
                    continue
                resources.append(
                    {
                        "name": plural,
                        "singularName": t["kind"].lower(),
                        "namespaced": t["namespaced"],
                        "kind": t["kind"],
                        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                    }
                )
                if t["status"]:
                    resources.append(
                        {
                            "name": plural + "/status",
                            "singularName": "",
                            "namespaced": t["namespaced"],
                            "kind": t["kind"],
                            "verbs": ["get", "patch", "update"],
                        }
                    )
            if not resources:
                return status(Failure(404, "NotFound", "no group version %s/%s" % (g, v)))
            return JSONResponse(
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": "%s/%s" % (g, v) if g else v,
                    "resources": resources,
                }
            )

    async def api(request: Request):
        path = request.url.path.rstrip("/")
        ctype = request.headers.get("content-type", "").split(";")[0]
        store.requests.append(
            {"method": request.method, "path": path, "query": dict(request.query_params), "content_type": ctype}
        )
        if store.token and request.headers.get("authorization") != "Bearer " + store.token:
            return status(Failure(401, "Unauthorized", "Unauthorized"))
        if path in ("/version", "/api", "/apis", "/api/v1") or re.match(r"^/apis/[^/]+/[^/]+$", path):
            return discovery(request)
        r = _route(path)
        if r is None:
            return status(Failure(404, "NotFound", "the server could not find the requested resource"))
        g, v, ns, plural, name, sub = r
        body = None
        if request.method in ("POST", "PUT", "PATCH"):
            raw = await request.body()
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                import yaml

                body = yaml.safe_load(raw)
        q = request.query_params
        try:
            with store.lock:
                if request.method == "GET":
                    if request.query_params.get("watch") in ("1", "true"):
                        return _watch(store, g, v, ns, plural, q)
                    if name is None:
                        return JSONResponse(
                            store.list(g, v, plural, ns, q.get("labelSelector"), q.get("fieldSelector"))
                        )
                    return JSONResponse(store.view(store.get(g, v, plural, ns, name)))
                if request.method == "POST" and name is None:
                    return JSONResponse(store.view(store.create(g, v, plural, ns, body)), status_code=201)
                if request.method == "PUT":
                    return JSONResponse(store.view(store.update(g, v, plural, ns, name, body, sub)))
                if request.method == "PATCH":
                    current = store.view(store.get(g, v, plural, ns, name))
                    if ctype == "application/json-patch+json":
                        new = json_patch(current, body)
                    else:  # merge, strategic merge (taken as a merge) and apply
                        new = merge_patch(current, body)
                    new.setdefault("metadata", {}).pop("resourceVersion", None)
                    return JSONResponse(store.view(store.update(g, v, plural, ns, name, new, sub)))
                if request.method == "DELETE" and name:
                    out = store.delete(g, v, plural, ns, name)
                    return JSONResponse(store.view(out) if out.get("kind") != "Status" else out)
        except Failure as exc:
            return status(exc)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return status(Failure(400, "BadRequest", "bad request: %s" % exc))
        return status(Failure(405, "MethodNotAllowed", "method not allowed"))

    async def requests_log(request: Request):
        if request.method == "DELETE":
            store.requests.clear()
        return JSONResponse(list(store.requests))

    return Starlette(
        routes=[
            Route("/_fake/requests", requests_log, methods=["GET", "DELETE"]),
            Route("/{path:path}", api, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        ]
    )


def kubeconfig(url, token="kubefake"):
    """A kubeconfig document for the fake."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "kubefake",
        "clusters": [{"name": "kubefake", "cluster": {"server": url}}],
        "users": [{"name": "kubefake", "user": {"token": token}}],
        "contexts": [{"name": "kubefake", "context": {"cluster": "kubefake", "user": "kubefake"}}],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description="a fake Kubernetes API server for the controller tests")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--token", default="kubefake")
    ap.add_argument("--deployment-ready-after", type=float, default=0.5)
    ap.add_argument("--kubeconfig", help="write a kubeconfig for the fake here")
    ap.add_argument("--watch-history", type=int, default=20000, help="events kept for watches (older: 410 Gone)")
    args = ap.parse_args(argv)
    store = Store(args.deployment_ready_after, args.token, args.watch_history)
    config = uvicorn.Config(make_app(store), host=args.host, port=args.port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)

    def announce():
        while not server.started:
            time.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        url = "http://%s:%d" % (args.host, port)
        if args.kubeconfig:
            with open(args.kubeconfig, "w", encoding="utf-8") as fh:
                json.dump(kubeconfig(url, args.token), fh)
        print(url, flush=True)

    threading.Thread(target=announce, daemon=True).start()
    server.run()


if __name__ == "__main__":
    main()
