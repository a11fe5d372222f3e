"""The fake Kubernetes API server (``kubefake``) and the controller (``python -m capvco_controller``) as processes,
for the tests and the benchmarks: ``KubeFake`` with a kubeconfig for it, ``kube_with_crds`` (one that serves the
CAPVCO kinds, their CRDs created, beside Cluster API's), ``Controller`` with its log, its probes and its metrics, and
the paths of an object's kind on the API."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import httpx
import yaml

from capvco_lab import kubecapi
from capvco_lab.emulator import ROOT, ServerProcess, wait_for


class KubeFake(ServerProcess):
    """The fake Kubernetes API server (``python -m capvco_lab.kubefake``) as a process, with a kubeconfig for it;
    ``cluster_api`` is the Cluster API release whose CRDs and core it serves (``kubecapi.RELEASES``, or None)."""

    what = "kubefake"

    def __init__(self, workdir, ready_after=0.3, watch_history=None, cluster_api=kubecapi.LATEST):
        super().__init__()
        self.kubeconfig = os.path.join(str(workdir), "kubefake.kubeconfig")
        self.ready_after = ready_after
        self.watch_history = watch_history
        self.cluster_api = cluster_api

    def argv(self):
        return [
            sys.executable,
            "-m",
            "capvco_lab.kubefake",
            "--port",
            "0",
            "--kubeconfig",
            self.kubeconfig,
            "--deployment-ready-after",
            str(self.ready_after),
            "--cluster-api",
            self.cluster_api or "none",
        ] + (["--watch-history", str(self.watch_history)] if self.watch_history else [])

    @property
    def capi_version(self):
        """The version of ``cluster.x-k8s.io`` a client reads here: v1beta2 when served, else v1beta1."""
        return kubecapi.RELEASES[self.cluster_api] if self.cluster_api else None

    def env(self):
        return {"K8S_AUTH_KUBECONFIG": self.kubeconfig}

    def requests(self):
        return httpx.get(self.url + "/_fake/requests", timeout=10).json()

    def hang(self, path, user_agent=None):
        """Requests whose path matches the regex ``path`` (from the client ``user_agent`` only, when given) hang
        unanswered from now on, until :meth:`unhang`."""
        httpx.post(
            self.url + "/_fake/hang", json={"path": path, "user_agent": user_agent}, timeout=10
        ).raise_for_status()

    def unhang(self):
        """The hung requests go on, and no more hang."""
        httpx.delete(self.url + "/_fake/hang", timeout=10).raise_for_status()

    def call(self, method, path, body=None, content_type="application/json"):
        resp = httpx.request(
            method,
            self.url + path,
            content=json.dumps(body) if body is not None else None,
            headers={"Authorization": "Bearer kubefake", "Content-Type": content_type},
            timeout=10,
        )
        return resp.status_code, resp.json()

    def create(self, obj):
        code, out = self.call("POST", collection_path(obj), obj)
        if code != 201:
            raise RuntimeError("create %s/%s: %s %s" % (obj["kind"], obj["metadata"]["name"], code, out))
        return out

    def get(self, obj_or_kind, name=None, namespace="default"):
        path = (
            object_path(obj_or_kind)
            if name is None
            else object_path(
                {
                    "apiVersion": obj_or_kind[0],
                    "kind": obj_or_kind[1],
                    "metadata": {"name": name, "namespace": namespace},
                }
            )
        )
        code, out = self.call("GET", path)
        return out if code == 200 else None

    def path(self, obj):
        """``obj``'s path on the API."""
        return object_path(obj)

    def merge(self, obj, patch):
        return self.call("PATCH", object_path(obj), patch, "application/merge-patch+json")

    def delete(self, obj):
        return self.call("DELETE", object_path(obj))

    def events(self, namespace="default"):
        return self.call("GET", "/api/v1/namespaces/%s/events" % namespace)[1]["items"]


