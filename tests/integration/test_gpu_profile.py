"""``gpu.profile`` through the modules against the emulator (issue 39): a pool that asks for a whole card gets one
(and the plan's summary line says which), and a profile the type does not have at the location fails before any
write, in the cluster module, machine_pool and vgpu, naming the type's profiles there."""

from __future__ import annotations

from capvco_lab.specs import cluster_spec

from helpers import one_result, play_tasks

VALID = "its profiles: nvidia-a100-20c (20 GB), nvidia-a100-40c (40 GB), 'full' ("


def reserved(emulator, cluster):
    """The profiles of the cluster's live reservations (not deleted)."""
    return sorted(
        v["gpu_id"]
        for v in emulator.snapshot()["vgpus"]
        if ".%s." % cluster in v["vgpu_name"] and not v.get("deleted_at") and not v.get("soft_deleted_at")
    )


def test_a_pool_without_a_profile_gets_whole_cards_even_where_a_half_card_has_more_room(emulator, tmp_path):
    """Issue 46, point 15: "NVIDIA A100" without gpu.profile got nvidia-a100-20c (half the card's memory) when that
    profile had the most room (8 free beside 6 whole cards).  It gets whole cards, and the plan shows each pool's
    profile and the GPU memory of its vGPUs; a partial card only by its id or ``profile: any``."""
    spec = cluster_spec("wc", "wc-cs", gpu_replicas=1)
    assert "profile" not in spec["pools"][0]["gpu"]
    tasks = """
    - name: converge
      whitesky.capvco.cluster: {spec: "{{ spec }}"}
    """
    rc, out, data = play_tasks(tmp_path, tasks, emulator, extra_vars={"spec": spec})
    assert rc == 0, out[-3000:]
    done = one_result(data, "converge")
    assert reserved(emulator, "wc") == ["nvidia-a100-40c"]
    assert done["plan"]["pools"][1]["gpu"] == {"type": "NVIDIA A100", "count": 1, "profile": "full", "memory": 40}
    assert done["plan"]["pools"][0]["gpu"] is None
    # any: whichever has room, the half card here; the plan shows the least GPU memory a vGPU of it may have
    spec = cluster_spec("wa", "wa-cs", gpu_replicas=1)
    spec["pools"][0]["gpu"]["profile"] = "any"
    rc, out, data = play_tasks(tmp_path, tasks, emulator, extra_vars={"spec": spec})
    assert rc == 0, out[-3000:]
    assert reserved(emulator, "wa") == ["nvidia-a100-20c"]
    assert one_result(data, "converge")["plan"]["pools"][1]["gpu"]["memory"] == 20
    # a pool at zero says which profile it would take, and its memory
    zero = cluster_spec("wz", "wz-cs", gpu_replicas=0)
    rc, out, data = play_tasks(tmp_path, tasks, emulator, check=True, extra_vars={"spec": zero})
    assert rc == 0, out[-3000:]
    line = one_result(data, "converge")["summary"][1]
    assert line.endswith("1 x NVIDIA A100 (profile full, 40 GB) when scaled up"), line


def only_the_record_changed(result):
    """A converge whose one write was the cluster's pools note (the spec's profile spelled otherwise, the same
    reservations kept): nothing reserved, released, created or deleted."""
    plan = result["plan"]
    return (not plan["reserve"] and not plan["release"] and not plan["create"] and not plan["delete"]) and plan[
        "pools_note"
    ]["write"] == "update"


