"""Images and locations (issue 39): ``image_info`` and ``location_info`` against the emulator, and a machine that
would boot no image (or one its location does not have) refused by every entry that creates machines, before
anything is created."""

from __future__ import annotations

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.machines import machine, pools
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError, InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool
from capvco_lab.specs import cluster_spec

from helpers import one_result, play_tasks, run_playbook

LOC = "be-gen-1"
CS = "cs-demo"
HINT = "whitesky.capvco.image_info lists a location's images"


def test_image_info_lists_a_locations_images_and_location_info_the_customers_locations(emulator, tmp_path):
    before = emulator.snapshot()
    rc, out, data = play_tasks(
        tmp_path,
        """
        - {name: all, whitesky.capvco.image_info: {location: be-gen-1}}
        - {name: ubuntu, whitesky.capvco.image_info: {location: be-gen-1, name: UBUNTU}}
        - {name: by id, whitesky.capvco.image_info: {location: nl-ams-1, image_id: 12}}
        - {name: none of that id, whitesky.capvco.image_info: {location: nl-ams-1, image_id: 21}}
        - {name: no such location, whitesky.capvco.image_info: {location: be-gen-9}, ignore_errors: true}
        - {name: locations, whitesky.capvco.location_info: {}}
        - {name: one location, whitesky.capvco.location_info: {name: nl-ams-1, gpus: false}}
        - {name: no such name, whitesky.capvco.location_info: {name: be-gen-9}, ignore_errors: true}
        """,
        emulator,
        check=True,
    )
    assert rc == 0, out[-3000:]
    listed = one_result(data, "all")
    assert not listed["changed"] and listed["image_ids"] == [12, 14, 21]
    (image,) = [i for i in listed["images"] if i["image_id"] == 12]
    assert image == {
        "image_id": 12,
        "name": "Ubuntu 22.04 LTS (cloud-init)",
        "description": "Ubuntu Server 22.04 with cloud-init and the platform's guest agent",
        "status": "CREATED",
        "os_type": "Linux",
        "size": 10,
        "boot_disk_size": 10,
        "memory": 512,
        "public": True,
    }
    assert one_result(data, "ubuntu")["image_ids"] == [12, 14]
    assert [i["name"] for i in one_result(data, "by id")["images"]] == ["Ubuntu 22.04 LTS (cloud-init)"]
    assert one_result(data, "none of that id")["images"] == []
    wrong = one_result(data, "no such location")
    assert wrong["failed"] and wrong["invalid_input"]
    assert (
        "location 'be-gen-9' does not exist for customer 'capvco-demo'; its locations: be-gen-1, nl-ams-1"
        in (wrong["msg"])
    )

    locations = one_result(data, "locations")
    assert locations["names"] == ["be-gen-1", "nl-ams-1"]
    be, ams = locations["locations"]
    assert be["gpu_types"] == ["NVIDIA A100", "NVIDIA L4"] and ams["gpu_types"] == ["NVIDIA H100"]
    assert be["currency"] == "EUR" and be["prices"]["vgu"] == 730.0 and ams["prices"]["vgu"] == 1460.0
    assert one_result(data, "one location")["locations"] == [
        {"name": "nl-ams-1", "currency": "EUR", "prices": ams["prices"], "hourly": ams["hourly"]}
    ]
    # each unit's price per hour, named: 1460 EUR a vGPU-month is 2 EUR an hour
    assert ams["hourly"]["vgu"] == {"what": "vGPU", "per_hour": 2.0} and be["hourly"]["vgu"]["per_hour"] == 1.0
    assert be["hourly"]["vcu"] == {"what": "vCPU", "per_hour": round(12.0 / 730, 6)}
    assert set(be["hourly"]) == {"vcu", "mu", "su", "fsu", "piu", "vgu", "ou", "tu", "nu", "wu"}
    wrong = one_result(data, "no such name")
    assert wrong["failed"] and "its locations: be-gen-1, nl-ams-1" in wrong["msg"]
    assert emulator.snapshot() == before
    assert emulator.op_count("listCustomerImages") == 5 and emulator.op_count("listAvailableGPUProfiles") == 2


def test_the_emulator_refuses_a_vm_of_an_image_its_location_does_not_have(emulator):
    with emulator.client() as client:
        with pytest.raises(ApiError) as err:
            client.create_vm(CS, name="no-image", description="d", vcpus=1, memory=1024, image_id=99)
        assert err.value.status == 404 and "image 99 not found in location 'be-gen-1'" in str(err.value)
        with pytest.raises(ApiError):  # nl-ams-1 has no image 21
            client.create_vm("cs-ams", name="no-image", description="d", vcpus=1, memory=1024, image_id=21)
        vm_id = client.create_vm(CS, name="imaged", description="d", vcpus=1, memory=1024, image_id=21)
        assert client.get_vm(CS, vm_id)["image_id"] == 21
    assert [v["name"] for v in emulator.snapshot()["vms"]] == ["imaged"]


MACHINES = """
- name: machine
  whitesky.capvco.machine: {cloudspace_id: cs-demo, name: c1-m-0, cluster: c1, %(size)s%(at)s}
  ignore_errors: true
- name: one pool
  whitesky.capvco.machine_pool: {cloudspace_id: cs-demo, cluster: c1, names: [c1-m-0], %(size)s%(at)s}
  ignore_errors: true
- name: pools, in a new cloudspace
  whitesky.capvco.machine_pool:
    cloudspace: c1-new
    location: be-gen-1
    cluster: c1
    pools: [{name: m, names: [c1-m-0], %(size)s}]
  ignore_errors: true
"""


