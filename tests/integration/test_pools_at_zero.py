"""A GPU pool at zero through the playbooks and the inventory (issue 37, the playbook and AWX side), against the
emulator: ``cluster_create`` with ``replicas: 0`` for a GPU pool deletes its machines and releases every reservation
they hold (nothing billed), keeps the pool's definition in the cluster's pools note on its cloudspace, and its plan
(``--check`` too) shows the pool at zero with its price per machine; the inventory plugin shows the pool as an empty
group ``pool_<pool>`` with that price; the same playbook with another count scales it up again, reservations by
type.  A note is anyone's to write: hostile pools notes (Jinja, garbage, huge, several) crash nothing and run
nothing, and the cluster's next run puts its one note right.  The cluster's teardown takes its pools note away
from a cloudspace that stays.
"""

from __future__ import annotations

import json
import os

import yaml
from test_inventory import inventory, members

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import run as cluster
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import poolsread

from helpers import ROOT, run_playbook, task_results
from test_gpu import live, mutations

LOC = "be-gen-1"
CONVERGE = "Converge the cluster to its spec (cloudspace, every pool's machines and GPUs by type)"
A100x2 = {"type": "NVIDIA A100", "count": 2, "driverVersion": "550"}
#: One machine of each pool per hour, whole, at be-gen-1's prices (12 EUR a vCPU-month, 3.5 a GiB-month of memory,
#: 0.1 a GiB-month of boot disk, 730 a vGPU-month; an hour is 1/730 of a month): the GPU pool's 4 vCPUs, 8 GiB,
#: the image's 10 GiB disk and 2 vGPUs; the control plane's 2 vCPUs, 2 GiB and 10 GiB.
GPU_MACHINE = (4 * 12.0 + 8 * 3.5 + 10 * 0.1) / 730 + 2.0
CP_MACHINE = (2 * 12.0 + 2 * 3.5 + 10 * 0.1) / 730
ADDRESS = 5.0 / 730  # the cloudspace's public address


def spec(name="pz", gpu_replicas=2, cloudspace=None, cp=1):
    return {
        "cluster": {"name": name, "location": LOC, "cloudspace": cloudspace or name + "-cs"},
        "control_plane": {"replicas": cp, "vcpus": 2, "memory": 2048, "image": 12},
        "pools": [{"name": "gpu", "replicas": gpu_replicas, "vcpus": 4, "memory": 8192, "image": 12, "gpu": A100x2}],
    }


def create(emu, s, check=False):
    """``cluster_create`` with the spec: the cluster task's result, and the play's stats."""
    rc, out, data = run_playbook(os.path.join(ROOT, "playbooks", "cluster_create.yml"), emu, extra_vars=s, check=check)
    assert rc == 0, out[-3000:]
    (result,) = task_results(data, CONVERGE)
    return result, data["stats"]["localhost"]


def cloudspace_id(emu, name):
    (cs,) = [c["cloudspace_id"] for c in emu.snapshot()["cloudspaces"] if c["name"] == name and not c["deleted_at"]]
    return cs


def pools_notes(emu, cs_id):
    """The pools notes on the cloudspace: ``[(id, content)]``, oldest first."""
    return [
        (n["note_id"], n["content"])
        for n in emu.snapshot()["notes"]
        if n["cloudspace_id"] == cs_id and poolsread.pools_note_cluster(n["title"], n["content"])
    ]


def vm_names(emu, cs_id):
    return sorted(v["name"] for v in emu.snapshot()["vms"] if v["cloudspace_id"] == cs_id and not v["deleted_at"])


