"""Cluster API objects for the controller's tests: a Cluster with its VCOCluster, a Machine with its bootstrap Secret
and VCOMachine, built in the fake API server (tests/kubefake.py); and a guest's first-boot report, served by the
emulator's readFile."""

from __future__ import annotations

import base64
import subprocess

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import script as firstboot_sh

IV = "infrastructure.cluster.x-k8s.io/v1beta1"
CV = "cluster.x-k8s.io/v1beta1"
MUTATING_K8S = ("POST", "PUT", "PATCH", "DELETE")
A100x2 = {"type": "NVIDIA A100", "count": 2, "driverVersion": "550"}


def b64(text):
    return base64.b64encode(text.encode()).decode()


def make_cluster(kube, name="gpu1", namespace="default", location="be-gen-1", labels=None, spec=None):
    if namespace != "default" and kube.get(("v1", "Namespace"), namespace) is None:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    cluster = kube.create(
        {
            "apiVersion": CV,
            "kind": "Cluster",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"infrastructureRef": {"apiVersion": IV, "kind": "VCOCluster", "name": name}},
        }
    )
    return kube.create(
        {
            "apiVersion": IV,
            "kind": "VCOCluster",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels or {},
                "finalizers": ["vcocluster.infrastructure.cluster.x-k8s.io"],
                "ownerReferences": [
                    {"apiVersion": CV, "kind": "Cluster", "name": name, "uid": cluster["metadata"]["uid"]}
                ],
            },
            "spec": dict({"location": location, "cloudspace": name + "-cs"}, **(spec or {})),
        }
    )


def make_machine(kube, name, cluster="gpu1", gpu=None, owned=True, bootstrap=True, image=12):
    machine = kube.create(
        {
            "apiVersion": CV,
            "kind": "Machine",
            "metadata": {"name": name, "namespace": "default", "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
            "spec": {
                "clusterName": cluster,
                "bootstrap": {"dataSecretName": name} if bootstrap else {},
                "infrastructureRef": {"apiVersion": IV, "kind": "VCOMachine", "name": name},
            },
        }
    )
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": "default"},
            "data": {
                "value": b64("#cloud-config\nruncmd: [[kubeadm, join, --config, /run/kubeadm.yaml]]\n"),
                "format": b64("cloud-config"),
            },
        }
    )
    meta = {
        "name": name,
        "namespace": "default",
        "labels": {"cluster.x-k8s.io/cluster-name": cluster},
        "finalizers": ["vcomachine.infrastructure.cluster.x-k8s.io"],
    }
    if owned:
        meta["ownerReferences"] = [
            {"apiVersion": CV, "kind": "Machine", "name": name, "uid": machine["metadata"]["uid"]}
        ]
    spec = {"vcpus": 4, "memory": 8192, "image": image}
    if gpu:
        spec["gpu"] = gpu
    return kube.create({"apiVersion": IV, "kind": "VCOMachine", "metadata": meta, "spec": spec}), machine


def condition(obj, ctype):
    return next((c for c in obj["status"].get("conditions", []) if c["type"] == ctype), None)


def write_requests(kube):
    return [(r["method"], r["path"], r["content_type"]) for r in kube.requests() if r["method"] in MUTATING_K8S]


STUB_SMI = """#!/bin/sh
i=0
while [ "$i" -lt %d ]; do echo "%s, NVIDIA A100-SXM4-40GB"; i=$((i + 1)); done
"""


def guest_reports(emulator, tmp_path, vm_id, smi_version, smi_count):
    """The VM's guest writes its first-boot status: the status the collection's real gpu-driver step writes (run
    here, with no install, against a stub nvidia-smi), served by the emulator's readFile as the guest agent would."""
    stub = tmp_path / "nvidia-smi"
    stub.write_text(STUB_SMI % (smi_count, smi_version))
    stub.chmod(0o755)
    state = tmp_path / ("state-%s-%d" % (smi_version, smi_count))
    script = render.render_gpu_driver("550", 2, install=False, wait=0, nvidia_smi=str(stub), state_dir=str(state))
    subprocess.run(["/bin/sh", "-s"], input=script, text=True, capture_output=True, check=False)
    content = (state / "gpu-driver.status").read_text()
    emulator.admin("POST", "/vm-file", {"vm_id": vm_id, "path": firstboot_sh.STATUS_FILE, "content": content})
