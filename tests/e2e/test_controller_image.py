"""The controller from its image (``controller/Containerfile``, built from this working tree), run as the role's
Deployment runs it: the Deployment's own args and environment, a read-only root file system with emptyDirs at /tmp
and ~/.ansible, the image's non-root uid, no capability. It reconciles a GPU machine, and applies the SR-IOV add-on
with the ansible-playbook, kubernetes.core and collection the image installed."""

from __future__ import annotations

import base64
import subprocess
import uuid

import yaml

from capvco_lab import podman_cni
from capvco_lab.capi import A100x2, b64, condition, make_cluster, make_machine
from capvco_lab.controller import Controller
from capvco_lab.images import controller_image

from helpers import read_text, require, run_playbook, wait_for


def deployment(tmp_path):
    """The Deployment the role renders (its container's args and env)."""
    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: whitesky.capvco.capvco_controller\n"
    )
    out_dir = tmp_path / "rendered"
    rc, out, _ = run_playbook(
        str(play),
        extra_vars={
            "capvco_controller_api_url": "https://portal.example/api/1",
            "capvco_controller_customer_id": "capvco-demo",
            "capvco_controller_api_token": "unused-here",
            "capvco_controller_render_dir": str(out_dir),
        },
    )
    assert rc == 0, out[-3000:]
    docs = yaml.safe_load_all(read_text(str(out_dir / "capvco-controller.yaml")))
    (dep,) = [d for d in docs if d["kind"] == "Deployment"]
    return dep["spec"]["template"]["spec"]


def test_the_controller_image_reconciles_and_applies_the_addon(kube, emulator, tmp_path):
    require(not podman_cni.missing(), "the controller image needs podman")
    image = controller_image()
    pod = deployment(tmp_path)
    (manager,) = pod["containers"]
    name = "capvco-ctl-" + uuid.uuid4().hex[:8]
    user = "%d:%d" % (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"])
    plain = {e["name"]: e["value"] for e in manager["env"] if "value" in e}

    def podman(env):
        argv = ["podman", "run", "--rm", "--name", name, "--network", "host", "--read-only", "--user", user]
        argv += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
        for mount in manager["volumeMounts"]:  # the Deployment's emptyDirs (the read-only one is the Secret's)
            if not mount.get("readOnly"):
                argv += ["--tmpfs", "%s:rw,mode=1777,notmpcopyup" % mount["mountPath"]]
        argv += ["-v", "%s:%s:ro" % (kube.kubeconfig, kube.kubeconfig)]
        for key, value in dict(plain, POD_NAMESPACE="capvco-system").items():
            argv += ["-e", "%s=%s" % (key, value)]
        # the credentials Secret, mounted where the Deployment mounts it: a file per key
        (mount,) = [m for m in manager["volumeMounts"] if m.get("readOnly")]
        secret = tmp_path / "credentials"
        secret.mkdir(exist_ok=True)
        for key, var in (("api_url", "WHITESKY_API_URL"), ("customer_id", "WHITESKY_CUSTOMER_ID")):
            (secret / key).write_text(env[var])
        (secret / "api_token").write_text(env["WHITESKY_API_TOKEN"])
        argv += ["-v", "%s:%s:ro" % (secret, mount["mountPath"])]
        return argv + [image] + manager["args"]

    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "capvco-system"}})
    # the workload cluster is the same fake here, and the agent's own credential is not the cluster's
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "gpu1-kubeconfig", "namespace": "default"},
            "data": {"value": b64(read_text(kube.kubeconfig))},
        }
    )
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "agent-cred", "namespace": "default"},
            "data": {"token": b64("agent-token-123")},
        }
    )
    ctl = Controller(kube, emulator, tmp_path, "--health-probe-bind-address", "127.0.0.1:0", command=podman)
    try:
        ctl.start()
        vc = make_cluster(
            kube,
            labels={"addons.capvco.whitesky.cloud/sriov": "enabled"},
            spec={
                "sriov": {
                    "credentialSecretRef": {"name": "agent-cred"},
                    "networks": [{"name": "sriov-ext", "network": "sriov-ext"}],
                }
            },
        )
        vm, _ = make_machine(kube, "gpu1-md-0-img", gpu=A100x2)
        assert wait_for(lambda: ((kube.get(vm) or {}).get("status") or {}).get("ready") is True, 180), ctl.text()[
            -3000:
        ]
        assert len(kube.get(vm)["status"]["gpu"]["reservations"]) == 2

        def addon():
            got = {"status": (kube.get(vc) or {}).get("status") or {}}
            return (condition(got, "SRIOVAddonReady") or {}).get("status") == "True"

        assert wait_for(addon, 300), ctl.text()[-3000:]
        secret = kube.call("GET", "/api/v1/namespaces/capvco-sriov/secrets/capvco-sriov-credential")[1]
        assert base64.b64decode(secret["data"]["token"]).decode() == "agent-token-123"
        assert kube.get(("apps/v1", "DaemonSet"), "capvco-sriov-agent", "capvco-sriov") is not None
        assert "leader" in ctl.text().lower()
    finally:
        ctl.stop()
        subprocess.run(["podman", "rm", "-f", name], capture_output=True, check=False)
    assert emulator.token not in ctl.text() and "agent-token-123" not in ctl.text()
