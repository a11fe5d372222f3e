"""The cluster autoscaler's reading of an infrastructure machine template, for a node group at zero replicas: the
rules of its Cluster API provider (kubernetes/autoscaler, cluster-autoscaler/cloudprovider/clusterapi:
``clusterapi_unstructured.go``, ``InstanceCapacity`` with ``resourceCapacityFromInfrastructureObject`` and
``InstanceSystemInfo`` with ``systemInfoFromInfrastructureObject``; ``clusterapi_nodegroup.go``,
``TemplateNodeInfo`` and ``buildTemplateLabels``; ``clusterapi_utils.go``, the annotations), written again in
Python so that a test applies them to what the controller published. Read from the autoscaler's source, not run.

- ``status.capacity`` and ``status.nodeInfo`` are read as maps of strings: one value that is not a string voids the
  whole map.
- Each capacity value is parsed as a Kubernetes quantity; one that does not parse is dropped (that key only).
- Every capacity key is a resource name as it is (``nvidia.com/gpu`` is the GPU's); ``pods`` is always the
  ``maxPods`` annotation or 110; the MachineDeployment's ``capacity.cluster-autoscaler.kubernetes.io/*`` annotations
  override the template's values key by key.
- The group can scale from zero only with ``cpu`` and ``memory`` known.
- Labels: ``kubernetes.io/arch`` and ``kubernetes.io/os`` (defaults amd64 and linux, then ``nodeInfo``'s), then the
  ``capacity.cluster-autoscaler.kubernetes.io/labels`` annotation (``k=v,k2=v2``); no label comes from the template.
"""

from __future__ import annotations

import re
from decimal import Decimal

ANNOTATION = "capacity.cluster-autoscaler.kubernetes.io/"
DEFAULT_MAX_PODS = 110
#: A Kubernetes quantity: a signed decimal number, then a binary or decimal suffix, or a decimal exponent.
QUANTITY = re.compile(r"^([+-]?[0-9]*\.?[0-9]+|[+-]?[0-9]+\.)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")
SUFFIX = {
    "": 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def parse_quantity(text):
    """A quantity string's value (a Decimal), or None when it is not one."""
    if not isinstance(text, str):
        return None
    m = QUANTITY.match(text)
    if not m:
        return None
    number, suffix = Decimal(m.group(1)), m.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return number * (Decimal(10) ** int(suffix[1:]))
    return number * SUFFIX[suffix]


def string_map(status, key):
    """``NestedStringMap``: the map, or None when it is absent or any value is not a string."""
    value = (status or {}).get(key)
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return None
    return value


def template_node(template, annotations=None):
    """``(capacity {resource: Decimal}, labels, can scale from zero)`` of a node of the group, as the autoscaler
    builds it from the infrastructure template (a dict) and the MachineDeployment's annotations."""
    annotations = annotations or {}
    status = template.get("status") or {}
    capacity = {}
    for key, value in (string_map(status, "capacity") or {}).items():
        parsed = parse_quantity(value)
        if parsed is not None:
            capacity[key] = parsed
    for name, resource in (("cpu", "cpu"), ("memory", "memory"), ("ephemeral-disk", "ephemeral-storage")):
        parsed = parse_quantity(annotations.get(ANNOTATION + name, ""))
        if parsed:
            capacity[resource] = parsed
    gpu_type, gpu_count = annotations.get(ANNOTATION + "gpu-type"), annotations.get(ANNOTATION + "gpu-count")
    if gpu_type and gpu_count and int(gpu_count):
        capacity[gpu_type] = Decimal(int(gpu_count))
    capacity["pods"] = Decimal(int(annotations.get(ANNOTATION + "maxPods") or DEFAULT_MAX_PODS))
    info = string_map(status, "nodeInfo") or {}
    labels = {"kubernetes.io/arch": info.get("architecture", ""), "kubernetes.io/os": info.get("operatingSystem", "")}
    for item in (annotations.get(ANNOTATION + "labels") or "").split(","):
        key, sep, value = item.partition("=")
        if sep:
            labels[key] = value
    return capacity, labels, "cpu" in capacity and "memory" in capacity
