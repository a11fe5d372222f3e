"""``gpu.profile`` (issue 39): a pool asks for a whole card (``full``) or a profile by id instead of any profile of its
type; the resolver's choice, its refusals (naming the type's profiles at the location), the one allocation that
honours it, and the plan and its summary line showing the profile chosen."""

from __future__ import annotations

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import plan as cluster_plan
from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import summary
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import profiles
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.errors import InsufficientCapacity
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import speccheck
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import Inventory

LOC = "be-gen-1"
#: the emulator's be-gen-1: a whole A100 (40 GB), a half one (more of them), an L4
OFFERED = [
    {"id": "nvidia-a100-40c", "vendor": "NVIDIA", "model": "A100", "available_instances": 6,
     "description": "NVIDIA A100 40GB, full card (A100-40C)"},
    {"id": "nvidia-a100-20c", "vendor": "NVIDIA", "model": "A100", "available_instances": 8,
     "description": "NVIDIA A100, half card (A100-20C)"},
    {"id": "nvidia-l4-24q", "vendor": "NVIDIA", "model": "L4", "available_instances": 4, "description": "L4-24Q"},
]  # fmt: skip
A100 = OFFERED[:2]


def ids(found):
    return [p["id"] for p in found]


def test_a_profiles_gpu_memory_is_the_nvidia_vgpu_type_in_its_id_or_description():
    assert [profiles.profile_memory(p) for p in OFFERED] == [40, 20, 24]
    assert profiles.profile_memory({"id": "p-7", "description": "a whole H100 (H100-80C)"}) == 80
    assert profiles.profile_memory({"id": "gpu-1", "description": "a GPU"}) is None
    assert profiles.profile_memory({"id": 7, "description": None}) is None  # a hostile answer: no memory, no crash


def test_no_choice_is_the_whole_card_full_too_any_every_profile_of_the_type_an_id_that_one():
    """Issue 46, point 15: a pool without gpu.profile gets whole cards; a partial card only by its id or any."""
    assert ids(profiles.choose(A100, None, "NVIDIA A100", LOC)) == ["nvidia-a100-40c"]
    assert ids(profiles.choose(A100, "", "NVIDIA A100", LOC)) == ["nvidia-a100-40c"]
    assert ids(profiles.choose(A100, "any", "NVIDIA A100", LOC)) == ["nvidia-a100-40c", "nvidia-a100-20c"]
    assert ids(profiles.choose(A100, " ANY ", "NVIDIA A100", LOC)) == ["nvidia-a100-40c", "nvidia-a100-20c"]
    assert profiles.effective(None) == profiles.effective(" ") == "full" and profiles.effective("any") == "any"
    assert profiles.least_memory(A100) == 20 and profiles.least_memory(A100[:1]) == 40
    assert ids(profiles.choose(A100, "full", "NVIDIA A100", LOC)) == ["nvidia-a100-40c"]
    assert ids(profiles.choose(A100, " FULL ", "NVIDIA A100", LOC)) == ["nvidia-a100-40c"]
    assert ids(profiles.choose(A100, "nvidia-a100-20c", "NVIDIA A100", LOC)) == ["nvidia-a100-20c"]
    assert ids(profiles.choose(A100, "NVIDIA-A100-20C", "NVIDIA A100", LOC)) == ["nvidia-a100-20c"]
    assert ids(profiles.type_profiles(OFFERED, "nvidia  a100", LOC, "full")) == ["nvidia-a100-40c"]


def test_a_profile_the_type_does_not_have_is_refused_naming_the_valid_ones_there():
    with pytest.raises(InputError) as err:
        profiles.type_profiles(OFFERED, "NVIDIA A100", LOC, "nvidia-l4-24q")  # a profile of another type
    assert str(err.value) == (
        "gpu.profile 'nvidia-l4-24q' is not a profile of NVIDIA A100 in location 'be-gen-1'; its profiles: "
        "nvidia-a100-20c (20 GB), nvidia-a100-40c (40 GB), 'full' (the one with the most GPU memory, a whole "
        "card: what a pool without gpu.profile gets) or 'any' (any of them); nothing was changed"
    )
    with pytest.raises(InputError, match="GPU type 'NVIDIA Z9' is not offered in location 'be-gen-1'"):
        profiles.type_profiles(OFFERED, "NVIDIA Z9", LOC, "full")  # the type first


