"""VCOMachineTemplates for the cluster autoscaler (a GPU pool scaled from zero): the controller process publishes what
one machine brings (status.capacity, status.nodeInfo, status.nodeLabels) and whether the GPU type can be had in the
location now, against the fake API server and the emulator; the published status is read back with the
autoscaler's own rules (tests/autoscaler.py)."""

from __future__ import annotations

from decimal import Decimal

from capvco_lab.capi import IV, cv, make_cluster, owner_ref
from capvco_lab.controller import Controller

from autoscaler import ANNOTATION, template_node
from helpers import wait_for

TEMPLATE_GPU = {
    "vcpus": 16,
    "memory": 65536,
    "image": 12,
    "diskSize": 100,
    "gpu": {"type": "NVIDIA A100", "count": 2},
}


def make_template(kube, name, spec, cluster="gpu1", owned=True):
    meta = {"name": name, "namespace": "default"}
    if owned:  # what Cluster API's MachineDeployment controller sets on the templates it uses
        owner = kube.get((cv(kube), "Cluster"), cluster)
        meta["ownerReferences"] = [owner_ref(kube, owner)]
    return kube.create(
        {"apiVersion": IV, "kind": "VCOMachineTemplate", "metadata": meta, "spec": {"template": {"spec": spec}}}
    )


def status(kube, obj):
    return (kube.get(obj) or {}).get("status") or {}


def condition(kube, obj, ctype="GPUsAvailable"):
    return next((c for c in status(kube, obj).get("conditions") or [] if c["type"] == ctype), {})


