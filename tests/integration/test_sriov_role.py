"""roles/sriov_agent: rendered manifests validate offline against the Kubernetes schemas; bad credentials fail;
it applies only to the cluster its kubeconfig names, never to the ambient one."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from capvco_lab.controller import KubeFake

from helpers import (
    REFUSAL,
    SRIOV_PLAY,
    SRIOV_VARS,
    RefusingProxy,
    render_sriov,
    run_playbook,
    unreachable_kubeconfig,
)

K8S_VERSION = "1.37.0"
BASE = dict(
    SRIOV_VARS,
    sriov_agent_networks=[
        {"name": "sriov-ext", "network": "sriov-ext", "mtu": 1400, "routes": [{"dst": "203.0.113.0/24"}]},
        {"name": "ams", "network": 201, "namespace": "team-a"},
    ],
)


def render(tmp_path, **overrides):
    return render_sriov(tmp_path, dict(BASE, **overrides))


def test_manifests_validate_against_the_kubernetes_schemas(tmp_path):
    rc, out, _data, docs = render(tmp_path)
    assert rc == 0, out[-2000:]
    kinds = [d["kind"] for d in docs]
    assert kinds == [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Secret",
        "DaemonSet",
        "NetworkAttachmentDefinition",
        "NetworkAttachmentDefinition",
    ]
    for doc in docs:
        if doc["kind"] != "NetworkAttachmentDefinition":
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    labels = docs[0]["metadata"]["labels"]  # it cannot run under "baseline": said explicitly, for all three modes
    assert {m: labels["pod-security.kubernetes.io/" + m] for m in ("enforce", "audit", "warn")} == dict.fromkeys(
        ("enforce", "audit", "warn"), "privileged"
    )
    role = docs[2]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    ds = docs[5]["spec"]["template"]["spec"]
    assert ds["hostNetwork"] is True
    assert ds["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    agent, init = ds["containers"][0]["securityContext"], ds["initContainers"][0]["securityContext"]
    assert agent["capabilities"] == {"drop": ["ALL"], "add": ["NET_ADMIN", "SYS_ADMIN"]}
    assert init["capabilities"] == {"drop": ["ALL"]}
    for ctx in (agent, init):
        assert ctx["readOnlyRootFilesystem"] is True and ctx["allowPrivilegeEscalation"] is False
    mounts = {v["name"]: v for v in ds["volumes"]}
    assert mounts["netns"]["hostPath"]["path"] == "/var/run/netns" and "ledger" in mounts
    assert "emptyDir" in mounts["tmp"]
    # the API token goes to the agent (the reclaimer lists pods), not to the init container
    assert ds["automountServiceAccountToken"] is False
    token_mount = {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    assert dict(token_mount, readOnly=True) in ds["containers"][0]["volumeMounts"]
    assert "kube-api-access" not in [m["name"] for m in ds["initContainers"][0]["volumeMounts"]]
    probe = ds["containers"][0]["readinessProbe"]["exec"]["command"]
    assert probe == ds["containers"][0]["livenessProbe"]["exec"]["command"]
    assert ds["initContainers"][0]["volumeMounts"][0]["mountPath"] == "/host/opt/cni/bin"
    install = ds["initContainers"][0]["command"]  # the image's install script (tests/e2e/test_agent_image.py runs it)
    assert install[:2] == ["/bin/sh", "/opt/capvco/cni/install-cni-plugin.sh"] and install[-1] == "/host/opt/cni/bin"
    nad = docs[6]
    assert nad["apiVersion"] == "k8s.cni.cncf.io/v1" and nad["metadata"]["namespace"] == "default"
    conf = json.loads(nad["spec"]["config"])
    assert conf == {
        "cniVersion": "1.0.0",
        "name": "sriov-ext",
        "type": "capvco-sriov",
        "network": "sriov-ext",
        "mtu": 1400,
        "routes": [{"dst": "203.0.113.0/24"}],
        "agentSocket": "/run/capvco/sriov.sock",
    }
    assert json.loads(docs[7]["spec"]["config"])["network"] == "201" and docs[7]["metadata"]["namespace"] == "team-a"
    assert "agent-token-0123456789" not in out


def test_the_plugin_finds_the_agent_where_the_socket_dir_puts_it(tmp_path):
    """sriov_agent_socket_dir moves the agent's socket; the plugin on the host reads the path from its network
    configuration (agentSocket), so both ends move together."""
    rc, out, _data, docs = render(tmp_path, sriov_agent_socket_dir="/run/elsewhere")
    assert rc == 0, out[-2000:]
    ds = [d for d in docs if d["kind"] == "DaemonSet"][0]["spec"]["template"]["spec"]
    agent = ds["containers"][0]
    assert "--socket=/run/elsewhere/sriov.sock" in agent["args"]
    assert {"name": "socket", "mountPath": "/run/elsewhere"} in agent["volumeMounts"]
    assert agent["livenessProbe"]["exec"]["command"][-1] == "/run/elsewhere/sriov.sock"
    for nad in (d for d in docs if d["kind"] == "NetworkAttachmentDefinition"):
        assert json.loads(nad["spec"]["config"])["agentSocket"] == "/run/elsewhere/sriov.sock"


def test_existing_secret_ref_is_used_and_no_secret_made(tmp_path):
    rc, out, _data, docs = render(
        tmp_path, sriov_agent_credential="", sriov_agent_credential_secret_ref={"name": "mine", "key": "jwt"}
    )
    assert rc == 0, out[-2000:]
    assert "Secret" not in [d["kind"] for d in docs]
    pod = docs[4]["spec"]["template"]["spec"]
    assert pod["volumes"][0]["secret"]["secretName"] == "mine"
    assert "--credential-file=/etc/capvco/credential/jwt" in pod["containers"][0]["args"]


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"sriov_agent_credential": ""}, "needs its own platform credential"),
        ({"sriov_agent_credential": "cluster-token-abcdef"}, "is the cluster's own credential"),
        ({"sriov_agent_credential": "cluster-token-abcdef\n"}, "is the cluster's own credential"),
        ({"sriov_agent_credential": " cluster-token-abcdef"}, "is the cluster's own credential"),
        ({"sriov_agent_credential": " \n\t"}, "needs its own platform credential"),
        ({"sriov_agent_location": ""}, "sriov_agent_location is required"),
    ],
)
def test_the_role_fails_on_a_bad_credential(tmp_path, overrides, message):
    rc, out, data, _docs = render(tmp_path, **overrides)
    assert rc != 0 and message in out
    assert "cluster-token-abcdef" not in out


def test_disabled_by_default(tmp_path):
    rc, out, _data, docs = render(tmp_path, sriov_agent_enabled=False)
    assert rc == 0, out[-2000:]
    assert docs is None and not (tmp_path / "out").exists()


def test_it_applies_only_to_the_cluster_its_kubeconfig_names(tmp_path):
    """Without sriov_agent_kubeconfig it fails before any Kubernetes call, with the ambient kubeconfig (here a live
    API server) untouched; a path that is not a readable file fails the same way; with it, the add-on goes there."""
    kube = KubeFake(tmp_path, ready_after=0).start()
    try:
        play = tmp_path / "play.yml"
        play.write_text(SRIOV_PLAY)
        for kubeconfig, message in (
            ("", "sriov_agent_kubeconfig is required to apply the SR-IOV add-on"),
            ("  ", "sriov_agent_kubeconfig is required to apply the SR-IOV add-on"),
            (str(tmp_path / "absent.kubeconfig"), "is not a readable file (missing)"),
            (str(tmp_path), "is not a readable file (not a regular file)"),
        ):
            rc, out, _ = run_playbook(
                str(play), extra_vars=dict(BASE, sriov_agent_kubeconfig=kubeconfig), env=kube.env()
            )
            assert rc != 0 and message in out, out[-2000:]
            assert "sriov.kubeconfig" in out and "agent-token-0123456789" not in out
            assert kube.requests() == [], "the ambient kubeconfig's cluster was called"

        # (SRIOV_VARS: its one network's NetworkAttachmentDefinition is in default, a namespace the fake has)
        rc, out, _ = run_playbook(str(play), extra_vars=dict(SRIOV_VARS, sriov_agent_kubeconfig=kube.kubeconfig))
        assert rc == 0, out[-3000:]
        ds = kube.get(("apps/v1", "DaemonSet"), "capvco-sriov-agent", "capvco-sriov")
        assert ds["spec"]["template"]["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        ns = kube.get(("v1", "Namespace"), "capvco-sriov", None)
        assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    finally:
        kube.stop()


@pytest.mark.parametrize("on_node_ip", [False, True])
def test_the_agents_metrics_port_is_declared_and_off_the_nodes_interfaces_by_default(tmp_path, on_node_ip):
    """The metrics (docs/sriov.md, "Metrics"): a named containerPort; served on the node's loopback unless asked for
    on the node's own address (the downward API's status.hostIP, never 0.0.0.0), and only then announced to
    Prometheus."""
    rc, out, _data, docs = render(tmp_path, sriov_agent_metrics_on_node_ip=on_node_ip)
    assert rc == 0, out[-2000:]
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    kubernetes_validate.validate(ds, K8S_VERSION, strict=True)
    agent = ds["spec"]["template"]["spec"]["containers"][0]
    assert agent["ports"] == [{"name": "metrics", "containerPort": 9738, "protocol": "TCP"}]
    (address,) = [a.split("=", 1)[1] for a in agent["args"] if a.startswith("--metrics-address=")]
    annotations = ds["spec"]["template"]["metadata"].get("annotations", {})
    if on_node_ip:
        assert address == "$(NODE_IP):9738"
        assert {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}} in agent["env"]
        assert annotations == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9738",
            "prometheus.io/path": "/metrics",
        }
    else:
        assert address == "127.0.0.1:9738" and annotations == {}


# --- a failure reads with its reason, and never with a secret (issue 39) ---------------------------------------------

AGENT_TOKEN = SRIOV_VARS["sriov_agent_credential"]
CLUSTER_TOKEN = SRIOV_VARS["sriov_agent_cluster_credential"]


def no_secret_in(out):
    import base64

    for secret in (AGENT_TOKEN, CLUSTER_TOKEN, base64.b64encode(AGENT_TOKEN.encode()).decode()):
        assert secret not in out, "a secret was shown"
    assert "censored" not in out and "no_log: true" not in out, "a failure without its reason"


@pytest.mark.parametrize("secret_ref", [False, True])
def test_a_failure_against_an_unreachable_cluster_names_its_reason_and_no_secret(tmp_path, secret_ref):
    """The first Kubernetes call fails: the apply of the namespace, or, with an existing Secret to check, the read of
    that Secret (a lookup inside the check, whose value is never shown). No task hides its result, so the failure
    reads with its reason."""
    kubeconfig, port = unreachable_kubeconfig(tmp_path)
    play = tmp_path / "play.yml"
    play.write_text(SRIOV_PLAY)
    extra = dict(BASE, sriov_agent_kubeconfig=kubeconfig)
    if secret_ref:
        extra.update(sriov_agent_credential="", sriov_agent_credential_secret_ref={"name": "mine", "key": "jwt"})
    rc, out, _ = run_playbook(str(play), extra_vars=extra, env={"ANSIBLE_STDOUT_CALLBACK": "default"})
    assert rc != 0
    assert "Connection refused" in out and "port=%d" % port in out, out[-3000:]
    task = "Refuse a credential Secret that is missing" if secret_ref else "Apply the namespace, the agent's account"
    assert task in out.split("Connection refused")[0].rsplit("TASK [", 1)[1], "the reason is the failed task's"
    no_secret_in(out)


def test_a_refused_credential_secret_says_why_and_no_run_shows_the_secret(tmp_path):
    """The Secret goes to the cluster as a file (written by copy, whose content is no_log) and the k8s module hides
    its data in the result and the diff: a refusal reads with the API's reason; an apply at -vvv with --diff, and its
    re-run, show the credential nowhere, and the cluster has it."""
    import base64

    kube = KubeFake(tmp_path, ready_after=0).start()
    try:
        with RefusingProxy(kube, tmp_path) as proxy:
            play = tmp_path / "play.yml"
            play.write_text(SRIOV_PLAY)
            extra = dict(SRIOV_VARS, sriov_agent_kubeconfig=proxy.kubeconfig)
            scratch = tmp_path / "scratch"  # where the role's private folder is made (the module's TMPDIR)
            scratch.mkdir()
            default = {"ANSIBLE_STDOUT_CALLBACK": "default", "TMPDIR": str(scratch)}

            proxy.refuse.set()
            rc, out, _ = run_playbook(str(play), extra_vars=extra, env=default)
            assert rc != 0
            assert REFUSAL in out, out[-3000:]
            assert "Apply the Secret, its data hidden" in out.split(REFUSAL)[0].rsplit("TASK [", 1)[1]
            no_secret_in(out)
            assert kube.get(("v1", "Namespace"), "capvco-sriov", None), "what holds no secret was applied first"
            assert not list(scratch.glob("capvco-sriov.*")), "the Secret's file is removed, failed or not"

            proxy.refuse.clear()
            for _ in range(2):  # the apply, then the re-run (a diff against what the cluster has)
                rc, out, _ = run_playbook(str(play), extra_vars=extra, env=default, verbosity=3, diff=True)
                assert rc == 0, out[-3000:]
                no_secret_in(out)
                assert str(scratch / "capvco-sriov.") in out and not list(scratch.glob("capvco-sriov.*"))
        secret = kube.get(("v1", "Secret"), "capvco-sriov-credential", "capvco-sriov")
        assert base64.b64decode(secret["data"]["token"]).decode() == AGENT_TOKEN
    finally:
        kube.stop()
