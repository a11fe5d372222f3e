"""roles/sriov_agent: rendered manifests validate offline against the Kubernetes schemas; bad credentials fail."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from helpers import SRIOV_VARS, render_sriov

K8S_VERSION = "1.30.0"
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
    role = docs[2]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    ds = docs[5]["spec"]["template"]["spec"]
    assert ds["hostNetwork"] is True
    caps = ds["containers"][0]["securityContext"]["capabilities"]
    assert caps == {"drop": ["ALL"], "add": ["NET_ADMIN", "SYS_ADMIN"]}
    mounts = {v["name"]: v for v in ds["volumes"]}
    assert mounts["netns"]["hostPath"]["path"] == "/var/run/netns" and "ledger" in mounts
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
    }
    assert json.loads(docs[7]["spec"]["config"])["network"] == "201" and docs[7]["metadata"]["namespace"] == "team-a"
    assert "agent-token-0123456789" not in out


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
