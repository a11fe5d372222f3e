"""Shared test helpers: start the real emulator, talk to its admin API, run playbooks."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap

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