def test_full_is_refused_when_a_profiles_memory_cannot_be_told():
    unknown = A100 + [{"id": "a100-mystery", "vendor": "NVIDIA", "model": "A100", "description": "?"}]
    with pytest.raises(InputError) as err:
        profiles.choose(unknown, "full", "NVIDIA A100", LOC)
    msg = str(err.value)
    assert (
        "gpu.profile 'full' takes whole cards of NVIDIA A100 in location 'be-gen-1', and which profile is a whole card "
        "cannot be told" in msg
    )
    assert "a100-mystery (GPU memory not known), nvidia-a100-20c (20 GB), nvidia-a100-40c (40 GB)" in msg
    assert ids(profiles.choose(unknown, "a100-mystery", "NVIDIA A100", LOC)) == ["a100-mystery"]  # by id: fine
    # a pool without a profile takes whole cards, and is told so: give one by id, or any
    with pytest.raises(InputError, match="a pool without gpu.profile takes whole cards .* or 'any' for any of them"):
        profiles.choose(unknown, None, "NVIDIA A100", LOC)
    assert len(profiles.choose(unknown, "any", "NVIDIA A100", LOC)) == 3


def test_one_allocation_honours_each_machines_profiles_and_serves_the_narrowest_first():
    # without a choice the profile with the most room (the half card); with one, only it
    assert profiles.allocate(A100, {"m-0": 1}, "NVIDIA A100") == {"m-0": "nvidia-a100-20c"}
    got = profiles.allocate(A100, {"any-0": 5, "full-0": 6}, "NVIDIA A100", {"full-0": {"nvidia-a100-40c"}})
    assert got == {"full-0": "nvidia-a100-40c", "any-0": "nvidia-a100-20c"}
    with pytest.raises(InsufficientCapacity) as err:
        profiles.allocate(
            A100, {"full-0": 4, "full-1": 4}, "NVIDIA A100", dict.fromkeys(["full-0", "full-1"], {"nvidia-a100-40c"})
        )
    assert "available: nvidia-a100-40c: 6" in str(err.value) and "20c" not in str(err.value)


class _Listing:
    def vgpus(self, location, include_deleted=False):
        return []


def _plan(gpu, replicas=2):
    spec = speccheck.check(
        {
            "cluster": {"name": "ty", "location": LOC},
            "control_plane": {"replicas": 1, "image": 12},
            "pools": [{"name": "gpu", "replicas": replicas, "vcpus": 8, "memory": 32768, "image": 12, "gpu": gpu}],
        }
    )
    world = {
        "spaces": [],
        "inventory": Inventory(_Listing(), LOC),
        # the vGPUs alone bill here: the other units the plan counts are free at this location
        "price": {"currency": "EUR", "resources": {"vgu": 730.0, "vcu": 0, "mu": 0, "su": 0, "fsu": 0, "piu": 0}},
        "profiles": OFFERED,
        "images": [{"image_id": 12, "name": "Ubuntu"}],
    }
    return cluster_plan.plan(spec, world)


