# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU types and profiles: a type matched against a location's profiles, the profile a pool asks for (``gpu.profile``:
``full``, a whole card, what a pool that names none gets; a profile id; or ``any`` of the type's, a partial card
included), and the allocation of profiles to machines (pure Python, but for ``profile_info``, the core of
``gpu_profile_info``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.errors import InsufficientCapacity
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

#: A GPU profile as the platform lists it (``listAvailableGPUProfiles``: id, vendor, model, available_instances).
Profile = Mapping[str, Any]


def normalise_type(text: object) -> str:
    """``"nvidia  a100"`` and ``"NVIDIA A100"`` are the same type."""
    return re.sub(r"\s+", " ", str(text or "")).strip().lower()


def profile_type(profile: Profile) -> str:
    """A profile's type, normalised (vendor and model)."""
    return normalise_type("%s %s" % (profile.get("vendor", ""), profile.get("model", "")))


def display_type(profile: Profile) -> str:
    """A profile's type as the platform writes it."""
    return "%s %s" % (profile.get("vendor", ""), profile.get("model", ""))


def profile_info(client: WhiteskyClient, *, location: str, gpu_type: str | None = None) -> dict[str, Any]:
    """Core of ``gpu_profile_info``: a location's per-card profiles, optionally of one type, and a line a person
    reads of each (scrubbed: the platform's id and description may carry anything)."""
    profiles = client.gpu_profiles(location)
    if gpu_type:
        profiles = [p for p in profiles if profile_type(p) == normalise_type(gpu_type)]
    out = [dict(p, type=display_type(p)) for p in profiles]
    lines = [
        scrub(
            "%s: %s (%s), %s available"
            % (p.get("id"), p["type"], p.get("description") or "", p.get("available_instances", 0))
        )
        for p in out
    ]
    return {"profiles": out, "types": sorted({p["type"] for p in out}), "lines": lines}


def profiles_of_type(profiles: Iterable[Profile], gpu_type: str, location: str) -> list[Profile]:
    """The profiles of ``gpu_type``; an unknown type names the types the location offers."""
    wanted = normalise_type(gpu_type)
    if not wanted:
        raise InputError("type is required with state=present, e.g. 'NVIDIA A100'")
    matching = [p for p in profiles if profile_type(p) == wanted]
    if not matching:
        offered = sorted({display_type(p) for p in profiles})
        raise InputError(
            "GPU type %r is not offered in location %r; it offers: %s"
            % (gpu_type, location, ", ".join(offered) or "no GPUs")
        )
    return matching


#: What ``gpu.profile`` takes beside a profile id: the type's profile with the most GPU memory, a whole card (what a
#: pool that names no profile gets) ...
FULL = "full"
#: ... or any of the type's profiles, whichever has room, a partial card included (only when asked for by name).
ANY = "any"


def effective(choice: object) -> str:
    """The profile a pool asks for: its ``gpu.profile`` as given, or :data:`FULL` when it names none (whole cards;
    a partial card only by its id or :data:`ANY`)."""
    text = str(choice).strip() if choice is not None else ""
    return text or FULL


#: A profile's GPU memory in GB, from the NVIDIA vGPU type that ends its id (``nvidia-a100-40c``) or that its
#: description names (``(A100-40C)``): the number before the series letter (A, B, C or Q).
_ID_MEMORY = re.compile(r"-([0-9]{1,4})[abcq]\Z", re.I)
_DESCRIPTION_MEMORY = re.compile(r"\b[A-Za-z0-9]+-([0-9]{1,4})[ABCQ]\b")


def profile_memory(profile: Profile) -> int | None:
    """A profile's GPU memory in GB, as the NVIDIA vGPU type in its id or description says it (``A100-40C``: 40);
    None when neither names one.  The platform's profile has no memory field: this is the only place it is said."""
    for key, pattern in (("id", _ID_MEMORY), ("description", _DESCRIPTION_MEMORY)):
        text = profile.get(key)
        if isinstance(text, str):
            found = pattern.search(text[:256])
            if found:
                return int(found.group(1))
    return None


def _listed(profiles: Iterable[Profile]) -> str:
    """The profiles a message names: ``nvidia-a100-20c (20 GB), nvidia-a100-40c (40 GB)``, by id."""
    shown = []
    for p in sorted(profiles, key=shown_id):
        memory = profile_memory(p)
        shown.append("%s (%s)" % (shown_id(p), "%d GB" % memory if memory is not None else "GPU memory not known"))
    return ", ".join(shown) or "none"


def choose(profiles: Sequence[Profile], choice: str | None, gpu_type: str, location: str) -> list[Profile]:
    """The profiles of one type (``profiles``, as :func:`profiles_of_type` returns them) that a pool's vGPUs may
    come from (:func:`effective` of its ``choice``): with :data:`FULL`, what a pool without a choice gets, the
    one(s) with the most GPU memory (:func:`profile_memory`: a whole card); with :data:`ANY`, every one; otherwise
    the profile of that id (case aside).  A choice that fits none is refused, naming the type's profiles at the
    location, and ``full`` too when a profile's GPU memory is not known (which of them is a whole card cannot be
    told: name one by its id, or ``any``)."""
    wanted = effective(choice).lower()
    if wanted == ANY:
        return list(profiles)
    if wanted == FULL:
        sizes = [(profile_memory(p), p) for p in profiles]
        if any(size is None for size, _p in sizes):
            asked = "gpu.profile 'full'" if choice is not None and str(choice).strip() else "a pool without gpu.profile"
            raise InputError(
                "%s takes whole cards of %s in location %r, and which profile is a whole card cannot be told (the GPU "
                "memory of a profile is in neither its id nor its description); give one of its profiles by id, or "
                "%r for any of them: %s; nothing was changed" % (asked, gpu_type, location, ANY, _listed(profiles))
            )
        most = max(size for size, _p in sizes if size is not None)
        return [p for size, p in sizes if size == most]
    matching = [p for p in profiles if isinstance(p.get("id"), str) and p["id"].lower() == wanted]
    if not matching:
        raise InputError(
            "gpu.profile %r is not a profile of %s in location %r; its profiles: %s, %r (the one with the most GPU "
            "memory, a whole card: what a pool without gpu.profile gets) or %r (any of them); nothing was changed"
            % (choice, gpu_type, location, _listed(profiles), FULL, ANY)
        )
    return matching


def least_memory(profiles: Iterable[Profile]) -> int | None:
    """The GPU memory in GB that each vGPU of ``profiles`` has at least (:func:`profile_memory`), None when one's is
    not known."""
    sizes = [profile_memory(p) for p in profiles]
    if not sizes or any(size is None for size in sizes):
        return None
    return min(size for size in sizes if size is not None)


def type_profiles(
    profiles: Iterable[Profile], gpu_type: str, location: str, choice: str | None = None
) -> list[Profile]:
    """The profiles of ``gpu_type`` that ``choice`` (``gpu.profile``) allows (:func:`profiles_of_type`, then
    :func:`choose`): an unknown type names the location's types, an unknown profile the type's profiles."""
    return choose(profiles_of_type(profiles, gpu_type, location), choice, gpu_type, location)


#: A profile id as the platform names its profiles (``nvidia-a100-40c``): what a message repeats as it is.
_SHOWN_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def shown_id(profile: Profile) -> str:
    """A profile's id for a message: as it is when it has the form of one; otherwise a digest of it, so that a hostile
    answer's id (any text, a credential) is never repeated to a person."""
    pid = profile.get("id")
    if isinstance(pid, str) and _SHOWN_ID.fullmatch(pid):
        return pid
    return "profile #%s" % hashlib.sha256(str(pid).encode()).hexdigest()[:8]


def allocate(
    profiles: Sequence[Profile],
    needs: Mapping[str, int],
    gpu_type: str,
    allowed: Mapping[str, Collection[str]] | None = None,
) -> dict[str, str]:
    """Pick one profile per machine with enough instances for all its missing slots.

    ``needs`` is ``{machine: slots to reserve}``; ``allowed``, ``{machine: profile ids}``, the profiles a machine's
    pool asks for (``gpu.profile``: :func:`choose`; a machine not in it may take any of ``profiles``), and the
    machines with the fewest choices are served first.  Fails before anything is reserved when the location cannot
    hold them all.
    """
    left = {p["id"]: int(p.get("available_instances") or 0) for p in profiles}
    allowed = allowed or {}

    def choices(machine: str) -> list[str]:
        ids = allowed.get(machine)
        return [pid for pid in left if ids is None or pid in ids]

    chosen: dict[str, str] = {}
    for machine, need in sorted(needs.items(), key=lambda kv: (len(choices(kv[0])), -kv[1])):
        if need <= 0:
            continue
        mine = choices(machine)
        best = max(mine, key=lambda pid: left[pid]) if mine else None
        if best is None or left[best] < need:
            total = sum(needs.values())
            available = ", ".join(
                "%s: %d" % (shown_id(p), p.get("available_instances") or 0) for p in profiles if p["id"] in mine
            )
            raise InsufficientCapacity(
                "not enough %s: need %d more vGPU(s) (%d for machine %r in one profile), "
                "available: %s" % (gpu_type, total, need, machine, available)
            )
        left[best] -= need
        chosen[machine] = best
    return chosen
