"""The fake Kubernetes API server's state: its kinds, its objects, their verbs and the history its watches serve
(``kubefake`` serves it over HTTP, and applies a patch as a replace).

* get, list (label and field selectors), create (``generateName`` too), replace, delete; the ``status``
  subresource (writes to the object keep its status, writes to ``/status`` change only the status); finalizers (a
  delete sets ``deletionTimestamp`` until the last finalizer goes); namespaces must exist; ``resourceVersion``
  conflicts give 409;
* CustomResourceDefinitions: creating one serves its kind at each version it serves, its custom resources defaulted
  and validated against that version's schema (strict fields), an update against its transition rules
  (``x-kubernetes-validations``: the one rule ``self == oldSelf``; ``crdschema``).  An object is kept at the CRD's
  storage version; a request at another served version is converted as the CRD says: ``None`` (the apiVersion
  only), or ``Webhook``, which this fake cannot call: it answers as an API server whose webhook does not (500);
* stand-ins for the Deployment and DaemonSet controllers: a Deployment reports Available (a DaemonSet, ready on its
  2 nodes) ``ready_after`` seconds after each change (never, when negative); and ``hooks``, called with each object
  written (Cluster API's core stand-in, ``kubecapi``).
"""

from __future__ import annotations

import base64
import copy
import datetime
import threading
import time
import uuid

