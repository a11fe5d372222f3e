"""The platform's operations, by resource family: :func:`operations` lists every handler a family module marks
with ``http.op`` (a new family module goes into ``FAMILIES``)."""

from __future__ import annotations

from . import billing, cloudspaces, gpus, networks, notes, vms

FAMILIES = (billing, cloudspaces, gpus, networks, notes, vms)


def operations():
    """``[(method, path, operationId, mutating, handler)]`` of every family, in the order they are written."""
    found = []
    for module in FAMILIES:
        for value in vars(module).values():
            mark = getattr(value, "operation", None)
            if mark is not None and getattr(value, "__module__", None) == module.__name__:
                found.append((*mark, value))
    return found
