"""Every module that reports a diff, through ``ansible-playbook --diff`` and Ansible's default callback.

Runs tests/consumers/diff.yml with a given Ansible (``--ansible-bin``: the oldest ansible-core that
meta/runtime.yml admits, in a venv; the newest, in a Debian trixie container) against the emulator and the fake
Kubernetes API, and fails when the output has any warning (a callback that could not show a diff says
"[WARNING]: Callback dispatch 'v2_on_file_diff' failed"), any deprecation warning, or lacks the diff lines each
module should have shown.  Only the standard library and PyYAML (which ansible-core brings): it runs in a venv
that holds ansible-core and the collection's requirements.txt (the emulator and the fakes run from --tools-bin).

    python tests/consumers/check_diff.py --ansible-bin VENV/bin [--tools-bin EMULATOR_VENV/bin]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
#: Lines each module's diff must have put in the output (the default callback's unified diff of before/after).
EXPECTED = [
    r'^\+\s+"name": "diff-cs"',  # cloudspace (a dict)
    r"^\+machine diff-p-0$",  # machine_pool
    r"^\+machine diff-p-1$",
    r'^\+\s+"name": "diff-m-0"',  # machine (a dict)
    r"^\+nic 198\.51\.100\.\d+$",  # external_nic
    r"^-nic 198\.51\.100\.\d+$",
    r'^\+\s+"\d\d [a-z0-9-]+ ATTACHED"',  # vgpu (a dict of lines)
    r"^-vgpu \S+$",  # vgpu_reclaim
    r"^-machine diff-p-1$",
    r"^\+cloudspace diffk$",  # cluster: the cloudspace this run made is in its diff
    r"^\+machine diffk-gpu-0$",
    r"^\+vgpus 1$",
    r"^-machine diffk-cp-0$",
    r'^\+\s+"ready": true',  # vco_status
    r"^\+machine difflc-gpu-0$",  # cluster_create by its name, with a spec that leaves optional keys out
    r"^-machine difflc-cp-0$",  # cluster_delete
    r"^-cloudspace difflc-cs$",
]
#: The warnings the modules must give (through ``module.warn``): any other warning fails the check.
WARNINGS = [
    r"^\[WARNING\]: machine 'diff-p-0' exists with vcpus=2 \(wanted 4\); it is not resized$",
    # a long one: older ansible-core wraps it at 80 columns, also after a hyphen (rejoined with a space)
    "^%s$"
    % re.escape(
        "[WARNING]: machine 'diffk-gpu-9' is in no cloudspace 'diffk' of cluster 'diffk': nothing to delete (looked "
        "in location 'be-gen-1', which has no cloudspace 'diffk'); the customer has no machine of that name in its "
        "other cloudspaces and locations either"
    ).replace("\\-", "- ?"),
]
#: The secret the redact filter's task plants inside three strings, and the filter's mask.
PLANTED, MASK = "Zq8wREDACTEDk3Vx", "********"
#: (a JSON key of a diff, vco_status's ``"deprecated"``: Cluster API's v1beta1 conditions, is no warning)
WARNING = re.compile(r"\[(DEPRECATION )?WARNING\]|Callback dispatch|(?<!\")[Dd]eprecat")
#: A progress line of the cluster task (on standard error, as warnings are): never part of a warning.
PROGRESS = re.compile(r"^  \[[^\]]+\] (machine|vGPU) ")


def start(cmd: list[str], out: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """Start a server that prints its URL as its first line; the process and the URL."""
    fh = open(out, "wb")  # noqa: SIM115 (the server writes to it for its whole life)
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        first = out.read_text(errors="replace").split("\n", 1)[0].strip()
        if first.startswith("http"):
            return proc, first
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("%s did not start:\n%s" % (cmd[0], out.read_text(errors="replace")))


def warnings(output: str) -> list[str]:
    """Each warning of the output as one line: older ansible-core wraps a warning at 80 columns (until the blank
    line, the banner or the progress line that follows it)."""
    found: list[str] = []
    current: list[str] | None = None
    for line in output.splitlines():
        ends = not line.strip() or line.startswith(("TASK [", "PLAY ", "[")) or PROGRESS.match(line)
        if current is not None and ends:
            found.append(" ".join(current))
            current = None
        if current is not None:
            current.append(line.strip())
        elif WARNING.search(line):
            current = [line.strip()]
    if current is not None:
        found.append(" ".join(current))
    return found


def consumer_env(work: Path, url: str, **more: str) -> dict[str, str]:
    """The environment of an Ansible run of a check: nothing of the caller's Ansible, whitesky or Kubernetes
    settings; the collection linked under ``work``, the default callback, no colour, the emulator at ``url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "WHITESKY_", "K8S_"))}
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(work / "collections"),
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCAL_TEMP=str(work / "tmp"),
        WHITESKY_API_URL=url,
        WHITESKY_API_TOKEN="capvco-demo-token",
        WHITESKY_CUSTOMER_ID="capvco-demo",
    )
    env.update(more)
    return env


