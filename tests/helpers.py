"""Shared test helpers: start the real emulator, talk to its admin API, run playbooks."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap

import httpx
import pytest
import yaml

from capvco_lab.emulator import COLLECTIONS, CUSTOMER, ROOT, TOKEN, Emulator, ServerProcess, wait_for  # noqa: F401 (re-exported)

#: The reason the contract tests give when the platform's spec is not beside the checkout.
SPEC_ABSENT = "../shared/reference/whitesky-api.json is not present"


def save_figures(filename, figures, label):
    """Write a property test's figures to ``tests/output/FILENAME`` and print them (a CI log shows them whole)."""
    out = os.path.join(ROOT, "tests", "output")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, filename), "w") as fh:
        json.dump(figures, fh, indent=1)
    print("\n%s: %s" % (label, json.dumps(figures)))


def require(ok, why):
    """Skip the test unless ``ok``; fail it instead under ``CAPVCO_REQUIRE_ALL=1`` (see tests/conftest.py)."""
    if ok:
        return
    if os.environ.get("CAPVCO_REQUIRE_ALL") == "1":
        pytest.fail("prerequisite missing under CAPVCO_REQUIRE_ALL=1: %s" % why, pytrace=False)
    pytest.skip(why)


def read_text(path):
    """A file's text (UTF-8)."""
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def ensure_collection_link():
    """The link ``make link`` makes, for a pytest run without make (Python finds it through the venv's .pth)."""
    link = os.path.join(COLLECTIONS, "ansible_collections", "whitesky", "capvco")
    if not os.path.islink(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another pytest worker made it first
            os.symlink(ROOT, link)


def build_collection(output_dir):
    """``ansible-galaxy collection build`` of this checkout into ``output_dir``; the tarball's path."""
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1")
    subprocess.run(
        [os.path.join(bindir, "ansible-galaxy"), "collection", "build", "--output-path", str(output_dir), ROOT],
        env=env,
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    (tarball,) = [os.path.join(output_dir, n) for n in os.listdir(output_dir) if n.startswith("whitesky-capvco-")]
    return tarball


def run_consumer_check(name, timeout=900):
    """``tests/consumers/NAME`` with this venv's Ansible (``make consumers`` runs it on the oldest and the newest
    ansible-core): the completed process."""
    check = os.path.join(ROOT, "tests", "consumers", name)
    return subprocess.run(
        [sys.executable, check, "--ansible-bin", os.path.dirname(sys.executable)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_playbook(
    playbook,
    emulator=None,
    extra_vars=None,
    check=False,
    diff=False,
    env=None,
    timeout=600,
    verbosity=0,
    inventory=None,
):
    """Run ansible-playbook; return (rc, stdout+stderr, the json callback's document or None)."""
    bindir = os.path.dirname(sys.executable)
    cmd = [os.path.join(bindir, "ansible-playbook"), playbook]
    if inventory:
        cmd += ["-i", inventory]
    if verbosity:
        cmd.append("-" + "v" * verbosity)
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    if check:
        cmd.append("--check")
    if diff:
        cmd.append("--diff")
    full_env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
        ANSIBLE_NOCOLOR="1",
        PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
    )
    if emulator:
        full_env.update(emulator.env())
    full_env.update(env or {})
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=timeout, cwd=ROOT)
    out = proc.stdout + proc.stderr
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        data = None
    return proc.returncode, out, data


def task_results(data, name):
    """Per-host results of the task called NAME in an ansible.builtin.json callback output."""
    found = []
    for play in data["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"] == name:
                found.extend(task["hosts"].values())
    return found


def play_tasks(tmp_path, tasks, emulator, **kw):
    """Run TASKS (YAML, a task list) in a localhost play written under TMP_PATH, against EMULATOR:
    ``(rc, output, json callback data)``; the data must parse."""
    path = tmp_path / "play.yml"
    path.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"
        + textwrap.indent(textwrap.dedent(tasks), "    ")
    )
    rc, out, data = run_playbook(str(path), emulator, **kw)
    assert data, out[-3000:]
    return rc, out, data


def one_result(data, name):
    """The one host result of the task called NAME."""
    (result,) = task_results(data, name)
    return result


class KubeFake(ServerProcess):
    """The fake Kubernetes API server (tests/kubefake.py) as a process, with a kubeconfig for it."""

    what = "kubefake"

    def __init__(self, workdir, ready_after=0.3, watch_history=None):
        super().__init__()
        self.kubeconfig = os.path.join(str(workdir), "kubefake.kubeconfig")
        self.ready_after = ready_after
        self.watch_history = watch_history

    def argv(self):
        return [
            sys.executable,
            os.path.join(ROOT, "tests", "kubefake.py"),
            "--port",
            "0",
            "--kubeconfig",
            self.kubeconfig,
            "--deployment-ready-after",
            str(self.ready_after),
        ] + (["--watch-history", str(self.watch_history)] if self.watch_history else [])

    def env(self):
        return {"K8S_AUTH_KUBECONFIG": self.kubeconfig}

    def requests(self):
        return httpx.get(self.url + "/_fake/requests", timeout=10).json()

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
    """A started fake API server that serves the CAPVCO kinds (their CRDs created)."""
    fake = KubeFake(workdir, **kw).start()
    for crd in yaml.safe_load(read_text(CRDS))["items"]:
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
    api = obj["apiVersion"]
    base = "/api/v1" if api == "v1" else "/apis/" + api
    ns = obj["metadata"].get("namespace")
    if obj["kind"] in ("Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"):
        ns = None
    return base + ("/namespaces/%s" % ns if ns else "") + "/" + PLURAL[obj["kind"]]


def object_path(obj):
    return collection_path(obj) + "/" + obj["metadata"]["name"]


SRIOV_PLAY = """\
- name: SR-IOV add-on
  hosts: localhost
  gather_facts: false
  roles:
    - role: whitesky.capvco.sriov_agent
"""


#: The role's variables for a rendering (a test overrides what it is about).
SRIOV_VARS = {
    "sriov_agent_enabled": True,
    "sriov_agent_credential": "agent-token-0123456789",
    "sriov_agent_cluster_credential": "cluster-token-abcdef",
    "sriov_agent_api_url": "https://portal.example/api/1",
    "sriov_agent_customer_id": "capvco-demo",
    "sriov_agent_location": "be-gen-1",
    "sriov_agent_cloudspace_id": "cs-demo",
    "sriov_agent_networks": [{"name": "sriov-ext", "network": "sriov-ext"}],
}


def render_sriov(tmp_path, variables):
    """roles/sriov_agent rendered to a file (``sriov_agent_render_dir``): (rc, output, json document, manifests)."""
    play = tmp_path / "play.yml"
    play.write_text(SRIOV_PLAY)
    out_dir = tmp_path / "out"
    rc, out, data = run_playbook(str(play), extra_vars=dict(variables, sriov_agent_render_dir=str(out_dir)))
    rendered = out_dir / "sriov-agent.yaml"
    docs = list(yaml.safe_load_all(rendered.read_text(encoding="utf-8"))) if rendered.exists() else None
    return rc, out, data, docs


# --- a failure reads with its reason, and never with a secret (issue 39): the roles' clusters that fail -------------


def unreachable_kubeconfig(tmp_path):
    """A kubeconfig whose cluster does not answer (a port nothing listens on); returns (its path, the port)."""
    import socket

    with socket.socket() as s:  # a free port, closed again: connections to it are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = tmp_path / "gone.kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "gone",
                "clusters": [{"name": "gone", "cluster": {"server": "http://127.0.0.1:%d" % port}}],
                "users": [{"name": "gone", "user": {"token": "kube-token-0123"}}],
                "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "gone"}}],
            }
        )
    )
    return str(path), port