from capvco_lab import crdschema

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
        self.lock = threading.RLock()
        #: what watches serve: ``(resource version, type, key, object as viewed)``, the oldest first, at most
        #: ``history`` of them
        self.events = []
        self.history = history
        #: (group, version, plural) -> dict(kind, namespaced, status, schema, storage, conversion, crd)
        self.types = {}
        self.objects = {}  # (group, storage version, plural, namespace, name) -> object
        self.requests = []
        self.rv = 100
        self.ready_after = ready_after
        self.token = token
        #: called as ``hook(store, key, object)`` after each object is written (the lock held)
        self.hooks = []
        self.cluster_api = None  # the Cluster API release served (kubecapi.install)
        for g, v, plural, kind, namespaced, status in BUILTIN:
            self.types[(g, v, plural)] = dict(
                kind=kind,
                namespaced=namespaced,
                status=status,
                schema=None,
                storage=v,
                conversion=None,
                crd=None,
                webhook={},
            )
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
        for hook in self.hooks:
            hook(self, key, obj)

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
        stored = self.stored(g, v, plural)
        return [
            (rv, kind, key, self.as_version(obj, g, v))
            for rv, kind, key, obj in self.events
            if rv > since and key[:3] == (g, stored, plural) and (ns is None or key[3] == ns)
        ]

    def kind_of(self, g, v, plural):
        t = self.types.get((g, v, plural))
        if t is None:
            raise Failure(
                404,
                "NotFound",
                "the server could not find the requested resource (%s/%s %s)" % (g or "core", v, plural),
            )
        return t

    def stored(self, g, v, plural):
        """The version the objects of a kind asked for at ``v`` are kept at; a conversion this fake cannot make (a
        CRD's webhook: it runs none) is the API server's answer when the webhook does not answer."""
        t = self.kind_of(g, v, plural)
        if t["storage"] != v and t["conversion"] == "Webhook":
            service = t["webhook"].get("service") or {}
            raise Failure(
                500,
                "InternalError",
                'conversion webhook for %s/%s, Kind=%s failed: Post "https://%s.%s.svc:443%s": the fake API server '
                "runs no conversion webhook"
                % (g, t["storage"], t["kind"], service.get("name"), service.get("namespace"), service.get("path", "")),
            )
        return t["storage"]

    @staticmethod
    def as_version(obj, g, v):
        """``obj`` viewed at version ``v`` (its apiVersion, the only change a conversion of strategy None makes)."""
        if obj.get("apiVersion") == "%s/%s" % (g, v) or not g:
            return obj
        return dict(obj, apiVersion="%s/%s" % (g, v))

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
        served = [v for v in spec["versions"] if v.get("served", True)]
        storage = next((v["name"] for v in served if v.get("storage")), served[0]["name"])
        for version in served:
            self.types[(spec["group"], version["name"], spec["names"]["plural"])] = dict(
                kind=spec["names"]["kind"],
                namespaced=spec["scope"] == "Namespaced",
                status="status" in (version.get("subresources") or {}),
                schema=version["schema"]["openAPIV3Schema"],
                storage=storage,
                conversion=(spec.get("conversion") or {}).get("strategy") or "None",
                crd=crd["metadata"]["name"],
                webhook=((spec.get("conversion") or {}).get("webhook") or {}).get("clientConfig") or {},
            )
        crd["status"] = {
            "conditions": [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}],
            "acceptedNames": spec["names"],
            "storedVersions": [storage],
        }

    @staticmethod
    def _string_data(plural, obj):
        """A Secret's stringData goes into data, base64-encoded, as the API server does."""
        if plural == "secrets" and obj.get("stringData"):
            data = obj.setdefault("data", {})
            for key, value in obj.pop("stringData").items():
                data[key] = base64.b64encode(str(value).encode("utf-8")).decode("ascii")
        return obj

    def admit(self, t, obj):
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
        stored = self.stored(g, v, plural)
        items = [
            self.as_version(self.view(o), g, v)
            for (og, ov, op, ons, _), o in sorted(self.objects.items())
            if (og, ov, op) == (g, stored, plural)
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
        obj = self.objects.get((g, self.stored(g, v, plural), plural, ns or "", name))
        if obj is None:
            raise Failure(404, "NotFound", '%s "%s" not found' % (plural, name))
        return self.as_version(obj, g, v)

    def _check_ns(self, t, ns):
        if t["namespaced"] and ("", "v1", "namespaces", "", ns) not in self.objects:
            raise Failure(404, "NotFound", 'namespaces "%s" not found' % ns)

    def create(self, g, v, plural, ns, body):
        t = self.kind_of(g, v, plural)
        stored = self.stored(g, v, plural)
        self._check_ns(t, ns)
        meta = body.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise Failure(422, "Invalid", "metadata.name or metadata.generateName is required")
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if t["namespaced"]:
            meta["namespace"] = ns
        key = (g, stored, plural, ns or "", meta["name"])
        if key in self.objects:
            raise Failure(409, "AlreadyExists", '%s "%s" already exists' % (plural, meta["name"]))
        body = self.admit(t, self._string_data(plural, body))
        body["metadata"]["generation"] = 1
        body["apiVersion"], body["kind"] = ("%s/%s" % (g, stored) if g else v), t["kind"]
        if plural == "customresourcedefinitions":
            self._serve_crd(body)
        self._put(key, body)
        return self.as_version(body, g, v)

    def update(self, g, v, plural, ns, name, new, sub=None):
        t = self.kind_of(g, v, plural)
        stored = self.stored(g, v, plural)
        key = (g, stored, plural, ns or "", name)
        old = self.get(g, stored, plural, ns, name)
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
        merged["apiVersion"] = old["apiVersion"]
        merged.pop("_ready_at", None)
        if "_ready_at" in old and merged.get("spec") == old.get("spec"):
            merged["_ready_at"] = old["_ready_at"]
        merged = self.admit(t, self._string_data(plural, merged))
        changes = crdschema.transition_errors(t["schema"], old, merged) if t["schema"] is not None else []
        if changes:
            raise Failure(422, "Invalid", "%s %r is invalid: %s" % (t["kind"], name, "; ".join(changes)))
        if plural == "customresourcedefinitions":
            self._serve_crd(merged)
        if old["metadata"].get("deletionTimestamp") and not merged["metadata"].get("finalizers"):
            self._remove(key)
            return self.as_version(merged, g, v)
        self._put(key, merged)
        return self.as_version(merged, g, v)

    def delete(self, g, v, plural, ns, name):
        stored = self.stored(g, v, plural)
        obj = self.get(g, stored, plural, ns, name)
        if obj["metadata"].get("finalizers"):
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = now_iso()
                obj["metadata"]["resourceVersion"] = self._next_rv()
                self._event("MODIFIED", (g, stored, plural, ns or "", name), obj)
            return self.as_version(obj, g, v)
        self._remove((g, stored, plural, ns or "", name))
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name}}
