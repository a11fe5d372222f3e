#!/usr/bin/env python3
"""Run a CAPVCO playbook the way the Ansible operator does, for one object.

It reads operator/watches.yaml for the kind's playbook (or its finalizer's),
reads the object from the API server, passes the operator's variables
(ansible_operator_meta, the snake-cased spec, and _<group>_<kind>), and, after
a finalizer run that succeeded, removes the finalizer as the operator would.
The molecule scenario `controller` drives the fake API server with it.

    python tests/operator_sim.py reconcile|finalize KIND NAMESPACE NAME   (K8S_AUTH_KUBECONFIG set)

Exits with ansible-playbook's status; prints the play recap's changed count last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import yaml

from helpers import PLURAL, ROOT, operator_vars  # beside this file: a script's own folder is on its path

PREFIX = "/usr/share/ansible/collections/ansible_collections/whitesky/capvco/"


def main(argv):
    action, kind, namespace, name = argv
    with open(os.path.join(ROOT, "operator", "watches.yaml"), encoding="utf-8") as fh:
        watch = next(w for w in yaml.safe_load(fh) if w["kind"] == kind)
    target = watch["finalizer"] if action == "finalize" else watch
    playbook = os.path.join(ROOT, target["playbook"][len(PREFIX) :])
    with open(os.environ["K8S_AUTH_KUBECONFIG"], encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    server = config["clusters"][0]["cluster"]["server"]
    headers = {"Authorization": "Bearer " + config["users"][0]["user"]["token"]}
    path = "%s/apis/%s/%s/namespaces/%s/%s/%s" % (
        server,
        watch["group"],
        watch["version"],
        namespace,
        PLURAL[kind],
        name,
    )
    obj = httpx.get(path, headers=headers, timeout=10).raise_for_status().json()
    if action == "finalize":
        httpx.delete(path, headers=headers, timeout=10).raise_for_status()
        obj = httpx.get(path, headers=headers, timeout=10).raise_for_status().json()
    cmd = [
        os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
        playbook,
        "-e",
        json.dumps(operator_vars(obj)),
    ]
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-2000:])
        return proc.returncode
    if action == "finalize":
        fins = [f for f in obj["metadata"].get("finalizers", []) if f != watch["finalizer"]["name"]]
        httpx.patch(
            path,
            headers=dict(headers, **{"Content-Type": "application/merge-patch+json"}),
            content=json.dumps({"metadata": {"finalizers": fins or None}}),
            timeout=10,
        ).raise_for_status()
    stats = json.loads(proc.stdout)["stats"]
    print(json.dumps({"changed": sum(h["changed"] for h in stats.values())}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
