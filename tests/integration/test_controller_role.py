"""roles/capvco_controller: offline-valid manifests, applied to a fake API server, and a loud failure to start."""

from __future__ import annotations

import os
import textwrap

import kubernetes_validate
import yaml

from helpers import ROOT, KubeFake, run_playbook

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


def play(tmp_path, env=None, **overrides):
    path = tmp_path / "play.yml"
    path.write_text(PLAY)
    return run_playbook(str(path), extra_vars=dict(BASE, **overrides), env=env)


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
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    manager = pod["containers"][0]
    assert "--leader-elect" in manager["args"] and manager["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
    assert manager["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert manager["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert manager["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    writable = {m["mountPath"] for m in manager["volumeMounts"]}
    assert writable == {"/tmp", "/opt/ansible/.ansible"} and all("emptyDir" in v for v in pod["volumes"])
    env = {e["name"]: e for e in manager["env"]}
    assert env["WHITESKY_API_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "capvco-controller-credentials",
        "key": "api_token",
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


def test_every_secret_the_playbooks_read_is_read_by_name_and_kept_out_of_the_watch_cache():
    """What makes `get` alone enough: each Secret read in the reconcile playbooks is a k8s_info with a name (a GET of
    that object), and operator/watches.yaml blacklists Secrets for each kind, so the operator's proxy forwards those
    GETs to the API server instead of serving them from an informer (which would need list and watch)."""
    reads = []
    for folder, _dirs, files in os.walk(os.path.join(ROOT, "playbooks")):
        for name in files:
            if name.endswith(".yml"):
                with open(os.path.join(folder, name), encoding="utf-8") as fh:
                    reads += [(name, task) for task in _tasks(yaml.safe_load(fh)) if _k8s_secret_read(task) is not None]
    assert len(reads) >= 3, reads  # bootstrap data, <cluster>-kubeconfig, the agent credential
    for name, task in reads:
        args = _k8s_secret_read(task)
        assert args.get("name") and args.get("namespace"), (name, task["name"])
        assert not {"label_selectors", "field_selectors"} & set(args), (name, task["name"])
    with open(os.path.join(ROOT, "operator", "watches.yaml"), encoding="utf-8") as fh:
        watches = yaml.safe_load(fh)
    for watch in watches:
        assert {"group": "", "version": "v1", "kind": "Secret"} in watch["blacklist"], watch["kind"]


def _tasks(node):
    """Every task in a playbook or task file, blocks and plays opened."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        if any(k in node for k in ("tasks", "block", "rescue", "always", "pre_tasks", "post_tasks", "handlers")):
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers", "block", "rescue", "always"):
                yield from _tasks(node.get(key) or [])
        else:
            yield node


def _k8s_secret_read(task):
    for module in ("kubernetes.core.k8s_info", "k8s_info"):
        args = task.get(module)
        if isinstance(args, dict) and args.get("kind") == "Secret":
            return args
    return None


def test_applied_to_the_management_cluster_and_waits_until_available(tmp_path):
    kube = KubeFake(tmp_path, ready_after=3).start()
    try:
        rc, out, data = play(tmp_path, env=kube.env(), capvco_controller_replicas=2)
        assert rc == 0, out[-3000:]
        assert TOKEN not in out
        dep = kube.get(("apps/v1", "Deployment"), "capvco-controller", "capvco-system")
        assert dep["spec"]["replicas"] == 2 and dep["status"]["availableReplicas"] == 2
        crd = kube.get(
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition"), "vcomachines.infrastructure.cluster.x-k8s.io"
        )
        assert crd["metadata"]["labels"]["cluster.x-k8s.io/v1beta1"] == "v1beta1"
        polls = [
            r for r in kube.requests() if r["method"] == "GET" and r["path"].endswith("/deployments/capvco-controller")
        ]
        assert len(polls) >= 2  # it waited for the Deployment, which became Available after 3 s
        rc, out, data = play(tmp_path, env=kube.env(), capvco_controller_replicas=2)
        assert rc == 0 and sum(h["changed"] for h in data["stats"].values()) == 0, out[-3000:]
    finally:
        kube.stop()


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
