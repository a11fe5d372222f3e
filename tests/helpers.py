"""Shared test helpers: start the real emulator, talk to its admin API, run playbooks."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".build", "collections")
TOKEN = "capvco-demo-token"
CUSTOMER = "capvco-demo"


#: The reason the contract tests give when the platform's spec is not beside the checkout.
SPEC_ABSENT = "../shared/reference/whitesky-api.json is not present"


def require(ok, why):
    """Skip the test unless ``ok``; fail it instead under ``CAPVCO_REQUIRE_ALL=1`` (see tests/conftest.py)."""
    if ok:
        return
    if os.environ.get("CAPVCO_REQUIRE_ALL") == "1":
        pytest.fail("prerequisite missing under CAPVCO_REQUIRE_ALL=1: %s" % why, pytrace=False)
    pytest.skip(why)


def ensure_collection_link():
    link = os.path.join(COLLECTIONS, "ansible_collections", "whitesky", "capvco")
    if not os.path.islink(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        try:
            os.symlink(ROOT, link)
        except FileExistsError:  # another pytest worker made it first
            pass
    if COLLECTIONS not in sys.path:
        sys.path.insert(0, COLLECTIONS)


class Emulator:
    """A real emulator process on a free loopback port."""

    def __init__(self, state_dir, token=TOKEN, extra_args=()):
        self.state_dir = str(state_dir)
        self.token = token
        self.extra_args = list(extra_args)
        self.proc = None
        self.url = None

    def start(self):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "bin", "whitesky-emulator"), "--port", "0",
             "--state-dir", self.state_dir, "--token", self.token] + self.extra_args,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http"):
            raise RuntimeError("emulator did not start: %r" % line)
        self.url = line
        self.admin_url = line[: -len("/api/1")] + "/_emulator"
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)

    def admin(self, method, path, body=None):
        resp = httpx.request(method, self.admin_url + path, json=body, timeout=30)
        resp.raise_for_status()
        return resp.json()

    def faults(self, **cfg):
        return self.admin("POST", "/faults", cfg)

    def stats(self):
        return self.admin("GET", "/stats")

    def reset_stats(self):
        return self.admin("DELETE", "/stats")

    def ledger(self):
        return self.admin("GET", "/ledger")

    def quiesce(self, timeout=30.0, settle=0.2):
        """Wait until every request already sent has been answered (e.g. those of a killed run).

        Done when no request is in flight and none arrived for ``settle``
        seconds (a request still in the server's socket buffer lands meanwhile).
        """
        seen = [None, time.monotonic()]

        def quiet():
            stats = self.stats()
            now = time.monotonic()
            if stats["in_flight"] or stats["requests"] != seen[0]:
                seen[:] = [stats["requests"], now]
                return False
            return now - seen[1] >= settle

        if not wait_for(quiet, timeout=timeout, interval=settle / 4):
            raise AssertionError("the emulator still had requests in flight after %ss" % timeout)

    def op_count(self, operation):
        return self.stats()["operations"].get(operation, {}).get("count", 0)

    def env(self):
        return {"WHITESKY_API_URL": self.url, "WHITESKY_API_TOKEN": self.token, "WHITESKY_CUSTOMER_ID": CUSTOMER}

    def client(self, **kw):
        from ansible_collections.whitesky.capvco.plugins.module_utils.client import WhiteskyClient

        kw.setdefault("timeout", 10)
        return WhiteskyClient(self.url, self.token, CUSTOMER, **kw)


def run_playbook(playbook, emulator=None, extra_vars=None, check=False, diff=False, env=None, timeout=600,
                 verbosity=0, inventory=None):
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
    full_env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_FORCE_COLOR="0",
                    ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1",
                    PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
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


def wait_for(predicate, timeout=10.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


class KubeFake:
    """The fake Kubernetes API server (tests/kubefake.py) as a process, with a kubeconfig for it."""

    def __init__(self, workdir, ready_after=0.3):
        self.kubeconfig = os.path.join(str(workdir), "kubefake.kubeconfig")
        self.ready_after = ready_after
        self.proc = None
        self.url = None

    def start(self):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "tests", "kubefake.py"), "--port", "0", "--kubeconfig",
             self.kubeconfig, "--deployment-ready-after", str(self.ready_after)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http"):
            raise RuntimeError("kubefake did not start: %r" % line)
        self.url = line
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def env(self):
        return {"K8S_AUTH_KUBECONFIG": self.kubeconfig}

    def requests(self):
        return httpx.get(self.url + "/_fake/requests", timeout=10).json()

    def call(self, method, path, body=None, content_type="application/json"):
        resp = httpx.request(method, self.url + path, content=json.dumps(body) if body is not None else None,
                             headers={"Authorization": "Bearer kubefake", "Content-Type": content_type}, timeout=10)
        return resp.status_code, resp.json()

    def create(self, obj):
        code, out = self.call("POST", collection_path(obj), obj)
        if code != 201:
            raise RuntimeError("create %s/%s: %s %s" % (obj["kind"], obj["metadata"]["name"], code, out))
        return out

    def get(self, obj_or_kind, name=None, namespace="default"):
        path = object_path(obj_or_kind) if name is None else object_path(
            {"apiVersion": obj_or_kind[0], "kind": obj_or_kind[1], "metadata": {"name": name, "namespace": namespace}})
        code, out = self.call("GET", path)
        return out if code == 200 else None

    def merge(self, obj, patch):
        return self.call("PATCH", object_path(obj), patch, "application/merge-patch+json")

    def delete(self, obj):
        return self.call("DELETE", object_path(obj))

    def events(self, namespace="default"):
        return self.call("GET", "/api/v1/namespaces/%s/events" % namespace)[1]["items"]


PLURAL = {"VCOCluster": "vcoclusters", "VCOMachine": "vcomachines", "Cluster": "clusters", "Machine": "machines",
          "Secret": "secrets", "Namespace": "namespaces", "CustomResourceDefinition": "customresourcedefinitions",
          "Deployment": "deployments", "DaemonSet": "daemonsets"}


def collection_path(obj):
    api = obj["apiVersion"]
    base = "/api/v1" if api == "v1" else "/apis/" + api
    ns = obj["metadata"].get("namespace")
    if obj["kind"] in ("Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"):
        ns = None
    return base + ("/namespaces/%s" % ns if ns else "") + "/" + PLURAL[obj["kind"]]


def object_path(obj):
    return collection_path(obj) + "/" + obj["metadata"]["name"]


def snake(name):
    """The Ansible operator's camelCase -> snake_case of spec keys (providerID -> provider_id)."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return name.lower()


def snake_keys(value):
    if isinstance(value, dict):
        return {snake(k): snake_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    return value


def operator_vars(obj):
    """The extra vars the Ansible operator passes to a playbook for OBJ."""
    group, _ = obj["apiVersion"].split("/")
    key = "_%s_%s" % (re.sub(r"[.-]", "_", group), obj["kind"].lower())
    out = {"ansible_operator_meta": {"name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"]}}
    out.update(snake_keys(obj.get("spec") or {}))
    out[key] = obj
    out[key + "_spec"] = obj.get("spec") or {}
    return out