class Controller:
    """The controller (``python -m capvco_controller``, or ``command``: its image under podman) as a process against
    a fake API server and an emulator, its log in a file; its health port is read from the log. ``command(env)`` gives
    the argv that runs the controller with that environment."""

    def __init__(self, kube, emulator, workdir, *args, env=None, command=None):
        self.kube, self.emulator = kube, emulator
        self.command = command or (lambda _env: [sys.executable, "-m", "capvco_controller"])
        self.log = os.path.join(str(workdir), "controller-%d.log" % id(self))
        self.args = list(args)
        self.env = env
        self.proc = None
        self.port = None
        self.metrics_port = None

    def start(self, wait_ready=True):
        env = dict(os.environ, **(self.emulator.env() if self.emulator is not None else {}))
        env.pop("K8S_AUTH_KUBECONFIG", None)
        env.update(self.env or {})
        argv = self.command(env) + ["--kubeconfig", self.kube.kubeconfig]
        argv += ["--health-probe-bind-address", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0"] + self.args
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log, env=env, start_new_session=True)
        if not wait_for(lambda: self._port() is not None or self.proc.poll() is not None, 60):
            raise RuntimeError("the controller did not serve its probes: " + self.text()[-3000:])
        if self.proc.poll() is not None:
            raise RuntimeError("the controller exited %s: %s" % (self.proc.returncode, self.text()[-3000:]))
        if wait_ready and not wait_for(lambda: self.probe("/readyz") == 200, 120):
            raise RuntimeError("the controller never became ready: " + self.text()[-3000:])
        return self

    def _port(self):
        """The probes' port and the metrics' (each served only on its own address), once both are logged."""
        text = self.text()
        served = re.findall(r"serving ([/a-z, ]+) on port (\d+)", text)
        probes = [s for s in served if "/healthz" in s[0]]
        metrics = [s for s in served if "/metrics" in s[0]]
        if probes and metrics:
            self.port, self.metrics_port = int(probes[-1][1]), int(metrics[-1][1])
        return self.port

    def text(self):
        with open(self.log, encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def probe(self, path, port=None):
        """The status of GET ``path`` on the probes' port (or ``port``); None when nothing answers."""
        try:
            return httpx.get("http://127.0.0.1:%d%s" % (port or self.port, path), timeout=5).status_code
        except httpx.HTTPError:
            return None

    def metrics(self):
        """``{name{labels}: value}`` of /metrics."""
        text = httpx.get("http://127.0.0.1:%d/metrics" % self.metrics_port, timeout=10).text
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def stop(self, sig=15, timeout=30):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode if self.proc is not None else None


#: The CAPVCO CustomResourceDefinitions, as the controller's role applies them.
CRDS = os.path.join(ROOT, "roles", "capvco_controller", "files", "crds.yaml")


def kube_with_crds(workdir, **kw):
    """A started fake API server that serves the CAPVCO kinds (their CRDs created as the controller's role applies
    them), beside the Cluster API release ``cluster_api`` (``KubeFake``)."""
    fake = KubeFake(workdir, **kw).start()
    with open(CRDS, encoding="utf-8") as fh:
        crds = yaml.safe_load(fh)["items"]
    for crd in crds:
        fake.create(crd)
    return fake


PLURAL = {
    "VCOCluster": "vcoclusters",
    "VCOMachine": "vcomachines",
    "VCOMachineTemplate": "vcomachinetemplates",
    "Cluster": "clusters",
    "Machine": "machines",
    "Secret": "secrets",
    "Namespace": "namespaces",
    "CustomResourceDefinition": "customresourcedefinitions",
    "Deployment": "deployments",
    "DaemonSet": "daemonsets",
}


def collection_path(obj):
    """The path of ``obj``'s kind (in its namespace) on the API."""
    api = obj["apiVersion"]
    base = "/api/v1" if api == "v1" else "/apis/" + api
    ns = obj["metadata"].get("namespace")
    if obj["kind"] in ("Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"):
        ns = None
    return base + ("/namespaces/%s" % ns if ns else "") + "/" + PLURAL[obj["kind"]]


def object_path(obj):
    """The path of ``obj`` on the API."""
    return collection_path(obj) + "/" + obj["metadata"]["name"]