@pytest.mark.parametrize(
    "size, at, says",
    [
        (
            "vcpus: 2, memory: 2048",
            "",
            "creating machine(s) 'c1-m-0' needs image_id (a cluster spec's control_plane.image or pools[].image): ",
        ),
        (
            "vcpus: 2, memory: 2048, image_id: 0",
            "",
            "needs image_id (a cluster spec's control_plane.image or pools[].image), not 0: ",
        ),
        (
            "vcpus: 2, memory: 2048, image_id: 99",
            ", location: be-gen-1",
            "image 99 (for machine(s) 'c1-m-0'): location 'be-gen-1' has no such image; its images: "
            "12 'Ubuntu 22.04 LTS (cloud-init)', 14 'Ubuntu 24.04 LTS (cloud-init)', 21 'Debian 12 (cloud-init)' "
            "(%s); nothing was created" % HINT,
        ),
    ],
)
def test_a_machine_without_an_image_is_refused_and_nothing_is_created(emulator, tmp_path, size, at, says):
    """machine and machine_pool (one pool; pools in a cloudspace, by name, that does not exist yet), each in check
    mode and for real: the same refusal, naming the field and image_info, and the platform unchanged."""
    before = emulator.snapshot()
    for check in (True, False):
        rc, out, data = play_tasks(tmp_path, MACHINES % {"size": size, "at": at}, emulator, check=check)
        assert rc == 0, out[-3000:]
        for task in ("machine", "one pool", "pools, in a new cloudspace"):
            result = one_result(data, task)
            assert result["failed"] and result["invalid_input"], (task, result)
            assert says in result["msg"] and HINT in result["msg"], (task, result["msg"])
    assert emulator.snapshot() == before
    assert emulator.op_count("createVirtualMachine") == 0 and emulator.op_count("createCloudspace") == 0


def test_a_cluster_spec_without_an_image_is_refused_before_anything_is_read_or_created(emulator, tmp_path):
    spec = cluster_spec("ni", "ni-cs")
    del spec["control_plane"]["image"], spec["pools"][0]["image"]
    before = emulator.snapshot()
    emulator.reset_stats()
    rc, out, data = run_playbook("playbooks/cluster_create.yml", emulator, extra_vars=spec)
    assert rc != 0
    failed = [r for play in data["plays"] for t in play["tasks"] for r in t["hosts"].values() if r.get("failed")]
    (msg,) = [r["msg"] for r in failed]
    assert "control_plane.image: is required to create its 1 machine(s): the id of the image they boot" in msg
    assert "pools[0].image: is required to create its 1 machine(s)" in msg and HINT in msg
    assert emulator.snapshot() == before and emulator.stats()["requests"] == 0


def test_the_cores_refuse_it_too(emulator):
    """What the controller and the cluster reach: ``need_size`` refuses a pool without an image, and a pool whose
    image the location lacks is refused by its one read of the images."""
    with emulator.client() as client:
        with pytest.raises(InputError, match="needs image_id"):
            machine.need_size(Pool("a", ("c1-a",), 1, 512), ["c1-a"])
        with pytest.raises(InputError, match="location 'nl-ams-1' has no such image"):
            pools.converge_machines(
                client,
                [Pool("a", ("c1-a",), 1, 512, 21)],
                pools.Scope("cs-ams", "c1", "nl-ams-1"),
            )
        made = pools.converge_machines(
            client,
            [Pool("a", ("c1-a",), 1, 512, 14)],
            pools.Scope("cs-ams", "c1", "nl-ams-1"),
        )
        assert [m["image_id"] for m in made["machines"]] == [14]
    assert emulator.op_count("listCustomerImages") == 3  # once per plan: the refused one's, the other's twice (its
    # plan is made again once it holds the lease)


@pytest.mark.parametrize("check", [True, False])
def test_a_cluster_whose_image_the_location_lacks_fails_before_any_write(emulator, tmp_path, check):
    """The cluster's plan checks the images of the machines it creates against one read of the location's images:
    a wrong one fails before anything is written, in check mode and for real, naming it and the valid ones."""
    spec = cluster_spec("ib", "ib-cs")
    spec["pools"][0]["image"] = 99
    before = emulator.snapshot()
    rc, out, data = play_tasks(
        tmp_path,
        """
        - name: converge
          whitesky.capvco.cluster: {spec: "{{ spec }}"}
          ignore_errors: true
        """,
        emulator,
        check=check,
        extra_vars={"spec": spec},
    )
    assert rc == 0, out[-3000:]
    result = one_result(data, "converge")
    assert result["failed"] and result["invalid_input"], result
    assert (
        "image 99 (for machine(s) 'ib-gpu-0'): location 'be-gen-1' has no such image; its images: "
        "12 'Ubuntu 22.04 LTS (cloud-init)', 14 'Ubuntu 24.04 LTS (cloud-init)', 21 'Debian 12 (cloud-init)' "
        "(%s); nothing was created" % HINT
    ) in result["msg"]
    assert emulator.snapshot() == before
    assert emulator.op_count("listCustomerImages") == 1
    assert emulator.op_count("createCloudspace") == 0 and emulator.op_count("createVirtualMachine") == 0
