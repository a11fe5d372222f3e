"""Cluster API objects for the controller's tests and benchmarks, built in the fake API server (``kubefake``) as
Cluster API writes them at the version the fake serves (``KubeFake.capi_version``: v1beta2, or v1beta1 for a
release before v1.11): a Cluster with its VCOCluster, a Machine with its bootstrap Secret and VCOMachine; and a
guest's first-boot report, served by the emulator's readFile.

What the core's controllers write (the owner references, a Machine's bootstrap data once its bootstrap provider made
it) is written here as they write it; what the core reads of the CAPVCO objects, its stand-in in the fake surfaces
(``kubecapi``)."""

from __future__ import annotations

import base64
import subprocess

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import script as firstboot_sh

INFRA_GROUP = "infrastructure.cluster.x-k8s.io"
IV = INFRA_GROUP + "/v1beta1"
MUTATING_K8S = ("POST", "PUT", "PATCH", "DELETE")
A100x2 = {"type": "NVIDIA A100", "count": 2, "driverVersion": "550"}


def b64(text):
    return base64.b64encode(text.encode()).decode()


def cv(kube):
    """The apiVersion of Cluster API's core kinds on ``kube``."""
    return "cluster.x-k8s.io/" + kube.capi_version


def ref(kube, api_version, kind, name):
    """A reference of a Cluster API object to another, as its version writes it: ``{apiGroup, kind, name}``
    (v1beta2's ContractVersionedObjectReference) or ``{apiVersion, kind, name}`` (v1beta1's ObjectReference)."""
    if kube.capi_version == "v1beta2":
        return {"apiGroup": api_version.split("/")[0], "kind": kind, "name": name}
    return {"apiVersion": api_version, "kind": kind, "name": name}


def owner_ref(kube, obj):
    """An owner reference to the Cluster API object ``obj``, as its controllers set it."""
    meta = obj["metadata"]
    return {"apiVersion": cv(kube), "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"]}


def make_cluster(kube, name="gpu1", namespace="default", location="be-gen-1", labels=None, spec=None):
    if namespace != "default" and kube.get(("v1", "Namespace"), namespace) is None:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    cluster = kube.create(
        {
            "apiVersion": cv(kube),
            "kind": "Cluster",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"infrastructureRef": ref(kube, IV, "VCOCluster", name)},
        }
    )
    return kube.create(
        {
            "apiVersion": IV,
            "kind": "VCOCluster",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": dict({"cluster.x-k8s.io/cluster-name": name}, **(labels or {})),
                "finalizers": ["vcocluster.infrastructure.cluster.x-k8s.io"],
                "ownerReferences": [owner_ref(kube, cluster)],
            },
            # the endpoint the user gives (the controller makes none; Cluster API copies it to the Cluster)
            "spec": dict(
                {
                    "location": location,
                    "cloudspace": name + "-cs",
                    "controlPlaneEndpoint": {"host": "%s.%s.example" % (name, namespace), "port": 6443},
                },
                **(spec or {}),
            ),
        }
    )


def bootstrap_ready(kube, machine, secret_name):
    """What a Machine says once its bootstrap provider made its data: ``spec.bootstrap.dataSecretName``, and
    ``status.initialization.bootstrapDataSecretCreated`` (v1beta2) or ``status.bootstrapReady`` (v1beta1)."""
    kube.merge(machine, {"spec": {"bootstrap": {"dataSecretName": secret_name}}})
    if kube.capi_version == "v1beta2":
        made = {"initialization": {"bootstrapDataSecretCreated": True}}
    else:
        made = {"bootstrapReady": True}
    code, out = kube.call("PATCH", kube.path(machine) + "/status", {"status": made}, "application/merge-patch+json")
    assert code == 200, out
    return out


def make_machine(kube, name, cluster="gpu1", gpu=None, owned=True, bootstrap=True, image=12):
    """A Machine of ``cluster`` (its bootstrap config a KubeadmConfig, its data made when ``bootstrap``), its
    bootstrap data Secret, and its VCOMachine (owned by the Machine when ``owned``, as the core sets it)."""
    config = ref(kube, "bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfig", name)
    machine = kube.create(
        {
            "apiVersion": cv(kube),
            "kind": "Machine",
            "metadata": {"name": name, "namespace": "default", "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
            "spec": {
                "clusterName": cluster,
                "bootstrap": {"configRef": config},
                "infrastructureRef": ref(kube, IV, "VCOMachine", name),
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
    if bootstrap:
        machine = bootstrap_ready(kube, machine, name)
    meta = {
        "name": name,
        "namespace": "default",
        "labels": {"cluster.x-k8s.io/cluster-name": cluster},
        "finalizers": ["vcomachine.infrastructure.cluster.x-k8s.io"],
    }
    if owned:
        meta["ownerReferences"] = [owner_ref(kube, machine)]
    spec = {"vcpus": 4, "memory": 8192, "image": image}
    if gpu:
        spec["gpu"] = gpu
    return kube.create({"apiVersion": IV, "kind": "VCOMachine", "metadata": meta, "spec": spec}), machine


def condition(obj, ctype):
    return next((c for c in obj["status"].get("conditions", []) if c["type"] == ctype), None)


def v1beta1_condition(obj, ctype):
    """A condition of the v1beta1 shape (with its severity), where the v1beta2 contract keeps it:
    ``status.deprecated.v1beta1.conditions``."""
    old = ((obj["status"].get("deprecated") or {}).get("v1beta1") or {}).get("conditions") or []
    return next((c for c in old if c["type"] == ctype), None)


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
