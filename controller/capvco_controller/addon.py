"""The SR-IOV add-on of a labelled VCOCluster: the collection's ``sriov_agent`` role, applied to the workload cluster
(through Cluster API's ``<cluster>-kubeconfig`` Secret) with the node agent's own credential
(``spec.sriov.credentialSecretRef``), by one ``ansible-playbook`` run.

It runs when what it applies changes (the spec, the cloudspace, either Secret) and again every ``addon_resync``
seconds; the cost of an Ansible run is paid then, not on every reconcile.  The tenant's strings reach Ansible as
data: the credentials through the environment (a lookup's result is never templated), and every other string is
refused if it holds a template marker (the CRD's patterns already keep names to DNS labels).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import tempfile
import time
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import conditions as conds
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub
from capvco_controller.context import Context, Key, Retry
from capvco_controller.objects import VCOCluster
from capvco_controller.scope import Scope

log = logging.getLogger(__name__)
KIND = "VCOCluster"
CONDITION = "SRIOVAddonReady"
MARKERS = ("{{", "{%", "{#")
PLAY = """\
- name: The SR-IOV add-on of a VCOCluster
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    # the modules run under the Python that runs ansible-playbook (it has the kubernetes library), never one that
    # interpreter discovery finds on the PATH
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  roles:
    - role: whitesky.capvco.sriov_agent
      vars:
        sriov_agent_enabled: true
        sriov_agent_credential: "{{ lookup('ansible.builtin.env', 'CAPVCO_ADDON_AGENT_CREDENTIAL') }}"
        sriov_agent_cluster_credential: "{{ lookup('ansible.builtin.env', 'WHITESKY_API_TOKEN') }}"
        sriov_agent_api_url: "{{ lookup('ansible.builtin.env', 'WHITESKY_API_URL') }}"
        sriov_agent_customer_id: "{{ lookup('ansible.builtin.env', 'WHITESKY_CUSTOMER_ID') }}"
"""


def _marked(value: Any) -> str | None:
    """The first string in ``value`` that holds a template marker, or None."""
    if isinstance(value, str):
        return value if any(m in value for m in MARKERS) else None
    if isinstance(value, dict):
        for k, v in value.items():
            got = _marked(k) or _marked(v)
            if got:
                return got
    if isinstance(value, list):
        for v in value:
            got = _marked(v)
            if got:
                return got
    return None


def ensure(ctx: Context, scope: Scope, key: Key, c: VCOCluster, cloudspace_id: str) -> None:
    """Apply the add-on when what it applies changed or its resync is due; ``SRIOVAddonReady`` in the reconcile's
    write (False with what it waits for, or why it failed, and :class:`Retry`)."""
    given = c.sriov.get("credentialSecretRef")
    ref: dict[str, Any] = given if isinstance(given, dict) else {}
    ref_name, ref_key = str(ref.get("name") or ""), str(ref.get("key") or "token")
    agent = ctx.kube.secret(c.namespace, ref_name) if ref_name else None
    workload = ctx.kube.secret(c.namespace, "%s-kubeconfig" % c.cluster)
    if agent is None or workload is None or ref_key not in agent or "value" not in workload:
        reason = (
            "WaitingForCredential"
            if agent is None
            else (
                "WaitingForWorkloadCluster" if workload is None or "value" not in workload else "CredentialKeyMissing"
            )
        )
        message = "the add-on needs Secret %s (key %s) and Secret %s-kubeconfig in %s" % (
            ref_name,
            ref_key,
            c.cluster,
            c.namespace,
        )
        scope.condition(conds.false(CONDITION, reason, message, "Info"))
        return
    networks = c.sriov.get("networks") or []
    variables = {
        "sriov_agent_location": c.location,
        "sriov_agent_cloudspace_id": cloudspace_id,
        "sriov_agent_networks": networks,
    }
    bad = _marked(variables)
    if bad is not None:
        message = "spec.sriov holds a template marker ({{, {%% or {#) in %r: refused" % scrub(bad, 200)
        scope.condition(conds.false(CONDITION, "InvalidConfiguration", message, "Error"))
        return
    digest = hashlib.sha256(
        json.dumps([variables, agent[ref_key], workload["value"]], sort_keys=True).encode()
    ).hexdigest()
    applied = ctx.addons.get(key)
    if (
        applied is not None
        and applied[0] == digest
        and time.monotonic() - applied[1] < ctx.settings.addon_resync
        and _ready(c) == "True"
    ):
        return
    ok, message = run(ctx, variables, agent[ref_key], workload["value"])
    if not ok:
        scope.condition(conds.false(CONDITION, "DeployFailed", message, "Error"))
        scope.event("SRIOVAddonFailed", message, warning=True)
        raise Retry("the SR-IOV add-on: " + message)
    ctx.addons[key] = (digest, time.monotonic())
    names = ", ".join(str(n.get("name")) for n in networks if isinstance(n, dict))
    scope.condition(conds.true(CONDITION, "Deployed", "the node agent runs on every node; networks: " + names))


def _ready(c: VCOCluster) -> str:
    return c.condition_status(CONDITION)


def run(ctx: Context, variables: dict[str, Any], credential: str, kubeconfig: str) -> tuple[bool, str]:
    """One ``ansible-playbook`` run of the role: ``(ok, why it failed)``; what it prints is scrubbed of both
    credentials."""
    secrets = [s for s in (credential.strip(), ctx.connection.api_token, kubeconfig) if s]
    with tempfile.TemporaryDirectory(prefix="capvco-addon-") as tmp:
        kc = os.path.join(tmp, "workload.kubeconfig")
        play = os.path.join(tmp, "addon.yml")
        varsfile = os.path.join(tmp, "vars.json")
        for path, text in (
            (kc, kubeconfig),
            (play, PLAY),
            (varsfile, json.dumps(dict(variables, sriov_agent_kubeconfig=kc))),
        ):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        env = dict(
            os.environ,
            CAPVCO_ADDON_AGENT_CREDENTIAL=credential,
            WHITESKY_API_URL=ctx.connection.api_url,
            WHITESKY_CUSTOMER_ID=ctx.connection.customer_id,
            WHITESKY_API_TOKEN=ctx.connection.api_token,
            ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
            ANSIBLE_LOCAL_TEMP=os.path.join(tmp, "ansible-local"),
            ANSIBLE_RETRY_FILES_ENABLED="false",
        )
        env.pop("K8S_AUTH_KUBECONFIG", None)  # the role applies to the workload cluster only, never the ambient one
        proc = subprocess.run(  # noqa: S603 (a fixed argv: the playbook and its vars file are the controller's own)
            [ctx.settings.ansible_playbook, "-i", "localhost,", play, "-e", "@" + varsfile],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            timeout=600,
            check=False,
        )
    if proc.returncode == 0:
        return True, ""
    return False, _why(proc.stdout, proc.stderr, secrets)


def _why(stdout: str, stderr: str, secrets: list[str]) -> str:
    """The failed task and its message, from the json callback's output (else the tail of stderr), scrubbed."""
    why = ""
    try:
        doc = json.loads(stdout)
        for play in doc.get("plays") or []:
            for task in play.get("tasks") or []:
                for host in (task.get("hosts") or {}).values():
                    if host.get("failed") or host.get("unreachable"):
                        why = "%s: %s" % ((task.get("task") or {}).get("name"), host.get("msg") or "failed")
    except (ValueError, AttributeError):
        why = stderr.strip()[-2000:] or stdout.strip()[-2000:]
    for secret in secrets:
        why = why.replace(secret, "********")
    return scrub(why or "ansible-playbook failed", 2048)
