"""What each operation the emulator serves accepts, generated from the platform's Swagger spec: do not edit.

Written by ``python -m whitesky_emulator.gen_params`` for every operation of the collection's one table of
operations (``plugins/module_utils/platform/api.py``): each path parameter's type (``customer_id``, a string, is
in every path and left out), each query parameter's type, whether it is required, its allowed values and least
value, and the request body's closed schema.  ``params`` validates every request by it.
"""

from __future__ import annotations

from .paramtypes import ARRAY, BOOL, INT, OBJECT, STR, OperationParams, body, q

__all__ = ["ARRAY", "BOOL", "INT", "OBJECT", "OPERATIONS", "STR"]

#: operationId -> what it accepts (``paramtypes.OperationParams``)
OPERATIONS: dict[str, OperationParams] = {
    "listCustomerLocations": {"path": {}, "query": {}},
    "listCustomerImages": {"path": {"location": STR}, "query": {"include_logo": q(BOOL)}},
    "listAvailableGPUProfiles": {"path": {"location": STR}, "query": {}},
    "reserveVGPU": {
        "path": {"location": STR, "gpu_id": STR},
        "query": {},
        "body": body({"vgpu_name": STR}, required=("vgpu_name",)),
    },
    "listCustomerVGPUS": {
        "path": {"location": STR},
        "query": {
            "limit": q(INT, minimum=0),
            "start_after": q(INT, minimum=0),
            "only_deleted": q(BOOL),
            "include_deleted": q(BOOL),
        },
    },
    "restoreVGPU": {"path": {"location": STR, "vgpu_id": STR}, "query": {}},
    "deleteVGPU": {"path": {"location": STR, "vgpu_id": STR}, "query": {"detach": q(BOOL), "permanently": q(BOOL)}},
    "reserveAndAttachVGPUToVM": {
        "path": {"cloudspace_id": STR, "vm_id": INT, "gpu_id": STR},
        "query": {},
        "body": body({"vgpu_name": STR}, required=("vgpu_name",)),
    },
    "attachVGPUToVM": {"path": {"cloudspace_id": STR, "vm_id": INT, "vgpu_id": STR}, "query": {}},
    "detachVGPUFromVM": {"path": {"cloudspace_id": STR, "vm_id": INT, "vgpu_id": STR}, "query": {}},
    "getCustomerConsumption": {
        "path": {"location": STR},
        "query": {"end": q(INT, required=True), "start": q(INT, required=True)},
    },
    "getCustomerLocationPricing": {"path": {"location": STR}, "query": {}},
    "listCloudspaces": {
        "path": {},
        "query": {
            "include_deleted": q(BOOL),
            "only_deleted": q(BOOL),
            "include_disabled": q(BOOL),
            "locations": q(ARRAY),
            "filter_storage_only": q(BOOL),
        },
    },
    "createCloudspace": {
        "path": {},
        "query": {},
        "body": body(
            {
                "name": STR,
                "host": STR,
                "local_domain": STR,
                "location": STR,
                "private_network": STR,
                "vcpu_quota": INT,
                "vdisk_space_quota": INT,
                "memory_quota": INT,
                "public_ip_quota": INT,
                "firewall": body(
                    {
                        "private": BOOL,
                        "external_network_id": INT,
                        "parent_cloudspace_id": STR,
                        "custom": body(
                            {
                                "image_id": INT,
                                "cdrom_id": INT,
                                "type": STR,
                                "disk_size": INT,
                                "vcpus": INT,
                                "memory": INT,
                            },
                            enum={"type": ("Linux", "Windows", "Unix", "BSD", "Darwin", "Other")},
                        ),
                    },
                    required=("private",),
                ),
            },
            required=("firewall", "location", "name"),
        ),
    },
    "getCloudspaceInfo": {"path": {"cloudspace_id": STR}, "query": {}},
    "deleteCloudspace": {"path": {"cloudspace_id": STR}, "query": {"permanently": q(BOOL), "reason": q(STR)}},
    "getCloudspaceNotes": {"path": {"cloudspace_id": STR}, "query": {}},
    "createCloudspaceNote": {
        "path": {"cloudspace_id": STR},
        "query": {},
        "body": body({"title": STR, "content": STR}, required=("content", "title")),
    },
    "updateCloudspaceNote": {
        "path": {"cloudspace_id": STR, "note_id": STR},
        "query": {},
        "body": body({"title": STR, "content": STR}, required=("content", "title")),
    },
    "deleteCloudspaceNote": {"path": {"cloudspace_id": STR, "note_id": STR}, "query": {}},
    "listCloudspaceVirtualMachines": {
        "path": {"cloudspace_id": STR},
        "query": {
            "include_deleted": q(BOOL),
            "only_deleted": q(BOOL),
            "include_connected": q(BOOL),
            "exclude_internal": q(BOOL),
        },
    },
    "createVirtualMachine": {
        "path": {"cloudspace_id": STR},
        "query": {
            "name": q(STR, required=True),
            "hostname": q(STR),
            "description": q(STR, required=True),
            "data_disks": q(ARRAY),
            "vcpus": q(INT, required=True),
            "memory": q(INT, required=True),
            "private_ip": q(STR),
            "user_data": q(STR),
            "start_vm": q(BOOL),
            "tpm_secret": q(STR),
            "image_id": q(INT),
            "disk_size": q(INT),
            "cdrom_id": q(INT),
            "boot_disk_id": q(INT),
            "os_type": q(STR, enum=("Linux", "Windows", "Unix", "BSD", "Darwin", "Other")),
            "os_name": q(STR),
            "enable_vm_agent": q(BOOL),
            "snapshot_id": q(STR),
            "all_vm_disks": q(BOOL),
            "acronis": q(BOOL),
            "veeam": q(BOOL),
            "boot_type": q(STR, enum=("bios", "uefi", "uefi-secure-boot")),
        },
        "body": body(
            {"userdata": OBJECT, "UserDataParameters": OBJECT, "gpu_id": STR, "vgpu_name": STR},
            optional=True,
        ),
    },
    "getVirtualMachineInfo": {"path": {"cloudspace_id": STR, "vm_id": INT}, "query": {}},
    "readFile": {
        "path": {"cloudspace_id": STR, "vm_id": INT},
        "query": {
            "size": q(INT, required=True, minimum=0),
            "seek": q(INT, minimum=0),
            "filepath": q(STR, required=True),
        },
    },
    "deleteVirtualMachine": {
        "path": {"cloudspace_id": STR, "vm_id": INT},
        "query": {"permanently": q(BOOL), "detach_disks": q(BOOL), "detach_gpu": q(BOOL)},
    },
    "listExternalNetworks": {"path": {"location": STR}, "query": {}},
    "getExternalNetwork": {"path": {"location": STR, "external_network_id": INT}, "query": {}},
    "getExternalNetworkAddresses": {"path": {"location": STR, "external_network_id": INT}, "query": {}},
    "listExternalNetworksVirtualMachine": {"path": {"cloudspace_id": STR, "vm_id": INT}, "query": {}},
    "getExternalNetworksVirtualMachine": {
        "path": {"cloudspace_id": STR, "vm_id": INT, "external_ip_address": STR},
        "query": {},
    },
    "attachExternalNetworksVirtualMachine": {
        "path": {"cloudspace_id": STR, "vm_id": INT},
        "query": {
            "external_network_id": q(INT, required=True),
            "external_network_ip": q(STR),
            "model": q(STR, enum=("ne2k_pci", "i82551", "i82557b", "i82559er", "rtl8139", "e1000", "pcnet", "virtio")),
            "external_network_type": q(STR, enum=("external", "cloudspace")),
            "external_cloudspace_id": q(STR),
        },
    },
    "detachExternalNetworksVirtualMachine": {
        "path": {"cloudspace_id": STR, "vm_id": INT, "external_ip_address": STR},
        "query": {
            "external_network_id": q(INT, required=True),
            "external_network_type": q(STR, required=True, enum=("external", "cloudspace")),
            "external_cloudspace_id": q(STR),
        },
    },
}
