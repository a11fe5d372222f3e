"""roles/capvco_controller: offline-valid manifests, applied to a fake API server, and a loud failure to start; a
failure reads with its reason, and no run shows the credential (issue 39)."""

from __future__ import annotations

import base64
import os
import re
import textwrap

import kubernetes_validate
import pytest
import yaml

from capvco_controller import main as controller_main
from capvco_lab.capi import make_cluster, make_machine
from capvco_lab.controller import Controller, KubeFake

from helpers import REFUSAL, RefusingProxy, run_playbook, unreachable_kubeconfig, wait_for

K8S_VERSION = "1.37.0"
PLAY = textwrap.dedent("""\
    - name: CAPVCO controller
      hosts: localhost
      gather_facts: false
      roles:
        - role: whitesky.capvco.capvco_controller
    """)
TOKEN = "controller-token-0123456789"
BASE = {
    "capvco_controller_api_url": "https://portal.example/api/1",
    "capvco_controller_customer_id": "capvco-demo",
    "capvco_controller_api_token": TOKEN,
    "capvco_controller_image": "registry.example/capvco-controller:0.1.0",
}


def play(tmp_path, env=None, verbosity=0, diff=False, **overrides):
    path = tmp_path / "play.yml"
    path.write_text(PLAY)
    return run_playbook(str(path), extra_vars=dict(BASE, **overrides), env=env, verbosity=verbosity, diff=diff)