def kube_create(url: str, path: str, body: dict) -> None:
    req = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer kubefake"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
    except urllib.error.HTTPError as exc:
        raise SystemExit("POST %s: %s %s" % (path, exc.code, exc.read().decode(errors="replace"))) from None


def arguments(doc: str, argv: list[str] | None, *more: tuple[str, str]) -> tuple[argparse.Namespace, Path, Path]:
    """The checks' command line: the Ansible under test, the tools' folder, and ``more`` required options
    (``(name, help)``); the parsed arguments and the two folders, absolute."""
    ap = argparse.ArgumentParser(description=doc.split("\n", 1)[0])
    ap.add_argument("--ansible-bin", required=True, help="the folder of the ansible-playbook under test")
    ap.add_argument("--tools-bin", help="the folder of whitesky-emulator and of the Python of the fakes")
    for name, text in more:
        ap.add_argument(name, required=True, help=text)
    args = ap.parse_args(argv)
    return args, Path(args.ansible_bin).absolute(), Path(args.tools_bin or args.ansible_bin).absolute()


def main(argv: list[str] | None = None) -> int:
    _args, bindir, tools = arguments(__doc__, argv)
    python = str(bindir / "python")
    version = subprocess.run(
        [str(bindir / "ansible-playbook"), "--version"], capture_output=True, text=True, check=True
    ).stdout.split("\n", 1)[0]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        link = work / "collections" / "ansible_collections" / "whitesky" / "capvco"
        link.parent.mkdir(parents=True)
        link.symlink_to(ROOT)
        emu, url = start(
            [str(tools / "whitesky-emulator"), "--port", "0", "--state-dir", str(work / "emu")], work / "emulator.out"
        )
        kubeconfig = work / "kubeconfig"
        kube, kube_url = start(
            [
                str(tools / "python"),
                "-m",
                "capvco_lab.kubefake",
                "--port",
                "0",
                "--kubeconfig",
                str(kubeconfig),
            ],
            work / "kubefake.out",
            # the lab from the checkout: the tools' venv has the emulator, jsonschema and PyYAML, not the lab
            env=dict(os.environ, PYTHONPATH=str(ROOT / "lab")),
        )
        try:
            crds = yaml.safe_load((ROOT / "roles" / "capvco_controller" / "files" / "crds.yaml").read_text())
            for crd in crds["items"]:
                kube_create(kube_url, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            group = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/default/vcoclusters"
            kube_create(
                kube_url,
                group,
                {
                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                    "kind": "VCOCluster",
                    "metadata": {"name": "diff", "namespace": "default"},
                    "spec": {"location": "be-gen-1", "cloudspace": "diff-cs"},
                },
            )
            env = consumer_env(work, url, ANSIBLE_DEPRECATION_WARNINGS="1", K8S_AUTH_KUBECONFIG=str(kubeconfig))
            cmd = [
                str(bindir / "ansible-playbook"),
                "--diff",
                "-i",
                "localhost,",
                "-c",
                "local",
                "-e",
                "ansible_python_interpreter=%s" % python,
                "-e",
                "@%s" % (ROOT / "tests" / "consumers" / "spec.yml"),
                str(ROOT / "tests" / "consumers" / "diff.yml"),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        finally:
            for p in (emu, kube):
                p.terminate()
                p.wait(timeout=30)
    output = proc.stdout + proc.stderr
    print(output)
    problems = []
    if proc.returncode != 0:
        problems.append("ansible-playbook exited %d" % proc.returncode)
    warned = [w for w in warnings(output) if WARNING.search(w)]
    problems += ["a warning: %s" % w for w in warned if not any(re.match(p, w) for p in WARNINGS)]
    problems += ["no warning matches %s" % p for p in WARNINGS if not any(re.match(p, w) for w in warned)]
    problems += ["no diff line matches %s" % p for p in EXPECTED if not re.search(p, output, re.M)]
    if PLANTED in output or output.count(MASK) < 3:  # the redact filter's task: the secret masked in each string
        problems.append("the redact filter showed %s, or masked fewer than its 3 strings" % PLANTED)
    print("check_diff: %s: %s" % (version, "; ".join(problems) if problems else "every diff shown, no warning"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
