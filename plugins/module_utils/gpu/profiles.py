# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU types and profiles: a type matched against a location's profiles, and the allocation of profiles to
machines (pure Python, but for ``profile_info``, the core of ``gpu_profile_info``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.errors import InsufficientCapacity
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError

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
    """Core of ``gpu_profile_info``: a location's per-card profiles, optionally of one type."""
    profiles = client.gpu_profiles(location)
    if gpu_type:
        profiles = [p for p in profiles if profile_type(p) == normalise_type(gpu_type)]
    out = [dict(p, type=display_type(p)) for p in profiles]
    return {"profiles": out, "types": sorted({p["type"] for p in out})}


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


#: A profile id as the platform names its profiles (``nvidia-a100-40c``): what a message repeats as it is.
_SHOWN_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def shown_id(profile: Profile) -> str:
    """A profile's id for a message: as it is when it has the form of one; otherwise a digest of it, so that a hostile
    answer's id (any text, a credential) is never repeated to a person."""
    pid = profile.get("id")
    if isinstance(pid, str) and _SHOWN_ID.fullmatch(pid):
        return pid
    return "profile #%s" % hashlib.sha256(str(pid).encode()).hexdigest()[:8]


def allocate(profiles: Sequence[Profile], needs: Mapping[str, int], gpu_type: str) -> dict[str, str]:
    """Pick one profile per machine with enough instances for all its missing slots.

    ``needs`` is ``{machine: slots to reserve}``.  Fails before anything is
    reserved when the location cannot hold them all.
    """
    left = {p["id"]: int(p.get("available_instances") or 0) for p in profiles}
    chosen: dict[str, str] = {}
    for machine, need in sorted(needs.items(), key=lambda kv: -kv[1]):
        if need <= 0:
            continue
        best = max(left, key=lambda pid: left[pid])
        if left[best] < need:
            total = sum(needs.values())
            available = ", ".join("%s: %d" % (shown_id(p), p.get("available_instances") or 0) for p in profiles)
            raise InsufficientCapacity(
                "not enough %s: need %d more vGPU(s) (%d for machine %r in one profile), "
                "available: %s" % (gpu_type, total, need, machine, available)
            )
        left[best] -= need
        chosen[machine] = best
    return chosen