def test_a_pool_that_asks_for_a_whole_card_gets_one_and_the_plan_says_so(emulator, tmp_path):
    spec = cluster_spec("fc", "fc-cs", gpu_replicas=2)
    spec["pools"][0]["gpu"]["profile"] = "full"
    tasks = """
    - name: converge
      whitesky.capvco.cluster: {spec: "{{ spec }}"}
    """
    rc, out, data = play_tasks(tmp_path, tasks, emulator, check=True, extra_vars={"spec": spec})
    assert rc == 0, out[-3000:]
    planned = one_result(data, "converge")
    assert {r["profile"] for r in planned["plan"]["reserve"]} == {"nvidia-a100-40c"}
    assert "reserve 2 x NVIDIA A100 (nvidia-a100-40c)" in planned["summary"][0], planned["summary"]
    rc, out, data = play_tasks(tmp_path, tasks, emulator, extra_vars={"spec": spec})
    assert rc == 0, out[-3000:]
    assert "reserve 2 x NVIDIA A100 (nvidia-a100-40c)" in one_result(data, "converge")["summary"][0]
    assert reserved(emulator, "fc") == ["nvidia-a100-40c", "nvidia-a100-40c"]
    # the same spec without a profile keeps them (whole cards is what a pool without one gets); a half card asked for
    # by its id replaces them
    del spec["pools"][0]["gpu"]["profile"]
    rc, out, data = play_tasks(tmp_path, tasks, emulator, extra_vars={"spec": spec})
    assert rc == 0 and only_the_record_changed(one_result(data, "converge")), out[-3000:]
    assert reserved(emulator, "fc") == ["nvidia-a100-40c", "nvidia-a100-40c"]
    spec["pools"][0]["gpu"]["profile"] = "NVIDIA-A100-20C"
    rc, out, data = play_tasks(tmp_path, tasks, emulator, extra_vars={"spec": spec})
    assert rc == 0, out[-3000:]
    assert reserved(emulator, "fc") == ["nvidia-a100-20c", "nvidia-a100-20c"]
    # profile any keeps the half cards it holds (any of the type's will do) ...
    spec["pools"][0]["gpu"]["profile"] = "any"
    rc, out, data = play_tasks(tmp_path, tasks, emulator, extra_vars={"spec": spec})
    assert rc == 0 and only_the_record_changed(one_result(data, "converge")), out[-3000:]
    assert reserved(emulator, "fc") == ["nvidia-a100-20c", "nvidia-a100-20c"]
    assert one_result(data, "converge")["plan"]["pools"][1]["gpu"]["profile"] == "any"
    # ... and a pool without a profile that holds half cards (as one did before whole cards became the default)
    # has them replaced by whole cards: the plan says so, releases and reserves
    del spec["pools"][0]["gpu"]["profile"]
    rc, out, data = play_tasks(tmp_path, tasks, emulator, check=True, extra_vars={"spec": spec})
    assert rc == 0, out[-3000:]
    planned = one_result(data, "converge")["plan"]
    assert len(planned["release"]) == 2 and {r["profile"] for r in planned["reserve"]} == {"nvidia-a100-40c"}
    rc, out, data = play_tasks(tmp_path, tasks, emulator, extra_vars={"spec": spec})
    assert rc == 0, out[-3000:]
    assert reserved(emulator, "fc") == ["nvidia-a100-40c", "nvidia-a100-40c"]
    rc, out, data = play_tasks(
        tmp_path, "- {name: teardown, whitesky.capvco.cluster: {spec: '{{ spec }}', state: absent}}\n", emulator,
        extra_vars={"spec": spec},
    )  # fmt: skip
    assert rc == 0 and reserved(emulator, "fc") == [], out[-3000:]


def test_a_profile_the_type_does_not_have_fails_before_any_write_in_every_module(emulator, tmp_path):
    spec = cluster_spec("wp", "wp-cs")
    spec["pools"][0]["gpu"]["profile"] = "nvidia-l4-24q"
    setup = "- {name: a machine of wp, whitesky.capvco.machine: {cloudspace_id: cs-demo, name: wp-m-0, cluster: wp, "
    setup += "vcpus: 1, memory: 1024, image_id: 12}}\n"
    rc, out, _data = play_tasks(tmp_path, setup, emulator)
    assert rc == 0, out[-3000:]
    before = emulator.snapshot()
    tasks = """
    - name: cluster
      whitesky.capvco.cluster: {spec: "{{ spec }}"}
      ignore_errors: true
    - name: machine_pool
      whitesky.capvco.machine_pool:
        cloudspace: wp-new
        location: be-gen-1
        cluster: wp
        pools:
          - {name: gpu, names: [wp-gpu-0], vcpus: 2, memory: 2048, image_id: 12,
             gpu: {type: NVIDIA A100, profile: nvidia-l4-24q}}
      ignore_errors: true
    - name: vgpu
      whitesky.capvco.vgpu:
        location: be-gen-1
        cloudspace_id: cs-demo
        cluster: wp
        machine: wp-m-0
        type: NVIDIA A100
        profile: nvidia-l4-24q
      ignore_errors: true
    """
    for check in (True, False):
        rc, out, data = play_tasks(tmp_path, tasks, emulator, check=check, extra_vars={"spec": spec})
        assert rc == 0, out[-3000:]
        for task in ("cluster", "machine_pool", "vgpu"):
            result = one_result(data, task)
            assert result["failed"] and result["invalid_input"], (task, result)
            assert "gpu.profile 'nvidia-l4-24q' is not a profile of NVIDIA A100 in location 'be-gen-1'" in result["msg"]
            assert VALID in result["msg"], (task, result["msg"])
    assert emulator.snapshot() == before
    assert emulator.op_count("createCloudspace") == 0 and emulator.op_count("createVirtualMachine") == 1  # the setup
