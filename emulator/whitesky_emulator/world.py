"""The default world: what the emulator holds when started without --config."""

from __future__ import annotations

import json
from typing import Any

DEMO_TOKEN = "capvco-demo-token"
DEMO_CUSTOMER = "capvco-demo"

#: A seed: customers, and locations with their prices, VM images, GPU profiles, external networks and cloudspaces.
World = dict[str, Any]

#: The VM images of the default world's locations, and of a seed location that lists none: image 12 is the one the
#: tests, the examples and the docs boot.
DEFAULT_IMAGES: tuple[dict[str, Any], ...] = (
    {
        "image_id": 12,
        "name": "Ubuntu 22.04 LTS (cloud-init)",
        "description": "Ubuntu Server 22.04 with cloud-init and the platform's guest agent",
        "os_type": "Linux",
        "size": 10,
        "boot_disk_size": 10,
        "memory": 512,
    },
    {
        "image_id": 14,
        "name": "Ubuntu 24.04 LTS (cloud-init)",
        "description": "Ubuntu Server 24.04 with cloud-init and the platform's guest agent",
        "os_type": "Linux",
        "size": 10,
        "boot_disk_size": 10,
        "memory": 1024,
    },
    {
        "image_id": 21,
        "name": "Debian 12 (cloud-init)",
        "description": "Debian 12 with cloud-init and the platform's guest agent",
        "os_type": "Linux",
        "size": 8,
        "boot_disk_size": 8,
        "memory": 512,
    },
)

DEFAULT_WORLD: World = {
    "customers": [{"customer_id": DEMO_CUSTOMER, "name": "CAPVCO demo customer"}],
    "locations": [
        {
            "name": "be-gen-1",
            "currency": "EUR",
            "prices": {
                "vcu": 12.0,
                "mu": 3.5,
                "su": 0.1,
                "fsu": 0.25,
                "piu": 5.0,
                "vgu": 730.0,
                "ou": 0.02,
                "tu": 0.0,
                "nu": 0.0,
                "wu": 15.0,
            },
            "images": list(DEFAULT_IMAGES),
            "gpus": [
                {
                    "id": "nvidia-a100-40c",
                    "vendor": "NVIDIA",
                    "model": "A100",
                    "description": "NVIDIA A100 40GB, full card (A100-40C)",
                    "available_instances": 6,
                },
                {
                    "id": "nvidia-a100-20c",
                    "vendor": "NVIDIA",
                    "model": "A100",
                    "description": "NVIDIA A100, half card (A100-20C)",
                    "available_instances": 8,
                },
                {
                    "id": "nvidia-l4-24q",
                    "vendor": "NVIDIA",
                    "model": "L4",
                    "description": "NVIDIA L4 24GB (L4-24Q)",
                    "available_instances": 4,
                },
            ],
            "external_networks": [
                {
                    "external_network_id": 101,
                    "name": "sriov-ext",
                    "network": "198.51.100.0",
                    "gateway": "198.51.100.1",
                    "subnet_mask": "255.255.255.0",
                },
            ],
            "cloudspaces": [{"cloudspace_id": "cs-demo", "customer_id": DEMO_CUSTOMER, "name": "capvco-demo"}],
        },
        {
            "name": "nl-ams-1",
            "currency": "EUR",
            "prices": {
                "vcu": 13.0,
                "mu": 3.8,
                "su": 0.12,
                "fsu": 0.3,
                "piu": 6.0,
                "vgu": 1460.0,
                "ou": 0.025,
                "tu": 0.0,
                "nu": 0.0,
                "wu": 16.0,
            },
            "images": [image for image in DEFAULT_IMAGES if image["image_id"] in (12, 14)],
            "gpus": [
                {
                    "id": "nvidia-h100-80c",
                    "vendor": "NVIDIA",
                    "model": "H100",
                    "description": "NVIDIA H100 80GB, full card (H100-80C)",
                    "available_instances": 2,
                },
            ],
            "external_networks": [
                {
                    "external_network_id": 201,
                    "name": "ams-ext",
                    "network": "203.0.113.0",
                    "gateway": "203.0.113.1",
                    "subnet_mask": "255.255.255.0",
                },
            ],
            "cloudspaces": [{"cloudspace_id": "cs-ams", "customer_id": DEMO_CUSTOMER, "name": "capvco-ams"}],
        },
    ],
}


def load_world(path: str | None) -> World:
    """A seed file is JSON (or YAML when PyYAML is present) shaped like DEFAULT_WORLD."""
    if not path:
        return DEFAULT_WORLD
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    try:
        world: World = json.loads(text)
    except ValueError:
        import yaml  # only needed for YAML seeds

        world = yaml.safe_load(text)
    return world
