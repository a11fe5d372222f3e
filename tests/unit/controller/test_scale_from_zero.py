"""Scale from zero without a server: what a VCOMachineTemplate publishes (capacity, node labels), the first boot's
kubelet arguments, and the autoscaler's reading of it (tests/autoscaler.py) over every spec the CRD admits."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from capvco_controller import vcomachinetemplate as tpl

from autoscaler import parse_quantity, template_node
from properties import examples


@pytest.mark.parametrize(
    "text,value",
    [
        ("NVIDIA A100", "NVIDIA-A100"),
        ("nvidia  l4", "nvidia-l4"),
        ("H100 SXM5.80GB", "H100-SXM5.80GB"),
        (" A100 ", "A100"),
    ],
)
def test_a_gpu_type_becomes_a_label_value(text, value):
    assert render.label_value(text) == value
    assert render.gpu_node_labels(text) == {"cluster-api/accelerator": value}


@pytest.mark.parametrize("text", ["", "   ", "!!!", "A" * 64, "{{ lookup('pipe','id') }}" + "x" * 60])
def test_a_gpu_type_no_label_value_can_hold_is_refused_naming_it(text):
    with pytest.raises(InputError, match="cannot be a node label value"):
        render.label_value(text)


def test_the_kubelet_gets_the_provider_id_and_the_node_labels_before_the_bootstrap():
    script = render.render(
        ["kubelet"],
        "#!/bin/sh\nkubeadm join\n",
        provider_id="whitesky://be-gen-1/cs-1/c-gpu-0",
        node_labels=render.gpu_node_labels("NVIDIA A100"),
    )
    line = (
        "'KUBELET_EXTRA_ARGS=--provider-id=whitesky://be-gen-1/cs-1/c-gpu-0"
        " --node-labels=cluster-api/accelerator=NVIDIA-A100'"
    )
    assert "echo " + line + " >> /etc/default/kubelet" in script
    assert script.index("STEP=kubelet-args") < script.index("STEP=bootstrap")
    assert "kubelet-args" not in render.render(["kubelet"])  # nothing to hand the kubelet: no step


@pytest.mark.parametrize(
    "labels,message",
    [
        ({"Bad Key": "x"}, "invalid node label key"),
        ({"a/b/c": "x"}, "invalid node label key"),
        ({"cluster-api/accelerator": "a b"}, "invalid value"),
        ({"cluster-api/accelerator": "x" * 64}, "invalid value"),
        ({"k": "$(id)"}, "invalid value"),
    ],
)
def test_bad_node_labels_are_refused(labels, message):
    with pytest.raises(InputError, match=message):
        render.render([], node_labels=labels)


def test_a_gpu_pool_boots_with_its_label_and_a_cpu_pool_without():
    from ansible_collections.whitesky.capvco.plugins.module_utils.machines import userdata
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import GpuSpec, Pool

    boot = userdata.Boot({"packages": ["kubelet"]})
    gpu = Pool("gpu", ("c-gpu-0",), gpu=GpuSpec("NVIDIA L4", 1, "550"))
    cpu = Pool("cp", ("c-cp-0",))
    data = userdata.pool_user_data(boot, [cpu, gpu])
    assert "--node-labels=cluster-api/accelerator=NVIDIA-L4" in data[1]
    assert "node-labels" not in data[0]


SPECS = st.fixed_dictionaries(
    {"vcpus": st.integers(1, 256), "memory": st.integers(512, 4194304)},
    optional={
        "diskSize": st.integers(1, 65536),
        "gpu": st.fixed_dictionaries(
            {"type": st.sampled_from(["NVIDIA A100", "NVIDIA L4", "NVIDIA H100"])},
            optional={"count": st.integers(1, 16)},
        ),
    },
)


@settings(max_examples=examples(300), deadline=None)
@given(SPECS)
def test_the_autoscaler_reads_every_published_capacity_whole(spec):
    """Every template the CRD admits publishes a capacity the autoscaler takes whole: string values that parse as
    quantities, cpu and memory there (it can scale from zero), the GPU count under nvidia.com/gpu, nothing else."""
    capacity = tpl.capacity(spec)
    status = {"capacity": capacity, "nodeInfo": dict(tpl.NODE_INFO)}
    node, labels, from_zero = template_node({"status": status})
    assert from_zero
    assert node["cpu"] == spec["vcpus"] and node["memory"] == Decimal(spec["memory"]) * 2**20
    assert node.get("ephemeral-storage") == (Decimal(spec["diskSize"]) * 2**30 if "diskSize" in spec else None)
    count = (spec.get("gpu") or {}).get("count", 1) if spec.get("gpu") else 0
    assert node.get(tpl.GPU_RESOURCE) == (count or None)
    assert set(node) - {"pods"} == set(capacity)
    assert labels == {"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}


def test_the_autoscalers_rules_as_written_here():
    """The reading rules themselves: a value that is not a quantity is dropped, a map with a non-string voids the
    map, annotations override the template key by key, pods is always 110 or maxPods."""
    assert parse_quantity("500mb") is None and parse_quantity("4GB") is None and parse_quantity("") is None
    assert parse_quantity("1e3") == 1000 and parse_quantity("500m") == Decimal("0.5") and parse_quantity("2Ki") == 2048
    node, _, from_zero = template_node({"status": {"capacity": {"cpu": "2", "memory": "500mb"}}})
    assert node == {"cpu": 2, "pods": 110} and not from_zero
    node, _, from_zero = template_node({"status": {"capacity": {"cpu": 2, "memory": "1Gi"}}})
    assert node == {"pods": 110} and not from_zero
    ann = "capacity.cluster-autoscaler.kubernetes.io/"
    node, labels, from_zero = template_node(
        {"status": {"capacity": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}}},
        {ann + "gpu-type": "nvidia.com/gpu", ann + "gpu-count": "4", ann + "maxPods": "30", ann + "labels": "a=b,junk"},
    )
    assert node["nvidia.com/gpu"] == 4 and node["pods"] == 30 and from_zero and labels["a"] == "b"