def test_the_plan_reserves_the_profile_asked_for_and_its_summary_line_shows_it():
    view = _plan({"type": "NVIDIA A100", "count": 1, "driverVersion": "550", "profile": "full"}).view()
    assert {r["profile"] for r in view["reserve"]} == {"nvidia-a100-40c"}
    assert view["capacity"] == {"NVIDIA A100": {"needed": 2, "available": 6}}
    assert view["pools"][1]["gpu"] == {"type": "NVIDIA A100", "count": 1, "profile": "full", "memory": 40}
    line = summary.converge_lines(view, True)[0]
    assert "reserve 2 x NVIDIA A100 (nvidia-a100-40c): +2.00 EUR/h" in line, line
    # without a profile: whole cards, where the half card has more room (issue 46, point 15); any: the most room
    view = _plan({"type": "NVIDIA A100", "count": 1}).view()
    assert {r["profile"] for r in view["reserve"]} == {"nvidia-a100-40c"}
    assert view["capacity"]["NVIDIA A100"]["available"] == 6
    assert view["pools"][1]["gpu"] == {"type": "NVIDIA A100", "count": 1, "profile": "full", "memory": 40}
    view = _plan({"type": "NVIDIA A100", "count": 1, "profile": "any"}).view()
    assert {r["profile"] for r in view["reserve"]} == {"nvidia-a100-20c"}
    assert view["capacity"]["NVIDIA A100"]["available"] == 14
    assert view["pools"][1]["gpu"] == {"type": "NVIDIA A100", "count": 1, "profile": "any", "memory": 20}
    # a pool at zero says the profile it would take
    zero = summary.converge_lines(_plan({"type": "NVIDIA A100", "count": 2, "profile": "full"}, 0).view(), True)
    assert zero[1] == (
        "pool gpu at 0 machines: nothing billed; 2.00 EUR/h a machine of 8 vCPUs, 32768 MiB, 2 x NVIDIA A100 "
        "(profile full, 40 GB) when scaled up"
    )


def test_the_plan_refuses_a_wrong_profile_and_too_few_whole_cards():
    with pytest.raises(InputError, match="gpu.profile 'nvidia-a100-80c' is not a profile of NVIDIA A100"):
        _plan({"type": "NVIDIA A100", "count": 1, "profile": "nvidia-a100-80c"})
    with pytest.raises(InsufficientCapacity, match="available: nvidia-a100-40c: 6"):
        _plan({"type": "NVIDIA A100", "count": 4, "profile": "full"})  # 8 of 6 whole cards (14 of any would do)


def test_the_spec_takes_a_profile_as_a_name_and_refuses_anything_else():
    base = {"cluster": {"name": "ty", "location": LOC}}

    def pool(profile):
        gpu = {"type": "NVIDIA A100", "profile": profile}
        return dict(base, pools=[{"name": "g", "replicas": 0, "vcpus": 1, "memory": 1024, "gpu": gpu}])

    assert speccheck.check(pool("full")).pools[1].gpu.profile == "full"
    assert speccheck.check(pool("nvidia-a100-40c")).as_dict()["pools"][0]["gpu"]["profile"] == "nvidia-a100-40c"
    plain = {"name": "g", "replicas": 0, "vcpus": 1, "memory": 1024, "gpu": {"type": "NVIDIA A100"}}
    assert speccheck.check(dict(base, pools=[plain])).pools[1].gpu.profile is None
    for bad in ("whole card", "-x", "x" * 65, 40):
        with pytest.raises(InputError, match=r"pools\[0\]\.gpu\.profile"):
            speccheck.check(pool(bad))


def test_the_controllers_template_availability_counts_the_profile_asked_for():
    """A VCOMachineTemplate's ``spec.gpu.profile``: the free instances of that profile only, and a profile the type
    does not have there is its own condition reason, naming the valid ones."""
    from capvco_controller.vcomachinetemplate import availability

    assert availability(OFFERED, "NVIDIA A100", 7, LOC, "any")[:2] == (True, "Available")  # 8 half cards
    assert availability(OFFERED, "NVIDIA A100", 7, LOC)[:2] == (False, "InsufficientGPUs")  # whole cards: 6
    ok, reason, _message, free = availability(OFFERED, "NVIDIA A100", 7, LOC, "full")
    assert (ok, reason, free) == (False, "InsufficientGPUs", 6)
    ok, reason, message, free = availability(OFFERED, "NVIDIA A100", 1, LOC, "a100-80c")
    assert (ok, reason, free) == (False, "GPUProfileNotOffered", 0) and "nvidia-a100-40c (40 GB)" in message