def test_rendered_manifests_validate_offline_and_keep_least_privilege(tmp_path):
    rc, out, _ = play(tmp_path, capvco_controller_render_dir=str(tmp_path / "out"))
    assert rc == 0, out[-3000:]
    assert TOKEN not in out
    docs = list(yaml.safe_load_all((tmp_path / "out" / "capvco-controller.yaml").read_text()))
    kinds = [d["kind"] for d in docs]
    assert kinds == ["CustomResourceDefinition"] * 3 + [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Secret",
        "Deployment",
    ]
    for doc in docs:  # the CRDs too, against apiextensions.k8s.io/v1
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    by_name = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    rules = by_name[("ClusterRole", "capvco-controller")]["rules"]
    assert all("*" not in r["verbs"] and "*" not in r["resources"] for r in rules)
    assert not any("secrets" in r["resources"] for r in rules)
    assert not any(set(r["verbs"]) & {"create", "delete"} for r in rules if r["resources"] != ["events"])
    # Secrets: get alone (each is read by its name), bound cluster-wide only because every namespace is watched
    reader = by_name[("ClusterRole", "capvco-controller-secret-reader")]
    assert reader["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    binding = by_name[("ClusterRoleBinding", "capvco-controller-secret-reader")]
    assert binding["roleRef"]["name"] == "capvco-controller-secret-reader"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "capvco-controller", "namespace": "capvco-system"}
    ]
    lease = by_name[("Role", "capvco-controller-leader-election")]
    assert lease["rules"][0]["resources"] == ["leases"] and lease["metadata"]["namespace"] == "capvco-system"
    labels = by_name[("Namespace", "capvco-system")]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    deployment = by_name[("Deployment", "capvco-controller")]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    manager = pod["containers"][0]
    assert "--leader-elect" in manager["args"] and manager["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
    assert manager["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert manager["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert manager["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    writable = {m["mountPath"] for m in manager["volumeMounts"] if not m.get("readOnly")}
    assert writable == {"/tmp", "/home/capvco/.ansible"}
    assert all("emptyDir" in volumes[m["name"]] for m in manager["volumeMounts"] if not m.get("readOnly"))
    env = {e["name"]: e for e in manager["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    # every flag the Deployment passes is one the controller's command line takes
    args = controller_main.parser().parse_args(manager["args"])
    # the credential is the mounted Secret's files, which the kubelet updates when the Secret changes and the
    # controller reads again (never an environment variable, which a running pod never sees change)
    assert not any("WHITESKY" in name for name in env) and not any("secretKeyRef" in str(e) for e in env.values())
    (mount,) = [m for m in manager["volumeMounts"] if m.get("readOnly")]
    assert (mount["mountPath"], args.credentials_dir) == ("/etc/capvco/credentials", "/etc/capvco/credentials")
    assert "subPath" not in mount, "a Secret mounted with subPath is never updated"
    secret = volumes[mount["name"]]["secret"]
    assert secret["secretName"] == "capvco-controller-credentials" and secret["defaultMode"] == 0o440
    assert [i["key"] for i in secret["items"]] == ["api_url", "customer_id", "api_token"]
    assert by_name[("Secret", "capvco-controller-credentials")]["data"].keys() == {
        "api_url",
        "customer_id",
        "api_token",
    }


def test_secret_access_is_bound_in_the_watched_namespaces_only(tmp_path):
    rc, out, _ = play(
        tmp_path,
        capvco_controller_render_dir=str(tmp_path / "out"),
        capvco_controller_watch_namespaces=["team-a", "team-b"],
    )
    assert rc == 0, out[-3000:]
    docs = list(yaml.safe_load_all((tmp_path / "out" / "capvco-controller.yaml").read_text()))
    readers = [d for d in docs if d["metadata"]["name"] == "capvco-controller-secret-reader"]
    assert [(d["kind"], d["metadata"].get("namespace")) for d in readers] == [
        ("ClusterRole", None),
        ("RoleBinding", "team-a"),
        ("RoleBinding", "team-b"),
    ]
    for doc in readers:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    assert readers[1]["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "capvco-controller-secret-reader",
    }
    env = {e["name"]: e.get("value") for e in docs[-1]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["WATCH_NAMESPACE"] == "team-a,team-b"


def test_every_secret_the_controller_reads_is_read_by_name(kube, emulator, tmp_path):
    """What makes `get` alone enough: the controller process reads each Secret (here a Machine's bootstrap data) with
    one GET by its name, and never lists or watches Secrets (its informers hold the four CAPI and CAPVCO kinds only)."""
    ctl = Controller(kube, emulator, tmp_path).start()
    try:
        make_cluster(kube)
        vm, _ = make_machine(kube, "gpu1-md-0-sec")
        assert wait_for(lambda: ((kube.get(vm) or {}).get("status") or {}).get("ready") is True, 90), ctl.text()[-3000:]
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]
    secrets = [r for r in kube.requests() if "/secrets" in r["path"]]
    created = [r for r in secrets if r["method"] == "POST"]  # the test's own: the bootstrap data Secret
    assert [r["path"] for r in created] == ["/api/v1/namespaces/default/secrets"]
    reads = [r for r in secrets if r not in created]
    assert reads, "the bootstrap data was read"
    for request in reads:
        assert request["method"] == "GET" and re.fullmatch(r"/api/v1/namespaces/[^/]+/secrets/[^/?]+", request["path"])
        assert "watch" not in request["query"], request


def test_a_controller_that_never_becomes_available_fails_loudly(tmp_path):
    kube = KubeFake(tmp_path, ready_after=-1).start()
    try:
        rc, out, _ = play(tmp_path, env=kube.env(), capvco_controller_wait_timeout=4)
        assert rc != 0
        assert "did not become Available in 4 s" in out and "kubectl -n capvco-system" in out
    finally:
        kube.stop()


def test_bad_settings_name_the_bad_value(tmp_path):
    rc, out, _ = play(tmp_path, capvco_controller_namespace="Bad_NS", capvco_controller_render_dir=str(tmp_path))
    assert rc != 0 and "got Bad_NS" in out
    rc, out, _ = play(
        tmp_path,
        env={"WHITESKY_API_TOKEN": ""},
        capvco_controller_api_token="",
        capvco_controller_render_dir=str(tmp_path),
    )
    assert rc != 0 and "capvco_controller_api_token" in out
    assert os.path.exists(tmp_path / "play.yml")


# --- a failure reads with its reason, and never with the credential (issue 39) ----------------------------------------

DEFAULT_CALLBACK = {"ANSIBLE_STDOUT_CALLBACK": "default", "WHITESKY_API_TOKEN": ""}


def no_secret_in(out):
    for secret in (TOKEN, base64.b64encode(TOKEN.encode()).decode()):
        assert secret not in out, "the credential was shown"
    assert "censored" not in out and "no_log: true" not in out, "a failure without its reason"


def failed_task(out, reason):
    """The name of the task whose failure reads ``reason``."""
    return out.split(reason)[0].rsplit("TASK [", 1)[1].split("]")[0]


def test_rendered_at_vvv_with_diff_shows_no_credential(tmp_path):
    rc, out, _ = play(
        tmp_path, env=DEFAULT_CALLBACK, verbosity=3, diff=True, capvco_controller_render_dir=str(tmp_path / "out")
    )
    assert rc == 0, out[-3000:]
    no_secret_in(out)
    rendered = (tmp_path / "out" / "capvco-controller.yaml").read_text()
    assert base64.b64encode(TOKEN.encode()).decode() in rendered, "the file has it"


@pytest.mark.parametrize("verbosity", [0, 3])
def test_a_failure_against_an_unreachable_cluster_names_its_reason_and_no_secret(tmp_path, verbosity):
    """The first call (the CRDs' apply) fails: no task hides its result, so the failure reads with its reason."""
    kubeconfig, port = unreachable_kubeconfig(tmp_path)
    rc, out, _ = play(tmp_path, env=DEFAULT_CALLBACK, verbosity=verbosity, capvco_controller_kubeconfig=kubeconfig)
    assert rc != 0
    assert "Connection refused" in out and "port=%d" % port in out, out[-3000:]
    assert "Apply the CRDs, the namespace and the RBAC" in failed_task(out, "Connection refused")
    no_secret_in(out)


def test_a_refused_credentials_secret_says_why_and_no_apply_shows_the_secret(tmp_path):
    """The Secret goes to the cluster as a private file (playbooks/tasks/k8s_secret.yml, shared with sriov_agent): a
    refusal reads with the API's reason, before the Deployment that reads it; an apply at -vvv with --diff, and its
    re-run (changed=0), show the credential nowhere, the file is removed each time, and the cluster has the Secret.
    The apply waits until the Deployment is Available (3 s after it is made, here) with the replicas asked for, and
    the CRDs carry the contract labels (one run of the role proves both: it is the slowest file of the layer)."""
    kube = KubeFake(tmp_path, ready_after=3).start()
    try:
        with RefusingProxy(kube, tmp_path) as proxy:
            scratch = tmp_path / "scratch"  # where the role's private folder is made (the module's TMPDIR)
            scratch.mkdir()
            env = dict(DEFAULT_CALLBACK, TMPDIR=str(scratch))
            extra = {"capvco_controller_kubeconfig": proxy.kubeconfig, "capvco_controller_wait_timeout": 30}
            extra["capvco_controller_replicas"] = 2

            proxy.refuse.set()
            rc, out, _ = play(tmp_path, env=env, **extra)
            assert rc != 0
            assert REFUSAL in out, out[-3000:]
            assert "Apply the Secret, its data hidden" in failed_task(out, REFUSAL)
            no_secret_in(out)
            assert kube.get(("v1", "Namespace"), "capvco-system", None), "what holds no secret was applied first"
            assert not kube.get(("apps/v1", "Deployment"), "capvco-controller", "capvco-system"), "nor its reader"
            assert not list(scratch.glob("capvco-controller.*")), "the Secret's file is removed, failed or not"

            proxy.refuse.clear()
            for changed in ("changed=[1-9]", "changed=0 "):  # the apply, then the re-run (a diff against the cluster)
                rc, out, _ = play(tmp_path, env=env, verbosity=3, diff=True, **extra)
                assert rc == 0, out[-3000:]
                no_secret_in(out)
                assert re.search(r"localhost\s+: ok=\d+\s+" + changed, out), out[-1500:]
                assert str(scratch / "capvco-controller.") in out and not list(scratch.glob("capvco-controller.*"))
        secret = kube.get(("v1", "Secret"), "capvco-controller-credentials", "capvco-system")
        assert base64.b64decode(secret["data"]["api_token"]).decode() == TOKEN
        dep = kube.get(("apps/v1", "Deployment"), "capvco-controller", "capvco-system")
        assert dep["spec"]["replicas"] == 2 and dep["status"]["availableReplicas"] == 2
        polls = [
            r for r in kube.requests() if r["method"] == "GET" and r["path"].endswith("/deployments/capvco-controller")
        ]
        assert len(polls) >= 2  # it waited for the Deployment, which became Available after 3 s
        crd = kube.get(
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition"), "vcomachines.infrastructure.cluster.x-k8s.io"
        )
        labels = crd["metadata"]["labels"]
        assert labels["cluster.x-k8s.io/v1beta1"] == labels["cluster.x-k8s.io/v1beta2"] == "v1beta1"
    finally:
        kube.stop()


def test_a_named_credentials_secret_is_checked_and_the_reason_given(tmp_path):
    """capvco_controller_credentials_secret: the role makes no Secret, and checks the one named (a lookup inside the
    check, whose value is never shown): missing, or lacking a key, the failure names which; whole, it deploys."""
    kube = KubeFake(tmp_path, ready_after=0).start()
    try:
        extra = {"capvco_controller_credentials_secret": "theirs", "capvco_controller_wait_timeout": 30}
        env = dict(DEFAULT_CALLBACK, **kube.env())
        rc, out, _ = play(tmp_path, env=env, **extra)
        assert rc != 0 and "theirs: no such Secret in the namespace capvco-system" in out, out[-3000:]
        no_secret_in(out)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "theirs", "namespace": "capvco-system"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in (("api_url", "u"), ("api_token", TOKEN))},
        }
        kube.create(secret)
        rc, out, _ = play(tmp_path, env=env, verbosity=3, **extra)
        assert rc != 0 and "theirs: the Secret lacks customer_id." in out, out[-3000:]
        no_secret_in(out)
        kube.merge(secret, {"data": {"customer_id": base64.b64encode(b"c").decode()}})
        rc, out, _ = play(tmp_path, env=env, verbosity=3, diff=True, **extra)
        assert rc == 0, out[-3000:]
        no_secret_in(out)
        assert "Apply the Secret, its data hidden" not in out, "the role makes none"
        deployment = kube.get(("apps/v1", "Deployment"), "capvco-controller", "capvco-system")
        volumes = deployment["spec"]["template"]["spec"]["volumes"]
        assert [v["secret"]["secretName"] for v in volumes if "secret" in v] == ["theirs"], "it mounts the named one"
    finally:
        kube.stop()
