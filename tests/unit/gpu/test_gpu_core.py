"""GPU core logic that needs no server: type resolution, allocation, per-machine plans."""

from __future__ import annotations

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import profiles as gpu_profiles
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.errors import InsufficientCapacity
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError

PROFILES = [
    {"id": "a100-40", "vendor": "NVIDIA", "model": "A100", "available_instances": 2, "description": ""},
    {"id": "a100-20", "vendor": "NVIDIA", "model": "A100", "available_instances": 3, "description": ""},
    {"id": "l4", "vendor": "NVIDIA", "model": "L4", "available_instances": 9, "description": ""},
]


def test_type_is_matched_without_case_or_spacing():
    assert [p["id"] for p in gpu_profiles.profiles_of_type(PROFILES, "  nvidia   a100 ", "loc")] == [
        "a100-40",
        "a100-20",
    ]


def test_unknown_type_lists_what_is_offered():
    with pytest.raises(InputError) as err:
        gpu_profiles.profiles_of_type(PROFILES, "AMD MI300", "loc")
    assert "'AMD MI300'" in str(err.value) and "NVIDIA A100, NVIDIA L4" in str(err.value)


def test_allocation_picks_a_profile_with_enough_and_fails_before_reserving():
    a100 = gpu_profiles.profiles_of_type(PROFILES, "NVIDIA A100", "loc")
    assert gpu_profiles.allocate(a100, {"m0": 3}, "NVIDIA A100") == {"m0": "a100-20"}
    assert gpu_profiles.allocate(a100, {"m0": 2, "m1": 2}, "NVIDIA A100") == {"m0": "a100-20", "m1": "a100-40"}
    with pytest.raises(InsufficientCapacity) as err:  # not InputError: capacity may free up, a retry can help
        gpu_profiles.allocate(a100, {"m0": 4}, "NVIDIA A100")
    assert "need 4 more" in str(err.value) and "a100-40: 2" in str(err.value) and "a100-20: 3" in str(err.value)


def item(slot, gpu_id="a100-40", vm=7, status="ATTACHED", machine="m0"):
    name = naming.encode("c", machine, slot, created=1)
    return {
        "vgpu_id": "v%d%s" % (slot, status),
        "vgpu_name": name,
        "gpu_id": gpu_id,
        "status": status,
        "virtual_machine": {"id": vm} if vm else None,
        "owner": naming.decode(name),
    }


def test_plan_reserves_missing_fixes_detached_and_releases_extra_and_duplicates():
    items = [
        item(0),
        item(1, vm=None, status="RESERVED"),
        item(1, status="DELETED", vm=None),
        item(3),
        item(2, gpu_id="l4"),
    ]
    plan = vgpus.plan_machine(items, 7, 3, {"a100-40", "a100-20"}, present=True)
    assert plan.missing == [2]
    assert [i["vgpu_id"] for i in plan.fixes] == ["v1RESERVED"]
    assert sorted(i["vgpu_id"] for i in plan.releases) == ["v1DELETED", "v2ATTACHED", "v3ATTACHED"]


def test_plan_absent_releases_everything():
    items = [item(0), item(1, vm=None)]
    assert vgpus.plan_machine(items, 7, 0, set(), present=False).releases == items


def test_a_capacity_message_repeats_a_profile_id_only_in_the_form_of_one():
    """A hostile answer's profile id (any text, a credential) is never repeated to a person: the capacity message
    shows an id as it is only in the form of one, else a digest of it."""
    from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import profiles as gpu_profiles
    from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.errors import InsufficientCapacity

    hostile = [
        {"id": "nvidia-a100-40c", "vendor": "NVIDIA", "model": "A100", "available_instances": 1},
        {"id": "Zq8wPLANTEDk3Vx", "vendor": "NVIDIA", "model": "A100", "available_instances": 0},
        {"id": "{{ lookup('pipe', 'id') }}", "vendor": "NVIDIA", "model": "A100", "available_instances": 0},
    ]
    with pytest.raises(InsufficientCapacity) as caught:
        gpu_profiles.allocate(hostile, {"m0": 2}, "NVIDIA A100")
    message = str(caught.value)
    assert "available: nvidia-a100-40c: 1, profile #" in message
    assert "Zq8wPLANTEDk3Vx" not in message and "lookup" not in message