#: What RefusingProxy answers about Secrets while it refuses them.
REFUSAL = "secrets is forbidden: denied by the admission policy no-secrets-here"


class RefusingProxy:
    """kubefake behind a proxy that, while ``refuse`` is set, refuses every request about Secrets (403, as an
    admission policy would): ``kubeconfig`` is a kubeconfig for the proxy. A context manager."""

    def __init__(self, kube, tmp_path):
        import threading
        import urllib.parse

        self.kube, self.tmp_path = kube, tmp_path
        with open(kube.kubeconfig) as fh:
            self.config = yaml.safe_load(fh)
        self.upstream = urllib.parse.urlsplit(self.config["clusters"][0]["cluster"]["server"])
        self.refuse = threading.Event()
        self.server = None
        self.kubeconfig = str(tmp_path / "proxied.kubeconfig")

    def __enter__(self):
        import http.client
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        upstream, refuse = self.upstream, self.refuse

        class Proxy(BaseHTTPRequestHandler):
            def forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if "/secrets" in self.path and refuse.is_set():
                    status, headers = 403, {"Content-Type": "application/json"}
                    data = json.dumps(
                        {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                         "code": 403, "message": REFUSAL}
                    ).encode()  # fmt: skip
                else:
                    conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=30)
                    conn.request(self.command, self.path, body or None, dict(self.headers))
                    answer = conn.getresponse()
                    status, data = answer.status, answer.read()
                    headers = dict(answer.getheaders())
                    conn.close()
                self.send_response(status)
                for k, v in headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = forward

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        config = json.loads(json.dumps(self.config))
        config["clusters"][0]["cluster"]["server"] = "http://127.0.0.1:%d" % self.server.server_address[1]
        with open(self.kubeconfig, "w") as fh:
            json.dump(config, fh)
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