def test_templates_publish_what_one_machine_brings_and_whether_the_gpu_type_can_be_had(kube, emulator, tmp_path):
    ctl = Controller(kube, emulator, tmp_path, "--drift-period", "2").start()
    try:
        make_cluster(kube)
        gpu = make_template(kube, "gpu1-md-gpu", TEMPLATE_GPU)
        cpu = make_template(kube, "gpu1-md-cpu", {"vcpus": 4, "memory": 8192, "image": 12})
        absent = make_template(kube, "gpu1-md-z9", dict(TEMPLATE_GPU, gpu={"type": "NVIDIA Z9000", "count": 1}))
        too_many = make_template(kube, "gpu1-md-16", dict(TEMPLATE_GPU, gpu={"type": "NVIDIA A100", "count": 16}))
        l4 = dict(TEMPLATE_GPU, gpu={"type": "NVIDIA L4", "count": 1})  # (the A100s are taken below)
        no_image = make_template(kube, "gpu1-md-noimg", {k: v for k, v in l4.items() if k != "image"})
        lacking = make_template(kube, "gpu1-md-img999", dict(l4, image=999))
        assert wait_for(lambda: condition(kube, gpu).get("status") == "True", 60), ctl.text()[-3000:]
        assert condition(kube, gpu, "MachineConfigValid")["status"] == "True"

        # a GPU template: its capacity as quantity strings, as the proposal's types require
        got = status(kube, gpu)
        assert got["capacity"] == {
            "cpu": "16",
            "memory": "65536Mi",
            "ephemeral-storage": "100Gi",
            "nvidia.com/gpu": "2",
        }
        assert got["nodeInfo"] == {"architecture": "amd64", "operatingSystem": "linux"}
        assert got["nodeLabels"] == {"cluster-api/accelerator": "NVIDIA-A100"}
        assert got["gpu"] == {
            "location": "be-gen-1",
            "available": 6,  # whole cards (a template without gpu.profile): the 6 of nvidia-a100-40c
            "perMachine": 2,
            "costPerMachineHour": 2.0,
            "currency": "EUR",
        }
        # ... as the autoscaler reads it: the node template of a group at zero, with the MachineDeployment's labels
        annotations = {ANNOTATION + "labels": ",".join("%s=%s" % kv for kv in got["nodeLabels"].items())}
        capacity, labels, from_zero = template_node(kube.get(gpu), annotations)
        assert from_zero
        assert capacity == {
            "cpu": Decimal(16),
            "memory": Decimal(64 * 2**30),
            "ephemeral-storage": Decimal(100 * 2**30),
            "nvidia.com/gpu": Decimal(2),
            "pods": Decimal(110),
        }
        assert labels == {
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            "cluster-api/accelerator": "NVIDIA-A100",
        }

        # a template without a GPU: none of the GPU keys, no GPU condition
        assert wait_for(lambda: status(kube, cpu).get("capacity"), 30)
        got = status(kube, cpu)
        assert got["capacity"] == {"cpu": "4", "memory": "8192Mi"}
        assert condition(kube, cpu, "MachineConfigValid")["status"] == "True"
        assert "nodeLabels" not in got and "gpu" not in got and condition(kube, cpu) == {}
        assert template_node(kube.get(cpu))[2] and "nvidia.com/gpu" not in template_node(kube.get(cpu))[0]

        # a type the location does not offer, and one it offers too few of for one machine: the condition, a Warning
        # Event each, and no capacity (the autoscaler cannot scale the group up from zero into a machine that fails)
        assert wait_for(lambda: condition(kube, absent).get("reason") == "GPUTypeNotOffered", 30)
        assert wait_for(lambda: condition(kube, too_many).get("reason") == "InsufficientGPUs", 30)
        for obj in (absent, too_many):
            assert condition(kube, obj)["status"] == "False" and "capacity" not in status(kube, obj)
            assert not template_node(kube.get(obj))[2]
        assert "it offers: NVIDIA A100, NVIDIA L4" in condition(kube, absent)["message"]
        assert "one machine needs 16" in condition(kube, too_many)["message"]
        assert "not enough NVIDIA A100" in condition(kube, too_many)["message"], "the reservation's own allocation"

        # a machine of it would fail: without an image, or with one the location lacks; its GPUs can be had, but it
        # publishes no capacity (the autoscaler would scale up into machines that fail), and says why
        for obj, said in ((no_image, "needs image_id"), (lacking, "location 'be-gen-1' has no such image")):
            assert wait_for(lambda o=obj: condition(kube, o, "MachineConfigValid").get("status") == "False", 30)
            got = condition(kube, obj, "MachineConfigValid")
            assert got["reason"] == "InvalidConfiguration" and said in got["message"], got
            assert condition(kube, obj)["status"] == "True", "its GPUs can be had"
            assert "capacity" not in status(kube, obj) and not template_node(kube.get(obj))[2]
        assert "12 'Ubuntu" in condition(kube, lacking, "MachineConfigValid")["message"], "the images there"
        warnings = [(e["involvedObject"]["name"], e["reason"]) for e in kube.events() if e["type"] == "Warning"]
        assert sorted(warnings) == [
            ("gpu1-md-16", "InsufficientGPUs"),
            ("gpu1-md-img999", "InvalidConfiguration"),
            ("gpu1-md-noimg", "InvalidConfiguration"),
            ("gpu1-md-z9", "GPUTypeNotOffered"),
        ]

        # the availability is looked at every drift period: the Event is not repeated, and a template whose type
        # becomes short loses its capacity (the location's free A100s taken by someone else)
        first = kube.get(gpu)["metadata"]["resourceVersion"]
        with emulator.client() as client:  # one free instance left in each A100 profile
            for gpu_id, n in (("nvidia-a100-20c", 7), ("nvidia-a100-40c", 5)):
                for i in range(n):
                    body = {"vgpu_name": "someone-else-%s-%d" % (gpu_id, i)}
                    client.call("reserveVGPU", body=body, location="be-gen-1", gpu_id=gpu_id)
        assert wait_for(lambda: condition(kube, gpu).get("reason") == "InsufficientGPUs", 30), ctl.text()[-3000:]
        assert kube.get(gpu)["metadata"]["resourceVersion"] != first and "capacity" not in status(kube, gpu)
        warnings = [e["reason"] for e in kube.events() if e["type"] == "Warning"]
        assert sorted(warnings) == [
            "GPUTypeNotOffered",
            "InsufficientGPUs",
            "InsufficientGPUs",
            "InvalidConfiguration",
            "InvalidConfiguration",
        ]

        # templates are immutable in Cluster API: the CRD refuses a change of the spec
        code, body = kube.call(
            "PATCH",
            "/apis/%s/namespaces/default/vcomachinetemplates/gpu1-md-gpu" % IV,
            {"spec": {"template": {"spec": {"vcpus": 32}}}},
            content_type="application/merge-patch+json",
        )
        assert code == 422 and "cannot change" in body["message"], body
        assert kube.get(gpu)["spec"]["template"]["spec"]["vcpus"] == 16
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]


def test_a_template_waits_for_its_cluster_to_know_its_location(kube, emulator, tmp_path):
    ctl = Controller(kube, emulator, tmp_path).start()
    try:
        tpl = make_template(kube, "late-md-gpu", TEMPLATE_GPU, cluster="late", owned=False)
        kube.merge(tpl, {"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "late"}}})
        assert wait_for(lambda: condition(kube, tpl).get("reason") == "WaitingForCluster", 30), ctl.text()[-3000:]
        assert "capacity" not in status(kube, tpl)
        make_cluster(kube, name="late")  # the VCOCluster arrives: the template is looked at again at once
        assert wait_for(lambda: condition(kube, tpl).get("status") == "True", 30), ctl.text()[-3000:]
        assert status(kube, tpl)["capacity"]["nvidia.com/gpu"] == "2"
    finally:
        ctl.stop()
