"""The platform's operations, by resource family; importing this package registers them all (``http.OPS``)."""

from . import billing, cloudspaces, gpus, networks, notes, vms  # noqa: F401 (registration)
