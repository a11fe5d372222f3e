# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How one declared operation of the platform is called, for ``client.WhiteskyClient`` (pure Python, no Ansible).

:class:`Caller` holds the :class:`~transport.Transport` that sends (``transport``: its retry loop, its deadlines, its
governor) and calls an operation of ``api.OPERATIONS`` by its operationId: the path made from the table, its
parameters checked against it, a write fenced by the cluster leases this run holds, the VM lock's retry added to a
write on a VM's path (``vmlock``), and a 404 in a location the customer does not have said as such; a listing is
paged (``paging``) or unwrapped (``answers``).  The endpoint methods are the client's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

from ansible_collections.whitesky.capvco.plugins.module_utils.platform import answers, paging
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.api import OPERATIONS
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import check_id
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    InputError,
    WhiteskyError,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.transport import Transport
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.vmlock import vm_locked

__all__ = ["OPERATIONS", "Caller", "no_such_location"]

#: The writes of the lease itself (its note, renewed and taken back): never fenced by the lease they keep.
_LEASE_OPERATIONS = frozenset({"createCloudspaceNote", "updateCloudspaceNote", "deleteCloudspaceNote"})


def no_such_location(location: str, customer_id: str, names: list[str]) -> InputError:
    """The error of a location the customer does not have, naming those it has."""
    return InputError(
        "location %r does not exist for customer %r; its locations: %s"
        % (location, customer_id, ", ".join(names) or "none")
    )


class Caller:
    """The declared operations of one customer (``customer_id``, every path is under it), sent by ``transport``.

    ``leases``: the cluster leases the run holds (``lease.held``), each asked to fence a write before it is sent.
    """

    def __init__(self, transport: Transport, customer_id: str) -> None:
        self.transport = transport
        self.customer_id = str(customer_id)
        self.leases: dict[tuple[str, str], Any] = {}

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

    def get_vm(self, cloudspace_id: str, vm_id: int) -> Any:
        """A VM's info (``getVirtualMachineInfo``), checked (``answers``: a ``VM info``); the VM lock's policy reads
        it before a write on the VM is sent again (``vmlock``)."""
        operation = "getVirtualMachineInfo"
        return answers.record(self.call(operation, cloudspace_id=cloudspace_id, vm_id=vm_id), "VM info", operation)

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
