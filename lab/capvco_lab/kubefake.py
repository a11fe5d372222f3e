#!/usr/bin/env python3
"""A fake Kubernetes API server: the client boundary of the controller tests.

There is no kube-apiserver here, so the tests talk to this one over real HTTP, with the real ``kubernetes`` client
and kubernetes.core modules.  It keeps objects in memory (``kubestore``: the verbs, the status subresource,
finalizers, CRDs that serve and validate their kinds, the Deployment and DaemonSet stand-ins) and serves what those
clients use:

* discovery (``/version``, ``/api``, ``/apis``, a group's ``/apis/GROUP`` with its preferred version, the
  group/version resource lists);
* the verbs on their paths, and patch as JSON merge patch, strategic merge patch (taken as a merge patch) or JSON
  patch;
* watches (``?watch=true``) of a kind, in a namespace or in all: from a ``resourceVersion`` (an ADDED event per
  matching object first when none is given, or ``0``), ADDED, MODIFIED and DELETED events as newline-delimited
  JSON, selectors applied, ``timeoutSeconds`` honoured, ``BOOKMARK`` events when asked for
  (``allowWatchBookmarks``); a version older than the history kept (``--watch-history`` events) is answered with
  an ERROR event of code 410 (Gone), as the API server does, so a client lists again;
* Cluster API's own CRDs and its core's part of the contract (``kubecapi``: ``--cluster-api``, a release it holds the
  CRDs of, or ``none``).

Every request is recorded; ``GET /_fake/requests`` returns them (method, path, query, content type) and ``DELETE``
clears them.  ``POST /_fake/hang`` with ``{"path": REGEX, "user_agent": UA}`` makes the requests whose path matches
(and, when given, whose User-Agent is UA) hang, unanswered, as an API server gone silent mid-request, until
``DELETE /_fake/hang`` lets them go on.

    python -m capvco_lab.kubefake --port 0 [--token T] [--deployment-ready-after 1] [--cluster-api v1.10.0]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import re
import threading
import time

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from capvco_lab import kubecapi
from capvco_lab.kubestore import Failure, Store, field_match, merge_patch, selector_match

_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version):
    """Kubernetes' order of a group's versions, the preferred first: GA, then beta, then alpha, each the higher
    number first; a version of another form after them, by name."""
    m = _VERSION.match(version)
    if not m:
        return (0, 0, 0, version)
    rank = {"alpha": 1, "beta": 2}.get(m.group(2), 3)
    return (-rank, -int(m.group(1)), -int(m.group(3) or 0), version)


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
    store.stored(g, v, plural)
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


def groups(store):
    """``{group: its versions, the preferred first}`` of the named groups the store serves."""
    out = {}
    for g, v, _ in store.types:
        if g and v not in out.setdefault(g, []):
            out[g].append(v)
    return {g: sorted(vs, key=version_priority) for g, vs in sorted(out.items())}


def make_app(store):
    #: what hangs: (path regex, User-Agent or None)
    hangs = []

    def hung(request):
        ua = request.headers.get("user-agent")
        return any(re.search(p, request.url.path) and u in (None, ua) for p, u in hangs)

    def group(name):
        versions = groups(store)[name]
        return {
            "name": name,
            "versions": [{"groupVersion": "%s/%s" % (name, v), "version": v} for v in versions],
            "preferredVersion": {"groupVersion": "%s/%s" % (name, versions[0]), "version": versions[0]},
        }

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
                return JSONResponse(
                    {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group(g) for g in groups(store)]}
                )
            if re.match(r"^/apis/[^/]+$", path):
                name = path.split("/")[2]
                if name not in groups(store):
                    return status(Failure(404, "NotFound", "the server could not find the requested resource"))
                return JSONResponse(dict(group(name), kind="APIGroup", apiVersion="v1"))
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
        while hung(request):
            await asyncio.sleep(0.02)
        if store.token and request.headers.get("authorization") != "Bearer " + store.token:
            return status(Failure(401, "Unauthorized", "Unauthorized"))
        if path in ("/version", "/api", "/apis", "/api/v1") or re.match(r"^/apis/[^/]+(/[^/]+)?$", path):
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

    async def hang(request: Request):
        if request.method == "DELETE":
            hangs.clear()
        else:
            body = await request.json()
            hangs.append((body["path"], body.get("user_agent")))
        return JSONResponse([list(h) for h in hangs])

    return Starlette(
        routes=[
            Route("/_fake/requests", requests_log, methods=["GET", "DELETE"]),
            Route("/_fake/hang", hang, methods=["POST", "DELETE"]),
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
    ap.add_argument(
        "--cluster-api",
        default=kubecapi.LATEST,
        choices=sorted(kubecapi.RELEASES) + ["none"],
        help="the Cluster API release whose CRDs and core stand-in it serves (default %(default)s)",
    )
    args = ap.parse_args(argv)
    store = Store(args.deployment_ready_after, args.token, args.watch_history)
    if args.cluster_api != "none":
        kubecapi.install(store, args.cluster_api)
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
