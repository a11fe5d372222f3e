"""Cluster specs for the tests and the chaos suite: a control plane and one GPU pool, as cluster_create takes them."""

from __future__ import annotations

#: The image every machine of the tests' specs boots (the emulator's default world has it in every location).
IMAGE = 12


def cluster_spec(name, cloudspace, gpu_replicas=1, count=1, location="be-gen-1", small=False):
    """``name``'s spec: one control-plane machine and a pool ``gpu`` of ``gpu_replicas`` x ``count`` A100s (a pool
    without GPUs when ``count`` is 0), every machine booting :data:`IMAGE`."""
    cpus, memory = (1, 1024) if small else (2, 2048)
    spec = {
        "cluster": {"name": name, "location": location, "cloudspace": cloudspace},
        "control_plane": {"replicas": 1, "vcpus": cpus, "memory": memory, "image": IMAGE},
        "pools": [
            {
                "name": "gpu",
                "replicas": gpu_replicas,
                "vcpus": cpus * 2,
                "memory": memory * 4 if not small else memory * 2,
                "image": IMAGE,
                "gpu": {"type": "NVIDIA A100", "count": count, "driverVersion": "550"},
            }
        ],
    }
    if not count:
        del spec["pools"][0]["gpu"]
    return spec
