# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The platform's operations that this project knows: the one table of their methods and path templates.

Pure data, importing nothing of the collection (the emulator reads it as a file when the collection is not on its
path).  Each operation is written once, exactly as the platform's Swagger spec has it: its method, its path
template under ``/api/1`` (path parameters named as in the spec), and the query parameter and body field names
that may be sent with it.  ``client.WhiteskyClient.call`` sends by it, the emulator
(``emulator/whitesky_emulator/http.py``'s ``op``) serves its routes by it, and ``tests/unit/suites/test_contract.py``
checks every entry against the spec.  The emulator serves a few operations that the client never calls
(``reserveVGPU``, ``getExternalNetwork``).
"""

from __future__ import annotations

from typing import NamedTuple


class Operation(NamedTuple):
    """One operation of the spec: what the client may send with it (a subset of what the spec allows)."""

    method: str
    path: str
    query: tuple[str, ...] = ()
    body: tuple[str, ...] = ()


C = "/customers/{customer_id}"
CS = C + "/cloudspaces/{cloudspace_id}"
VM = CS + "/vms/{vm_id}"
LOC = C + "/locations/{location}"

#: operationId -> Operation(method, path template, query parameter names, body field names)
OPERATIONS: dict[str, Operation] = {
    # locations, their images, GPUs, vGPUs
    "listCustomerLocations": Operation("GET", C + "/locations"),
    "listCustomerImages": Operation("GET", LOC + "/vm-images"),
    "listAvailableGPUProfiles": Operation("GET", LOC + "/gpus"),
    "reserveVGPU": Operation("POST", LOC + "/gpus/{gpu_id}", body=("vgpu_name",)),
    "listCustomerVGPUS": Operation("GET", LOC + "/vgpus", ("limit", "start_after", "include_deleted")),
    "restoreVGPU": Operation("POST", LOC + "/vgpus/{vgpu_id}"),
    "deleteVGPU": Operation("DELETE", LOC + "/vgpus/{vgpu_id}", ("detach", "permanently")),
    "reserveAndAttachVGPUToVM": Operation("POST", VM + "/gpus/{gpu_id}", body=("vgpu_name",)),
    "attachVGPUToVM": Operation("POST", VM + "/vgpus/{vgpu_id}"),
    "detachVGPUFromVM": Operation("DELETE", VM + "/vgpus/{vgpu_id}"),
    "getCustomerConsumption": Operation("GET", LOC + "/consumption", ("start", "end")),
    "getCustomerLocationPricing": Operation("GET", LOC + "/prices"),
    # cloudspaces and their notes
    "listCloudspaces": Operation("GET", C + "/cloudspaces", ("include_deleted",)),
    "createCloudspace": Operation("POST", C + "/cloudspaces", body=("name", "location", "private_network", "firewall")),
    "getCloudspaceInfo": Operation("GET", CS),
    "deleteCloudspace": Operation("DELETE", CS, ("permanently",)),
    "getCloudspaceNotes": Operation("GET", CS + "/notes"),
    "createCloudspaceNote": Operation("POST", CS + "/notes", body=("title", "content")),
    "updateCloudspaceNote": Operation("PUT", CS + "/notes/{note_id}", body=("title", "content")),
    "deleteCloudspaceNote": Operation("DELETE", CS + "/notes/{note_id}"),
    # VMs
    "listCloudspaceVirtualMachines": Operation("GET", CS + "/vms", ("include_deleted",)),
    "createVirtualMachine": Operation(
        "POST", CS + "/vms", ("name", "description", "vcpus", "memory", "image_id", "disk_size", "user_data")
    ),
    "getVirtualMachineInfo": Operation("GET", VM),
    "readFile": Operation("GET", VM + "/file", ("filepath", "size", "seek")),
    "deleteVirtualMachine": Operation("DELETE", VM, ("permanently", "detach_gpu")),
    # external networks and a VM's NICs on them
    "listExternalNetworks": Operation("GET", LOC + "/external-networks"),
    "getExternalNetwork": Operation("GET", LOC + "/external-networks/{external_network_id}"),
    "getExternalNetworkAddresses": Operation("GET", LOC + "/external-networks/{external_network_id}/ip-addresses"),
    "listExternalNetworksVirtualMachine": Operation("GET", VM + "/external-nics"),
    "getExternalNetworksVirtualMachine": Operation("GET", VM + "/external-nics/{external_ip_address}"),
    "attachExternalNetworksVirtualMachine": Operation(
        "POST", VM + "/external-nics", ("external_network_id", "external_network_ip", "model", "external_network_type")
    ),
    "detachExternalNetworksVirtualMachine": Operation(
        "DELETE", VM + "/external-nics/{external_ip_address}", ("external_network_id", "external_network_type")
    ),
}


#: The two classes of request that the platform's rate limit counts apart (one token bucket each, per credential):
#: reads (GET) and mutating calls (every other method).  The client's governor and the emulator both ask here.
READ = "read"
MUTATING = "mutating"


def request_class(method: str) -> str:
    """The class of a request of this HTTP method: :data:`READ` or :data:`MUTATING`."""
    return READ if method.upper() == "GET" else MUTATING