def source(tmp_path, name="pools.whitesky.yml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"plugin": "whitesky.capvco.vms"}))
    return path


def exported(emu, src):
    """``ansible-inventory --list --export`` (what AWX imports: the groups' variables too): its JSON and stderr."""
    proc = inventory(emu, src, "--list", "--export")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(proc.stdout, object_hook=_plain), proc.stderr


def _plain(obj):
    return obj["__ansible_unsafe"] if set(obj) == {"__ansible_unsafe"} else obj


def pool_entry(result, name="gpu"):
    (entry,) = [p for p in result["plan"]["pools"] if p["name"] == name]
    return entry


# --- a GPU pool to zero and back ---------------------------------------------------------------------------------


def test_a_gpu_pool_goes_to_zero_and_back_through_the_playbook_and_the_inventory_shows_it_at_zero(emulator, tmp_path):
    # at 2: two machines with 2 x A100 each, reserved by type
    at_two, _stats = create(emulator, spec(gpu_replicas=2))
    cs = cloudspace_id(emulator, "pz-cs")
    held = live(emulator, "pz")
    assert len(held) == 4 and all(r["gpu_id"].startswith("nvidia-a100") and r["vm_id"] for r in held)
    assert pool_entry(at_two) == {
        "name": "gpu",
        "replicas": 2,
        "vcpus": 4,
        "memory": 8192,
        "gpu": {"type": "NVIDIA A100", "count": 2, "profile": "full", "memory": 40},  # whole cards: no profile asked
        "disk_size": 10,
        "per_machine_hourly": round(GPU_MACHINE, 4),  # its 2 vGPUs, 2 EUR an hour, and its size
        "hourly": round(2 * GPU_MACHINE, 4),
    }
    assert pool_entry(at_two, "cp") == {
        "name": "cp",
        "replicas": 1,
        "vcpus": 2,
        "memory": 2048,
        "gpu": None,
        "disk_size": 10,
        "per_machine_hourly": round(CP_MACHINE, 4),
        "hourly": round(CP_MACHINE, 4),
    }
    assert at_two["plan"]["pools_note"]["write"] == "create"
    ((_id, content),) = pools_notes(emulator, cs)
    assert (
        content
        == "pools cluster=pz cp:1:2:2048:0:-:12:10::-;gpu:2:4:8192:2:NVIDIA%20A100:12:10:550:-"
        == at_two["plan"]["pools_note"]["content"]
    )

    # --check at 0: the plan releases every reservation of the pool, prices it at 0, keeps its price per machine
    before = emulator.snapshot()
    planned, stats = create(emulator, spec(gpu_replicas=0), check=True)
    assert emulator.snapshot() == before, "check mode changed the platform"
    assert stats["changed"] >= 1 and planned["changed"]
    assert planned["plan"]["delete"] == ["pz-gpu-0", "pz-gpu-1"]
    assert planned["plan"]["release"] == sorted(r["vgpu_name"] for r in held)
    assert pool_entry(planned) == dict(pool_entry(at_two), replicas=0, hourly=0.0)
    # what stays billed: the control plane and the cloudspace's address, no vGPU
    assert planned["plan"]["price"]["hourly_after"] == round(CP_MACHINE + ADDRESS, 4)
    assert planned["plan"]["price"]["vgpus_after"] == 0 and planned["plan"]["price"]["units"]["vgu"]["after"] == 0
    assert planned["plan"]["pools_note"] == {
        "write": "update",
        "note_id": _id,
        "content": "pools cluster=pz cp:1:2:2048:0:-:12:10::-;gpu:0:4:8192:2:NVIDIA%20A100:12:10:550:-",
        "remove": [],
    }

    # at 0 for real: the machines gone, every reservation of the pool released, nothing billed; the note updated
    at_zero, _stats = create(emulator, spec(gpu_replicas=0))
    assert at_zero["deleted"] == ["pz-gpu-0", "pz-gpu-1"] and at_zero["released"] == planned["plan"]["release"]
    assert live(emulator, "pz") == [] and emulator.ledger()["accruing"] == 0
    assert vm_names(emulator, cs) == ["pz-cp-0"]
    assert pool_entry(at_zero) == pool_entry(planned)
    assert pools_notes(emulator, cs) == [(_id, planned["plan"]["pools_note"]["content"])], "updated in place"

    # again at 0: nothing to do, nothing written (no lease, no note)
    emulator.reset_stats()
    again, stats = create(emulator, spec(gpu_replicas=0))
    assert stats["changed"] == 0 and not again["changed"] and again["plan"]["pools_note"]["write"] is None
    assert mutations(emulator) == 0 and emulator.op_count("updateCloudspaceNote") == 0

    # the inventory: the pool at zero is an empty group with its price per machine; AWX imports the same (--export)
    src = source(tmp_path)
    data, _err = exported(emulator, src)
    assert members(data, "pool_gpu") == [] and members(data, "pool_cp") == ["pz-cp-0"]
    assert data["pool_gpu"]["vars"] == {
        "capvco_pool_cluster": "pz",
        "capvco_pool_cloudspace": "pz-cs",
        "capvco_pool_cloudspace_id": cs,
        "capvco_pool_location": LOC,
        "capvco_pool_replicas": 0,
        "capvco_pool_vcpus": 4,
        "capvco_pool_memory": 8192,
        "capvco_pool_disk": 10,
        "capvco_pool_gpu": {"type": "NVIDIA A100", "count": 2},
        "capvco_pool_per_machine_hourly": round(GPU_MACHINE, 6),
        "capvco_pool_currency": "EUR",
    }
    assert [(p["name"], p["replicas"]) for p in data["cluster_pz"]["vars"]["capvco_pools"]] == [("cp", 1), ("gpu", 0)]
    proc = inventory(emulator, src, "--graph", "--vars")
    assert proc.returncode == 0 and "@pool_gpu:" in proc.stdout and "{capvco_pool_replicas = 0}" in proc.stdout
    # a host of the cluster sees its cluster's pools (a play on it can decide to scale up)
    proc = inventory(emulator, src, "--host", "pz-cp-0")
    assert proc.returncode == 0, proc.stderr[-2000:]
    on_cp = json.loads(proc.stdout, object_hook=_plain)
    assert [p["per_machine_hourly"] for p in on_cp["capvco_pools"] if p["name"] == "gpu"] == [round(GPU_MACHINE, 6)]

    # back to 2 with the same playbook: new machines, reservations by type again
    back, _stats = create(emulator, spec(gpu_replicas=2))
    assert back["created"] == ["pz-gpu-0", "pz-gpu-1"] and len(back["reserved"]) == 4
    held = live(emulator, "pz")
    assert len(held) == 4 and all(r["gpu_id"].startswith("nvidia-a100") and r["vm_id"] for r in held)
    assert pools_notes(emulator, cs) == [(_id, content)]
    data, _err = exported(emulator, src)
    assert (
        members(data, "pool_gpu") == ["pz-gpu-0", "pz-gpu-1"] and data["pool_gpu"]["vars"]["capvco_pool_replicas"] == 2
    )
    assert emulator.ledger()["double_reservations"] == 0


def test_a_new_cluster_may_start_with_its_gpu_pool_at_zero(emulator):
    made, _stats = create(emulator, spec("p0", gpu_replicas=0))
    assert made["created"] == ["p0-cp-0"] and made["reserved"] == [] and live(emulator, "p0") == []
    assert pool_entry(made)["hourly"] == 0.0 and pool_entry(made)["per_machine_hourly"] == round(GPU_MACHINE, 4)
    # the GPU type is planned (and checked) even at zero: the location offers it, nothing is asked of it
    assert made["plan"]["capacity"]["NVIDIA A100"]["needed"] == 0
    cs = cloudspace_id(emulator, "p0-cs")
    assert [c for _i, c in pools_notes(emulator, cs)] == [
        "pools cluster=p0 cp:1:2:2048:0:-:12:10::-;gpu:0:4:8192:2:NVIDIA%20A100:12:10:550:-"
    ]


# --- the teardown takes the note away --------------------------------------------------------------------------


def test_the_teardown_removes_the_pools_note_from_a_cloudspace_that_stays(emulator):
    with emulator.client(backoff=0.01) as client:
        cluster.converge(client, spec("pa", 1, cloudspace="shared"))
        cluster.converge(client, spec("pb", 0, cloudspace="shared"))
        cs = cloudspace_id(emulator, "shared")
        assert sorted(poolsread.pools_note_cluster("capvco/v1", c) for _i, c in pools_notes(emulator, cs)) == [
            "pa",
            "pb",
        ]
        # pa created the cloudspace; pb's machine keeps it: pa's teardown hands it over, and takes its note away
        (pa_note,) = [i for i, c in pools_notes(emulator, cs) if c.startswith("pools cluster=pa ")]
        planned = cluster.teardown(client, {"cluster": spec("pa")["cluster"] | {"cloudspace": "shared"}}, True)
        (space,) = planned["plan"]["cloudspaces"]
        assert not space["delete"] and space["pools_notes"] == [pa_note]
        cluster.teardown(client, {"cluster": spec("pa")["cluster"] | {"cloudspace": "shared"}})
        assert [c[: len("pools cluster=pb ")] for _i, c in pools_notes(emulator, cs)] == ["pools cluster=pb "]
        assert live(emulator, "pa") == []
        # pb's machine stays, and so does its note, while pb deletes one machine
        cluster.teardown(client, {"cluster": spec("pb")["cluster"] | {"cloudspace": "shared"}}, machine="pb-cp-0")
        assert len(pools_notes(emulator, cs)) == 1
        # a teardown asked to keep the cloudspace: the note goes, the cloudspace stays; then nothing is left to do
        cluster.converge(client, spec("pb", 0, cloudspace="shared"))
        done = cluster.teardown(
            client, {"cluster": spec("pb")["cluster"] | {"cloudspace": "shared"}}, delete_cloudspace=False
        )
        assert done["changed"] and pools_notes(emulator, cs) == [] and cloudspace_id(emulator, "shared") == cs
        again = cluster.teardown(
            client, {"cluster": spec("pb")["cluster"] | {"cloudspace": "shared"}}, delete_cloudspace=False
        )
        assert not again["changed"]


# --- hostile notes ---------------------------------------------------------------------------------------------

PLAY = """\
- name: Reference every host's groups and the pools' variables
  hosts: all
  gather_facts: false
  connection: local
  tasks:
    - name: Show what Ansible holds
      ansible.builtin.debug:
        msg: "{{ inventory_hostname }} {{ group_names }} {{ capvco_pools | default('none') }}"
    - name: Show the pool groups
      ansible.builtin.debug:
        msg: "{{ groups | dict2items | selectattr('key', 'match', 'pool_') | list }}"
      run_once: true
"""


def test_hostile_pools_notes_crash_nothing_template_nothing_and_the_next_run_puts_its_note_right(emulator, tmp_path):
    marker = tmp_path / "ran"
    jinja = "{{ lookup('pipe', 'touch %s') }}" % marker
    with emulator.client(backoff=0.01) as client:
        cluster.converge(client, spec("ph", 0))
        cluster.converge(client, spec("pk", 0, cloudspace="ph-cs"))
        cs = cloudspace_id(emulator, "ph-cs")
        ((pk_note, _c),) = [(i, c) for i, c in pools_notes(emulator, cs) if c.startswith("pools cluster=pk ")]
        # pk's one note made hostile; ph given more notes of its own, each hostile; a note of a cluster not noted
        client.update_cloudspace_note(cs, pk_note, "capvco/v1", "pools cluster=pk gpu:0:4:8192:2:" + jinja)
        hostile = [
            "pools cluster=ph " + jinja,
            "pools cluster=ph cp:1:2:2048:1:%7B%7B%20lookup('pipe',%20'id')%20%7D%7D",
            "pools cluster=ph \x00\x01\x7f garbage \u202e",
            "pools cluster=ph " + "gpu:1:4:8192:2:NVIDIA%20A100;" * 20000,  # 600,000 characters
            "pools cluster=" + "x" * 100000,
        ]
        for content in hostile:
            client.create_cloudspace_note(cs, "capvco/v1", content)
        client.create_cloudspace_note(cs, "capvco/v1", "pools cluster=zz cp:5:2:2048:0:-")  # zz: not noted here

        # the inventory: no crash, a warning for each noted cluster whose pools cannot be told, no pool variables
        src = source(tmp_path)
        data, err = exported(emulator, src)
        for name in ("ph", "pk"):
            assert "the pools note of cluster %r does not parse, or there is more than one" % name in err
        assert "zz" not in json.dumps(data) and not marker.exists()
        assert "vars" not in data.get("pool_gpu", {}) and "vars" not in data.get("pool_cp", {})
        (tmp_path / "play.yml").write_text(PLAY)
        rc, out, _ = run_playbook(str(tmp_path / "play.yml"), emulator, inventory=str(src))
        assert rc == 0, out[-3000:]
        assert not marker.exists(), "a note's Jinja ran"

        # check mode shows what ph's next run does: its oldest note (its own) kept, the others deleted
        (own, *others) = [
            i for i, c in pools_notes(emulator, cs) if poolsread.pools_note_cluster("capvco/v1", c) == "ph"
        ]
        planned = cluster.converge(client, spec("ph", 0), True)
        assert planned["changed"] and planned["plan"]["pools_note"]["write"] is None
        assert planned["plan"]["pools_note"]["note_id"] == own and planned["plan"]["pools_note"]["remove"] == others
        cluster.converge(client, spec("ph", 0))
        cluster.converge(client, spec("pk", 0, cloudspace="ph-cs"))  # pk's hostile note updated in place
        assert pools_notes(emulator, cs)[-1][1] == "pools cluster=zz cp:5:2:2048:0:-", "not ph's or pk's: left as is"
        assert [i for i, _c in pools_notes(emulator, cs)][:2] == [own, pk_note]
        assert not cluster.converge(client, spec("ph", 0))["changed"]

    data, err = exported(emulator, src)
    assert "does not parse" not in err and not marker.exists()
    assert [(p["name"], p["replicas"]) for p in data["cluster_ph"]["vars"]["capvco_pools"]] == [("cp", 1), ("gpu", 0)]
    assert [(p["name"], p["replicas"]) for p in data["cluster_pk"]["vars"]["capvco_pools"]] == [("cp", 1), ("gpu", 0)]
    # two clusters have a pool gpu: its group holds no pool variables (each cluster's group says its own)
    assert members(data, "pool_gpu") == [] and "vars" not in data.get("pool_gpu", {})
