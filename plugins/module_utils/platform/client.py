# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The whitesky.cloud API client: the platform's operations and their endpoints.

Pure Python, with no Ansible import, so that the modules, the node agent and the tests all share it.  The client
holds a ``transport.Transport`` (requests, with its retry loop and deadlines) rather than being one; listings are
paged by ``paging``, through the client's own :meth:`WhiteskyClient.call`; the VM lock's policy is ``vmlock``'s.
Every operation it calls is declared once, in ``api.OPERATIONS`` (method, path template, query names, body names)
exactly as the platform's Swagger spec has them: the one table that the emulator serves its routes from too, and
that ``tests/unit/test_contract.py`` checks against the spec.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

from ansible_collections.whitesky.capvco.plugins.module_utils.platform import answers, paging
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.api import OPERATIONS
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import (
    Connection,
    check_id,
    require,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    InputError,
    Resolved,
    WhiteskyError,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.transport import Transport
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.vmlock import vm_locked

__all__ = ["OPERATIONS", "WhiteskyClient", "no_such_location"]

#: The writes of the lease itself (its note, renewed and taken back): never fenced by the lease they keep.
_LEASE_OPERATIONS = frozenset({"createCloudspaceNote", "updateCloudspaceNote", "deleteCloudspaceNote"})


def _field(answer: Any, key: str, types: tuple[type, ...], operation: str) -> Any:
    """The field of the platform's answer, of ``types``, or a :class:`Resolved` answer as it is (the caller's hook
    made it)."""
    return answer if isinstance(answer, Resolved) else answers.field(answer, key, types, operation)


def no_such_location(location: str, customer_id: str, names: list[str]) -> InputError:
    """The error of a location the customer does not have, naming those it has."""
    return InputError(
        "location %r does not exist for customer %r; its locations: %s"
        % (location, customer_id, ", ".join(names) or "none")
    )


class _Held:
    """An attribute of a part the client holds, read (and set) through the client: ``_Held("transport.retry")`` on
    ``backoff`` makes ``client.backoff`` the transport's retry loop's ``backoff``; ``name`` when the part calls it
    otherwise."""

    def __init__(self, part: str, name: str | None = None) -> None:
        self.part = part.split(".")
        self.name = name or ""

    @classmethod
    def each(cls, part: str, count: int) -> tuple[_Held, ...]:
        """``count`` attributes of ``part``, each named as the client's attribute that it is."""
        return tuple(cls(part) for _each in range(count))

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = self.name or name

    def _holder(self, client: object) -> Any:
        for step in self.part:
            client = getattr(client, step)
        return client

    def __get__(self, client: object, owner: type | None = None) -> Any:
        return self if client is None else getattr(self._holder(client), self.name)

    def __set__(self, client: object, value: Any) -> None:
        setattr(self._holder(client), self.name, value)


class WhiteskyClient:
    """The platform's operations for one customer, over the :class:`Transport` it holds (``transport``).

    :param customer_id: the customer every path is under; the other parameters are :class:`Transport`'s.

    The transport's settings and counters read through the client as they are named there (``base_url``,
    ``warnings``, ``governor``; its deadlines' ``timeout`` and ``retry_budget``; its retry loop's ``max_attempts``,
    ``backoff``, ``max_backoff``, ``retries``, ``rate_limited`` and ``rate_waited``), and so do a call
    (:meth:`request`), an operation's deadline (:meth:`deadline`, :meth:`inherited_deadline`) and a wait
    (:meth:`wait_until`).

    A client lives as long as one run (one module call), and keeps what the run learns once: ``markers``, each VM's
    description as first read (``vms.describe``: a VM id is never reused, and only a hand edit changes a
    marker), and ``leases``, the cluster leases the run holds (``lease.held``).
    """

    # what the client reads and sets of the parts it holds, under the name it has there (``_Held``)
    base_url, warnings, governor, redact = _Held.each("transport", 4)
    timeout, retry_budget, wait_until = _Held.each("transport.deadlines", 3)
    deadline, inherited_deadline = _Held("transport.deadlines", "operation"), _Held("transport.deadlines", "inherited")
    request, max_attempts, backoff, max_backoff, retries, rate_limited, rate_waited = _Held.each("transport.retry", 7)

    def __init__(self, api_url: str, token: str, customer_id: str, **transport: Any) -> None:
        require(api_url=api_url, api_token=token, customer_id=customer_id)
        check_id("customer_id", customer_id)
        self.transport = Transport(api_url, token, **transport)
        self.customer_id = str(customer_id)
        self.markers: dict[tuple[str, int], Any] = {}
        self.leases: dict[tuple[str, str], Any] = {}

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
        return "WhiteskyClient(%r, customer_id=%r)" % (self.base_url, self.customer_id)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> WhiteskyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(
        self,
        operation: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        retry: bool | None = None,
        retry_if: Callable[[ApiError], bool] | None = None,
        resolve: Callable[[ApiError], Any] | None = None,
        object_hook: Callable[[dict], Any] | None = None,
        **path_params: Any,
    ) -> Any:
        """Call a declared operation by its operationId; path parameters are percent-encoded."""
        method, template, query_names, body_names = OPERATIONS[operation]
        unknown = set(query or ()) - set(query_names)
        unknown_body = set(body or ()) - set(body_names)
        if unknown or unknown_body:
            raise WhiteskyError("%s takes no parameter(s) %s" % (operation, sorted(unknown | unknown_body)))
        if "location" in path_params:
            check_id("location", path_params["location"])
        if method not in ("GET", "HEAD"):
            if self.leases and operation not in _LEASE_OPERATIONS:
                for held in list(self.leases.values()):
                    held.fence(operation)  # a run that cannot prove it holds its lease writes nothing
            if retry_if is None and "vm_id" in path_params:
                retry_if = vm_locked(self, path_params.get("cloudspace_id"), path_params["vm_id"])
        values = dict(path_params, customer_id=self.customer_id)
        path = template.format(**{k: quote(str(v), safe="") for k, v in values.items()})
        try:
            return self.transport.retry.request(
                method,
                path,
                params=query,
                body=body,
                retry=retry,
                retry_if=retry_if,
                resolve=resolve,
                object_hook=object_hook,
            )
        except ApiError as exc:
            if exc.status == 404 and "location" in path_params and operation != "listCustomerLocations":
                self._refuse_unknown_location(str(path_params["location"]))
            raise

    def locations(self) -> tuple[list[dict[str, Any]], str | None]:
        """The customer's locations (``listCustomerLocations``), each checked (``answers``: a ``location``, its
        name and its prices), and the currency of their prices (None when the answer names none)."""
        operation = "listCustomerLocations"
        answer = self.call(operation)
        found = answers.listed(answer, operation, "location", key="locations", most=answers.MOST_ITEMS)
        currency = answer.get("currency") if isinstance(answer, dict) else None
        # shown wherever a price is: a control character in it is escaped here (``scrub``)
        return found, scrub(currency) if isinstance(currency, str) and len(currency) <= 16 else None

    def location_names(self) -> list[str]:
        """The customer's locations, by name, sorted (``listCustomerLocations``)."""
        return sorted(str(i["location"]) for i in self.locations()[0])

    def _refuse_unknown_location(self, location: str) -> None:
        """A 404 of a call in ``location``: when the customer has no such location, say so and name those it has
        (the platform's answer says only "not found"); otherwise the 404 stands."""
        try:
            names = self.location_names()
        except WhiteskyError:
            return
        if location not in names:
            raise no_such_location(location, self.customer_id, names) from None

    def paginate(
        self,
        operation: str,
        query: dict[str, Any] | None = None,
        limit: int = paging.PAGE_LIMIT,
        parallel: int = 32,
        **path_params: Any,
    ) -> Iterator[Any]:
        """Every item of the paginated listing ``operation``, in order, each page asked for with :meth:`call`, up
        to ``parallel`` pages at a time, under the deadline of the operation the listing runs in (``paging``)."""
        return paging.paginate(
            self.call, self.transport.deadlines, operation, query=query, limit=limit, parallel=parallel, **path_params
        )

    def result(
        self,
        operation: str,
        query: dict[str, Any] | None = None,
        shape: str | None = None,
        most: int | None = None,
        **path_params: Any,
    ) -> list[Any]:
        """Call a list operation and unwrap its ``{"result": [...]}`` envelope; each item of ``shape`` (one of
        ``answers.SHAPES``) when one is given, and at most ``most`` items when that is given."""
        return answers.listed(self.call(operation, query=query, **path_params), operation, shape, most=most)

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

    def get_vm(self, cloudspace_id: str, vm_id: int) -> Any:
        operation = "getVirtualMachineInfo"
        return answers.record(self.call(operation, cloudspace_id=cloudspace_id, vm_id=vm_id), "VM info", operation)

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
