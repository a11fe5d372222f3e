"""The platform's operations, by resource family: :func:`operations` lists every handler a family module marks
with ``http.op`` (a new family module goes into ``FAMILIES``)."""

from __future__ import annotations

from ..http import Handler, Served
from . import billing, cloudspaces, gpus, images, networks, notes, vms

FAMILIES = (billing, images, cloudspaces, gpus, networks, notes, vms)

#: (method, path, operationId, mutating, handler) of one operation
Operation = tuple[str, str, str, bool, Handler]


def operations() -> list[Operation]:
    """``[(method, path, operationId, mutating, handler)]`` of every family, in the order they are written."""
    found: list[Operation] = []
    for module in FAMILIES:
        for value in vars(module).values():
            if isinstance(value, Served) and value.handler.__module__ == module.__name__:
                found.append((value.method, value.path, value.operation_id, value.mutating, value.handler))
    return found
