"""roles/capvco_controller: offline-valid manifests, applied to a fake API server, and a loud failure to start."""

from __future__ import annotations

import os
import textwrap

import kubernetes_validate
import yaml

from helpers import KubeFake, run_playbook

K8S_VERSION = "1.30.0"
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
        "Role",
        "RoleBinding",
        "Secret",
        "Deployment",
    ]
    for doc in docs:  # the CRDs too, against apiextensions.k8s.io/v1
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    rules = docs[5]["rules"]
    assert all("*" not in r["verbs"] and "*" not in r["resources"] for r in rules)
    secrets = [r for r in rules if "secrets" in r["resources"]]
    assert secrets == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}]
    assert not any(set(r["verbs"]) & {"create", "delete"} for r in rules if r["resources"] != ["events"])
    assert docs[7]["rules"][0]["resources"] == ["leases"] and docs[7]["metadata"]["namespace"] == "capvco-system"
    pod = docs[10]["spec"]["template"]["spec"]
    manager = pod["containers"][0]
    assert "--leader-elect" in manager["args"] and manager["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
    assert manager["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert manager["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert manager["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    env = {e["name"]: e for e in manager["env"]}
    assert env["WHITESKY_API_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "capvco-controller-credentials",
        "key": "api_token",
    }


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
