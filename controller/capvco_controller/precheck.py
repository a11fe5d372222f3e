"""Whether a machine of a spec would come up in a location, checked before its VM is made, as the core checks it:
its size and image (``machines.machine.need_size``, ``machines.catalog.check_images``: an image the location lacks
is refused, naming the images there) and its vGPUs (``gpu.profiles.type_profiles``, then ``gpu.profiles.allocate``,
the reservation's own allocation: an unknown type or profile is refused, too few free instances of one profile is
:class:`InsufficientCapacity`).

A VCOMachine runs :func:`machine_config` and :func:`gpus_now` before it creates its VM (no VM is made, and billed,
for a machine whose image is missing or whose vGPUs cannot be had now); a VCOMachineTemplate publishes its capacity
only when :func:`machine_config` passes and :func:`availability` says its vGPUs can be had, so that the cluster
autoscaler never scales a pool up into machines that fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import profiles as gpu_profiles
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.errors import InsufficientCapacity
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.catalog import require_images
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.machine import need_size
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

#: ``availability``'s reasons (a template's ``GPUsAvailable`` condition).
AVAILABLE, TYPE_NOT_OFFERED, PROFILE_NOT_OFFERED, INSUFFICIENT = (
    "Available",
    "GPUTypeNotOffered",
    "GPUProfileNotOffered",
    "InsufficientGPUs",
)


def gpu_of(spec: Mapping[str, Any]) -> tuple[str, int, str | None]:
    """``(type, count, profile)`` of a machine spec's GPUs; ``("", 0, None)`` without."""
    gpu = spec.get("gpu")
    if not isinstance(gpu, dict) or not gpu.get("type"):
        return "", 0, None
    return str(gpu["type"]), int(gpu.get("count") or 1), str(gpu["profile"]) if gpu.get("profile") else None


def machine_config(client: WhiteskyClient, location: str, spec: Mapping[str, Any], name: str) -> None:
    """Refuse (:class:`InputError`, the core's messages) a machine spec without vcpus, memory or an image, or with
    an image ``location`` does not have (one read of its images)."""
    image = spec.get("image")
    need_size(Pool(None, (name,), spec.get("vcpus"), spec.get("memory"), image), [name])
    if isinstance(image, int):  # need_size refused any other
        require_images(client, location, {image: [name]})


def gpus_now(client: WhiteskyClient, location: str, spec: Mapping[str, Any], name: str) -> None:
    """Refuse a GPU type or profile ``location`` does not offer (:class:`InputError`), and too few free instances
    of one profile for the machine's vGPUs now (:class:`InsufficientCapacity`): one read of its profiles, and the
    allocation the reservation makes (a machine's vGPUs all come from one profile)."""
    gpu_type, count, profile = gpu_of(spec)
    if count:
        matching = gpu_profiles.type_profiles(client.gpu_profiles(location), gpu_type, location, profile)
        gpu_profiles.allocate(matching, {name: count}, gpu_type)


def availability(
    profiles: list[Any], gpu_type: str, count: int, location: str, profile: str | None = None, name: str = ""
) -> tuple[bool, str, str, int]:
    """``(ok, reason, message, free instances in the best profile)`` of ``count`` vGPUs of ``gpu_type`` for one
    machine (named ``name`` in the message) (pure): all of one machine's vGPUs come from one profile, as the
    reservation's allocation takes them (``profiles.allocate``), among those ``profile`` (``gpu.profile``) allows."""
    try:
        matching = gpu_profiles.profiles_of_type(profiles, gpu_type, location)
    except InputError as exc:
        return False, TYPE_NOT_OFFERED, str(exc), 0
    try:
        matching = gpu_profiles.choose(matching, profile, gpu_type, location)
    except InputError as exc:
        return False, PROFILE_NOT_OFFERED, str(exc), 0
    best = max(int(p.get("available_instances") or 0) for p in matching)
    try:
        gpu_profiles.allocate(matching, {name or "of this template": count}, gpu_type)
    except InsufficientCapacity as exc:
        return False, INSUFFICIENT, "%s in location %r, one machine needs %d" % (exc, location, count), best
    return (
        True,
        AVAILABLE,
        "%d free instance(s) of %s in location %r, %d per machine" % (best, gpu_type, location, count),
        best,
    )
