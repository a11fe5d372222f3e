# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The whitesky.cloud API client: the platform's operations as the core calls them, one method each.

Pure Python, with no Ansible import, so that the modules, the node agent and the tests all share it.  How an
operation is called (its path from ``api.OPERATIONS``, the lease's fence, the VM lock, a location the customer does
not have; listings paged and unwrapped) is ``caller.Caller``'s, which the client is; the client holds a
``transport.Transport`` (``client.transport``: requests, their retry loop ``transport.retry``, their deadlines
``transport.deadlines``, the rate governor ``transport.governor``) rather than being one, and reads nothing of it
under another name.  Every operation it calls is declared once, in ``api.OPERATIONS`` (method, path template, query
names, body names) exactly as the platform's Swagger spec has them: the one table that the emulator serves its
routes from too, and that ``tests/unit/suites/test_contract.py`` checks against the spec.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.platform import answers
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.caller import Caller
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import (
    Connection,
    check_id,
    require,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import Resolved
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.transport import Transport

__all__ = ["WhiteskyClient"]


def _field(answer: Any, key: str, types: tuple[type, ...], operation: str) -> Any:
    """The field of the platform's answer, of ``types``, or a :class:`Resolved` answer as it is (the caller's hook
    made it)."""
    return answer if isinstance(answer, Resolved) else answers.field(answer, key, types, operation)


class WhiteskyClient(Caller):
    """The platform's operations for one customer, over the :class:`Transport` it holds (``transport``).

    :param customer_id: the customer every path is under; the other parameters are :class:`Transport`'s.

    What is the transport's is read where it is: its ``base_url``, ``warnings``, ``governor`` and :meth:`redact`
    (``client.transport``); its deadlines' ``timeout`` and ``retry_budget``, an operation's deadline
    (``operation``) and a wait (``wait_until``) (``client.transport.deadlines``); its retry loop's settings and
    counters (``max_attempts``, ``backoff``, ``max_backoff``, ``retries``, ``rate_limited``, ``rate_waited``) and a
    request (``client.transport.retry``).

    A client lives as long as one run (one module call), and keeps what the run learns once: ``markers``, each VM's
    description as first read (``vms.describe``: a VM id is never reused, and only a hand edit changes a
    marker), and ``leases``, the cluster leases the run holds (``lease.held``).
    """

    def __init__(self, api_url: str, token: str, customer_id: str, **transport: Any) -> None:
        require(api_url=api_url, api_token=token, customer_id=customer_id)
        check_id("customer_id", customer_id)
        super().__init__(Transport(api_url, token, **transport), customer_id)
        self.markers: dict[tuple[str, int], Any] = {}

    @classmethod
    def connect(cls, connection: Connection, **transport: Any) -> WhiteskyClient:
        """The client of a :class:`Connection` (its ``validate_certs`` and ``timeout`` too); ``transport``: more of
        :class:`Transport`'s parameters."""
        return cls(
            connection.api_url,
            connection.api_token,
            connection.customer_id,
            validate_certs=connection.validate_certs,
            timeout=connection.timeout,
            **transport,
        )

    def __repr__(self) -> str:
        return "WhiteskyClient(%r, customer_id=%r)" % (self.transport.base_url, self.customer_id)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> WhiteskyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- locations, their images, GPUs -------------------------------------
    def images(self, location: str) -> list[Any]:
        """The location's VM images (``listCustomerImages``: the public ones and the customer's own), each checked
        (``answers``: an ``image``), without their logos."""
        return self.result("listCustomerImages", shape="image", most=answers.MOST_ITEMS, location=location)

    def gpu_profiles(self, location: str) -> list[Any]:
        return self.result("listAvailableGPUProfiles", shape="GPU profile", location=location)

    #: The pages of a reservation listing asked for ahead: a location's listing (100,000 reservations in 200 pages)
    #: is read faster than it is decoded, and the pages that wait are held in memory.
    VGPU_PAGES_AHEAD = 16

    def vgpus(self, location: str, include_deleted: bool = False) -> Iterator[Any]:
        """The location's reservations, page by page, each one checked (``answers``: a ``reservation``)."""
        operation = "listCustomerVGPUS"
        query = {"include_deleted": include_deleted}
        for i, item in enumerate(
            self.paginate(operation, query=query, parallel=self.VGPU_PAGES_AHEAD, location=location)
        ):
            yield answers.record(item, "reservation", operation, "data[%d]" % i)

    # The mutating calls take the caller's hooks (``retry_if``, ``resolve``: see ``request``).
    def reserve_attach_vgpu(self, cloudspace_id: str, vm_id: int, gpu_id: str, vgpu_name: str, **hooks: Any) -> Any:
        answer = self.call(
            "reserveAndAttachVGPUToVM",
            body={"vgpu_name": vgpu_name},
            cloudspace_id=cloudspace_id,
            vm_id=vm_id,
            gpu_id=gpu_id,
            **hooks,
        )
        return _field(answer, "vgpu_id", (str,), "reserveAndAttachVGPUToVM")

    def attach_vgpu(self, cloudspace_id: str, vm_id: int, vgpu_id: str, **hooks: Any) -> Any:
        return self.call("attachVGPUToVM", cloudspace_id=cloudspace_id, vm_id=vm_id, vgpu_id=vgpu_id, **hooks)

    def detach_vgpu(self, cloudspace_id: str, vm_id: int, vgpu_id: str, **hooks: Any) -> Any:
        return self.call("detachVGPUFromVM", cloudspace_id=cloudspace_id, vm_id=vm_id, vgpu_id=vgpu_id, **hooks)

    def restore_vgpu(self, location: str, vgpu_id: str, **hooks: Any) -> Any:
        return self.call("restoreVGPU", location=location, vgpu_id=vgpu_id, **hooks)

    def delete_vgpu(
        self, location: str, vgpu_id: str, detach: bool = True, permanently: bool = True, **hooks: Any
    ) -> Any:
        return self.call(
            "deleteVGPU",
            query={"detach": detach, "permanently": permanently},
            location=location,
            vgpu_id=vgpu_id,
            **hooks,
        )

    def consumption(
        self, location: str, start: float, end: float, object_hook: Callable[[dict], Any] | None = None
    ) -> Any:
        """The location's consumption report, each object of it through ``object_hook`` when one is given (a
        report over 100,000 reservations parsed into what the caller reads: ``billing.compact``)."""
        return self.call(
            "getCustomerConsumption",
            query={"start": int(start), "end": int(end)},
            location=location,
            object_hook=object_hook,
        )

    def prices(self, location: str) -> Any:
        return self.call("getCustomerLocationPricing", location=location)

    # -- cloudspaces, VMs --------------------------------------------------
    def cloudspaces(self) -> list[Any]:
        return self.result("listCloudspaces", shape="cloudspace")

    def create_cloudspace(self, name: str, location: str, private_network: str | None = None, **hooks: Any) -> Any:
        body = {"name": name, "location": location, "firewall": {"private": False}}
        if private_network:
            body["private_network"] = private_network
        return _field(self.call("createCloudspace", body=body, **hooks), "cloudspace_id", (str,), "createCloudspace")

    def get_cloudspace(self, cloudspace_id: str) -> Any:
        return self.call("getCloudspaceInfo", cloudspace_id=cloudspace_id)

    def delete_cloudspace(self, cloudspace_id: str, permanently: bool = True) -> Any:
        return self.call("deleteCloudspace", query={"permanently": permanently}, cloudspace_id=cloudspace_id)

    def cloudspace_notes(self, cloudspace_id: str) -> list[Any]:
        """The cloudspace's notes (``id``, ``title``, ``content``, ``creation_time``, ...), oldest first."""
        return self.result("getCloudspaceNotes", shape="note", cloudspace_id=cloudspace_id)

    def create_cloudspace_note(self, cloudspace_id: str, title: str, content: str, **hooks: Any) -> Any:
        """Add a note; the platform answers ``{"success": true}`` without the note's id (list to find it)."""
        return self.call(
            "createCloudspaceNote", body={"title": title, "content": content}, cloudspace_id=cloudspace_id, **hooks
        )

    def update_cloudspace_note(self, cloudspace_id: str, note_id: str, title: str, content: str, **hooks: Any) -> Any:
        return self.call(
            "updateCloudspaceNote",
            body={"title": title, "content": content},
            cloudspace_id=cloudspace_id,
            note_id=note_id,
            **hooks,
        )

    def delete_cloudspace_note(self, cloudspace_id: str, note_id: str, **hooks: Any) -> Any:
        return self.call("deleteCloudspaceNote", cloudspace_id=cloudspace_id, note_id=note_id, **hooks)

    def vms(self, cloudspace_id: str) -> list[Any]:
        return self.result("listCloudspaceVirtualMachines", shape="VM", cloudspace_id=cloudspace_id)

    def read_file(self, cloudspace_id: str, vm_id: int, filepath: str, size: int = 65536) -> str:
        """A file of the VM's guest, through its agent (``readFile``): its text, at most ``size`` bytes."""
        got = self.call(
            "readFile", query={"filepath": filepath, "size": size}, cloudspace_id=cloudspace_id, vm_id=vm_id
        )
        if got is None or isinstance(got, dict) and got.get("result") is None:
            return ""
        text: str = answers.field(got, "result", (str,), "readFile")
        return text

    def create_vm(
        self,
        cloudspace_id: str,
        name: str,
        description: str,
        vcpus: int,
        memory: int,
        image_id: int | None = None,
        disk_size: int | None = None,
        user_data: str | None = None,
        **hooks: Any,
    ) -> Any:
        query = {
            "name": name,
            "description": description,
            "vcpus": vcpus,
            "memory": memory,
            "image_id": image_id,
            "disk_size": disk_size,
            "user_data": user_data,
        }
        answer = self.call("createVirtualMachine", query=query, cloudspace_id=cloudspace_id, **hooks)
        return _field(answer, "vm_id", (int,), "createVirtualMachine")

    def delete_vm(
        self, cloudspace_id: str, vm_id: int, permanently: bool = True, detach_gpu: bool = False, **hooks: Any
    ) -> Any:
        return self.call(
            "deleteVirtualMachine",
            query={"permanently": permanently, "detach_gpu": detach_gpu},
            cloudspace_id=cloudspace_id,
            vm_id=vm_id,
            **hooks,
        )

    # -- external networks and NICs ---------------------------------------
    def external_networks(self, location: str) -> list[Any]:
        return self.result("listExternalNetworks", location=location)

    def free_addresses(self, location: str, external_network_id: int) -> list[str]:
        """The addresses of an external network that the platform would give out now."""
        answer = self.call("getExternalNetworkAddresses", location=location, external_network_id=external_network_id)
        return list((answer or {}).get("ip_addresses") or [])

    def nics(self, cloudspace_id: str, vm_id: int) -> list[Any]:
        return self.result("listExternalNetworksVirtualMachine", cloudspace_id=cloudspace_id, vm_id=vm_id)

    def nic(self, cloudspace_id: str, vm_id: int, ip_address: str) -> Any:
        """The VM's NIC at an address (a 404 when it has none there)."""
        return self.call(
            "getExternalNetworksVirtualMachine",
            cloudspace_id=cloudspace_id,
            vm_id=vm_id,
            external_ip_address=ip_address,
        )

    def attach_nic(
        self,
        cloudspace_id: str,
        vm_id: int,
        external_network_id: int,
        model: str | None = None,
        ip_address: str | None = None,
        **hooks: Any,
    ) -> Any:
        query = {
            "external_network_id": external_network_id,
            "model": model,
            "external_network_ip": ip_address,
            "external_network_type": "external",
        }
        return self.call(
            "attachExternalNetworksVirtualMachine", query=query, cloudspace_id=cloudspace_id, vm_id=vm_id, **hooks
        )

    def detach_nic(
        self, cloudspace_id: str, vm_id: int, ip_address: str, external_network_id: int, **hooks: Any
    ) -> Any:
        return self.call(
            "detachExternalNetworksVirtualMachine",
            query={"external_network_id": external_network_id, "external_network_type": "external"},
            cloudspace_id=cloudspace_id,
            vm_id=vm_id,
            external_ip_address=ip_address,
            **hooks,
        )
