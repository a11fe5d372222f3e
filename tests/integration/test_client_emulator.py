"""The client against the running emulator: retries, errors, pagination, billing, locks, persistence."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.platform import governor
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError

from helpers import CUSTOMER, Emulator, run_playbook, task_results, wait_for

LOC = "be-gen-1"
CS = "cs-demo"


def seed(emulator, names, gpu_id="nvidia-a100-20c"):
    """Reservations as another tool would make them (not attached to any VM)."""
    return emulator.admin("POST", "/seed-vgpu", {"location": LOC, "gpu_id": gpu_id, "vgpu_names": names})["vgpu_ids"]


def new_vm(client, name="vm-a"):
    return client.create_vm(CS, name=name, description="test", vcpus=2, memory=2048)


def test_retry_on_503_converges(emulator):
    client = emulator.client(backoff=0.01)
    emulator.faults(fail_next={"listAvailableGPUProfiles": [503, 3]})
    profiles = client.gpu_profiles(LOC)
    assert {p["id"] for p in profiles} >= {"nvidia-a100-40c", "nvidia-a100-20c"}
    assert emulator.op_count("listAvailableGPUProfiles") == 4
    assert client.transport.retry.retries == 3


def test_retry_on_429_honours_retry_after(emulator):
    slept = []
    client = emulator.client(backoff=0.01, sleep=slept.append)
    emulator.faults(fail_next={"listAvailableGPUProfiles": [429, 2]}, retry_after=3)
    client.gpu_profiles(LOC)
    # each Retry-After is waited out at least (the first one exactly, with its jitter); after the first 429 the
    # class is also paced at one call per Retry-After, cut at the next 429 (the governor), so the second may be longer
    most = 3.0 + 3.0 * governor.WAIT_JITTER + governor.WAIT_JITTER_ABS  # the governor's jitter, at its widest
    assert len(slept) == 2 and 3.0 <= slept[0] <= most and slept[1] >= 3.0, slept


def test_retries_give_up_with_a_clear_error(emulator):
    client = emulator.client(backoff=0.001, max_attempts=3)
    emulator.faults(fail_next={"listAvailableGPUProfiles": [503, 10]})
    with pytest.raises(ApiError) as err:
        client.gpu_profiles(LOC)
    assert err.value.status == 503 and emulator.op_count("listAvailableGPUProfiles") == 3


def test_reserve_post_is_never_retried_blindly(emulator):
    client = emulator.client(backoff=0.001)
    vm = new_vm(client)
    emulator.faults(fail_next={"reserveAndAttachVGPUToVM": [503, 1]})
    with pytest.raises(ApiError) as err:
        client.reserve_attach_vgpu(CS, vm, "nvidia-a100-40c", "never-twice")
    assert err.value.status == 503
    assert emulator.op_count("reserveAndAttachVGPUToVM") == 1
    emulator.faults(drop_after_commit={"reserveAndAttachVGPUToVM": 1})
    with pytest.raises(ApiError) as err:
        client.reserve_attach_vgpu(CS, vm, "nvidia-a100-40c", "lost-response")
    assert err.value.no_response
    assert emulator.op_count("reserveAndAttachVGPUToVM") == 2
    assert [r["vgpu_name"] for r in emulator.ledger()["reservations"]] == ["lost-response"]


def test_api_errors_401_404_409(emulator):
    bad = WhiteskyClient(emulator.url, "wrong-token", CUSTOMER)
    with pytest.raises(ApiError) as err:
        bad.gpu_profiles(LOC)
    assert (err.value.status, err.value.method) == (401, "GET")
    assert err.value.path == "/customers/%s/locations/%s/gpus" % (CUSTOMER, LOC)
    client = emulator.client()
    with pytest.raises(ApiError) as err:
        client.get_vm(CS, 999)
    assert err.value.status == 404 and "999" in err.value.message
    vm = new_vm(client)
    client.reserve_attach_vgpu(CS, vm, "nvidia-l4-24q", "held")
    with pytest.raises(ApiError) as err:
        client.delete_vm(CS, vm)
    assert err.value.status == 409 and "detach_gpu" in err.value.message
    assert str(err.value).startswith("DELETE /customers/")


def test_token_absent_from_every_failure_output(emulator, tmp_path):
    secret = "s3cr3t-token-value-" + "x" * 12
    bad = WhiteskyClient(emulator.url, secret, CUSTOMER)
    with pytest.raises(ApiError) as err:
        bad.gpu_profiles(LOC)
    assert secret not in str(err.value) and secret not in repr(err.value) and secret not in repr(bad)
    # a dead endpoint: the transport error carries the URL, never the header
    dead = WhiteskyClient("http://127.0.0.1:9/api/1", secret, CUSTOMER, max_attempts=2, backoff=0.001)
    with pytest.raises(ApiError) as err:
        dead.gpu_profiles(LOC)
    assert err.value.status is None and secret not in str(err.value)
    # and through Ansible, plain and with -vvvv
    play = tmp_path / "p.yml"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - name: profiles\n"
        "      whitesky.capvco.gpu_profile_info:\n        location: be-gen-1\n"
        '        api_token: "{{ capvco_token | default(omit) }}"\n'
    )
    rc, out, data = run_playbook(str(play), emulator, env={"WHITESKY_API_TOKEN": secret})
    assert rc != 0
    res = task_results(data, "profiles")[0]
    assert res["failed"] and res["status"] == 401 and res["method"] == "GET"
    assert secret not in out
    rc, out, _data = run_playbook(str(play), emulator, extra_vars={"capvco_token": secret}, verbosity=4)
    assert rc != 0 and "401" in out
    assert secret not in out


def test_pagination_across_pages(emulator):
    client = emulator.client()
    seed(emulator, ["page-%d" % i for i in range(7)])
    emulator.reset_stats()
    names = [v["vgpu_name"] for v in client.paginate("listCustomerVGPUS", limit=3, location=LOC)]
    assert names == ["page-%d" % i for i in range(7)]
    assert emulator.op_count("listCustomerVGPUS") == 3  # 3 + 3 + 1, no empty trailing page
    emulator.reset_stats()
    assert len(list(client.paginate("listCustomerVGPUS", limit=7, location=LOC))) == 7
    assert emulator.op_count("listCustomerVGPUS") == 1


def test_billing_accrues_while_reserved_and_detached_and_stops_at_permanent_delete(emulator):
    client = emulator.client()
    vm = new_vm(client)
    before = {p["id"]: p["available_instances"] for p in client.gpu_profiles(LOC)}
    vgpu = client.reserve_attach_vgpu(CS, vm, "nvidia-a100-40c", "bill-me")
    assert {p["id"]: p["available_instances"] for p in client.gpu_profiles(LOC)}["nvidia-a100-40c"] == before[
        "nvidia-a100-40c"
    ] - 1

    def seconds():
        return next(r for r in emulator.ledger()["reservations"] if r["vgpu_id"] == vgpu)["vgpu_seconds"]

    client.detach_vgpu(CS, vm, vgpu)
    a = seconds()
    assert wait_for(lambda: seconds() - a >= 0.25, timeout=10), "a detached vGPU still bills"
    client.delete_vgpu(LOC, vgpu, permanently=False)  # soft delete: still billed
    b = seconds()
    assert wait_for(lambda: seconds() - b >= 0.25, timeout=10), "a soft-deleted vGPU still bills"
    client.delete_vgpu(LOC, vgpu, permanently=True)
    d = seconds()
    time.sleep(0.3)  # not a synchronisation: nothing may accrue over this interval
    assert seconds() == d, "billing stops at permanent deletion"
    assert {p["id"]: p["available_instances"] for p in client.gpu_profiles(LOC)} == before
    # the platform's own consumption report agrees (unit-hours of vGPU)
    cons = client.consumption(LOC, int(time.time()) - 60, int(time.time()) + 1)
    assert cons["consumption"]["vgu"] * 3600 == pytest.approx(d, abs=1.5)


def test_vm_lock_refuses_a_concurrent_operation(emulator):
    client = emulator.client()
    vm = new_vm(client)
    (vgpu,) = seed(emulator, ["lock-test"])
    emulator.faults(vm_op_seconds=3)  # long enough for the conflicting call below on a loaded machine
    worker = threading.Thread(target=client.attach_vgpu, args=(CS, vm, vgpu))
    worker.start()
    other = emulator.client()
    assert wait_for(lambda: other.get_vm(CS, vm)["locked"], timeout=10), "the attach holds the VM's lock"
    with pytest.raises(ApiError) as err:
        other.attach_nic(CS, vm, 101, retry_if=lambda _exc: False)  # no lock wait: see the refusal itself
    assert err.value.status == 409 and "locked" in err.value.message
    worker.join()
    assert other.get_vm(CS, vm)["locked"] is False
    assert emulator.stats()["vm_lock_conflicts"] == 1


def test_state_survives_a_restart(tmp_path):
    emu = Emulator(tmp_path / "state").start()
    try:
        client = emu.client()
        vm = new_vm(client, "persisted")
        vgpu = client.reserve_attach_vgpu(CS, vm, "nvidia-a100-40c", "persist-me")
        client.attach_nic(CS, vm, 101)
        nic = client.nics(CS, vm)[0]
    finally:
        emu.stop()
    emu2 = Emulator(tmp_path / "state").start()
    try:
        client = emu2.client()
        info = client.get_vm(CS, vm)
        assert info["name"] == "persisted"
        assert [d["reference_id"] for d in info["devices"]] == [vgpu]
        assert client.nics(CS, vm) == [nic]
        assert [v["vgpu_id"] for v in client.vgpus(LOC)] == [vgpu]
        assert {p["id"]: p["available_instances"] for p in client.gpu_profiles(LOC)}["nvidia-a100-40c"] == 5
        # a new NIC never reuses an address in use
        client.attach_nic(CS, vm, 101)
        ips = [n["ip_address"] for n in client.nics(CS, vm)]
        assert len(set(ips)) == 2
    finally:
        emu2.stop()


def test_parameters_in_the_wrong_place_are_refused(emulator):
    # the platform takes VM fields as query parameters even on POST; a JSON body is not enough
    resp = httpx.post(
        emulator.url + "/customers/%s/cloudspaces/%s/vms" % (CUSTOMER, CS),
        json={"name": "x", "description": "x", "vcpus": 1, "memory": 1024},
        headers={"Authorization": "Bearer " + emulator.token},
    )
    assert resp.status_code == 400 and "name" in resp.json()["message"]


def test_cloudspace_notes(emulator):
    client = emulator.client()
    cs = client.create_cloudspace("notes-cs", LOC)
    assert client.cloudspace_notes(cs) == []
    assert client.create_cloudspace_note(cs, "first", "one") == {"success": True}
    assert client.create_cloudspace_note(cs, "second", "two") == {"success": True}
    notes = client.cloudspace_notes(cs)
    assert [(n["title"], n["content"]) for n in notes] == [("first", "one"), ("second", "two")]
    fields = {"id", "title", "content", "creation_time", "last_update_time", "created_by", "modified_by"}
    for n in notes:
        assert set(n) == fields
        assert isinstance(n["id"], str) and n["id"]
        assert isinstance(n["creation_time"], float) and n["last_update_time"] == n["creation_time"]
        assert n["created_by"] == n["modified_by"] == CUSTOMER
    assert notes[0]["creation_time"] < notes[1]["creation_time"], "float seconds order notes made in one second"
    first, second = notes
    assert client.update_cloudspace_note(cs, first["id"], "first!", "one, edited") == {"success": True}
    edited = client.cloudspace_notes(cs)
    assert [n["id"] for n in edited] == [first["id"], second["id"]], "an update keeps the order"
    assert (edited[0]["title"], edited[0]["content"]) == ("first!", "one, edited")
    assert edited[0]["creation_time"] == first["creation_time"]
    assert edited[0]["last_update_time"] > first["last_update_time"]
    assert client.delete_cloudspace_note(cs, second["id"]) == {"success": True}
    assert [n["id"] for n in client.cloudspace_notes(cs)] == [first["id"]]
    for call in (
        lambda: client.delete_cloudspace_note(cs, second["id"]),
        lambda: client.update_cloudspace_note(cs, "no-such-note", "t", "c"),
        lambda: client.cloudspace_notes("cs-nowhere"),
        lambda: client.create_cloudspace_note("cs-nowhere", "t", "c"),
        lambda: client.delete_cloudspace_note("cs-nowhere", first["id"]),
        lambda: client.delete_cloudspace_note(CS, first["id"]),  # a note of another cloudspace
    ):
        with pytest.raises(ApiError) as err:
            call()
        assert err.value.status == 404
    url = emulator.url + "/customers/%s/cloudspaces/%s/notes" % (CUSTOMER, cs)
    auth = {"Authorization": "Bearer " + emulator.token}
    for bad, field in (
        ({"title": "t", "content": "c", "author": "x"}, "body.author"),
        ({"content": "c"}, "body.title"),
        ({"title": 1, "content": "c"}, "body.title"),
    ):
        for method, target in (("POST", url), ("PUT", url + "/" + first["id"])):
            resp = httpx.request(method, target, json=bad, headers=auth)
            assert resp.status_code == 400 and field in resp.json()["message"], (method, bad, resp.text)
    assert [n["title"] for n in client.cloudspace_notes(cs)] == ["first!"]
    # in the recycle bin a cloudspace keeps its notes; deleted permanently, they go with it
    binned = client.create_cloudspace("notes-bin", LOC)
    client.create_cloudspace_note(binned, "kept", "while binned")
    client.delete_cloudspace(binned, permanently=False)
    client.delete_cloudspace(cs, permanently=True)
    assert [(n["cloudspace_id"], n["title"]) for n in emulator.snapshot()["notes"]] == [(binned, "kept")]
    with pytest.raises(ApiError) as err:
        client.cloudspace_notes(cs)
    assert err.value.status == 404


def test_a_rotated_credential_is_refused_and_a_granted_one_acts_for_its_customers_only(tmp_path):
    """The emulator's credentials: a rotation refuses the old token from then on (401), also after a restart; a
    token granted for one customer gets a 403 for another."""
    import json

    from whitesky_emulator.world import DEFAULT_WORLD

    world = json.loads(json.dumps(DEFAULT_WORLD))
    world["customers"].append({"customer_id": "tenant-b", "name": "Tenant B"})
    seedfile = tmp_path / "seed.json"
    seedfile.write_text(json.dumps(world))
    emu = Emulator(tmp_path / "state", extra_args=["--config", str(seedfile)]).start()
    try:
        old = emu.client()
        assert old.gpu_profiles(LOC)
        emu.rotate("token-two")
        with pytest.raises(ApiError) as err:
            old.gpu_profiles(LOC)
        assert err.value.status == 401 and "revoked" in err.value.message
        assert emu.client().gpu_profiles(LOC)
        emu.grant("token-b", ["tenant-b"])
        only_b = WhiteskyClient(emu.url, "token-b", "tenant-b", timeout=10)
        assert only_b.gpu_profiles(LOC)
        with pytest.raises(ApiError) as err:
            WhiteskyClient(emu.url, "token-b", CUSTOMER, timeout=10).gpu_profiles(LOC)
        assert err.value.status == 403
        listed = emu.admin("GET", "/credentials")["credentials"]
        assert all("token" not in c and len(c["digest"]) == 12 for c in listed)
        assert sorted((c["customers"], c["revoked"]) for c in listed if c["customers"]) == [(["tenant-b"], False)]
    finally:
        emu.stop()
    again = Emulator(tmp_path / "state", extra_args=["--config", str(seedfile)]).start()
    try:
        with pytest.raises(ApiError) as err:
            again.client().gpu_profiles(LOC)  # the --token one, revoked by the rotation before the restart
        assert err.value.status == 401
        assert WhiteskyClient(again.url, "token-two", CUSTOMER, timeout=10).gpu_profiles(LOC)
    finally:
        again.stop()


def kubelet_secret(folder, version, **files):
    """Write ``files`` as the kubelet writes a mounted Secret's new version: a hidden folder of its own, the
    ``..data`` link swapped to it at once, each key a link through ``..data``."""
    import os

    data = folder / ("..%d" % version)
    data.mkdir()
    for name, text in files.items():
        (data / name).write_text(text + "\n")
        if not (folder / name).is_symlink():
            (folder / name).symlink_to(os.path.join("..data", name))
    tmp = folder / "..data_tmp"
    tmp.symlink_to(data.name)
    os.replace(tmp, folder / "..data")


def test_a_token_file_rotated_under_a_running_client_is_used_and_a_refusal_names_the_file(emulator, tmp_path):
    """Issue 46, point 5: a client whose token comes from a mounted Secret's file (``credentials.TokenFile``) uses a
    new token as soon as the Secret changes: a call refused with the old token reads the file again at once and is
    sent again with the new one; with no new token there, the 401 names the file, never a token; every token the
    client held stays out of what it shows."""
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.credentials import TokenFile

    secret = tmp_path / "secret"
    secret.mkdir()
    kubelet_secret(secret, 1, api_token=emulator.token)
    first = emulator.token
    client = WhiteskyClient(emulator.url, first, CUSTOMER, credential=TokenFile(str(secret / "api_token"), "test's"))
    assert client.gpu_profiles(LOC)
    emulator.rotate("token-two")
    with pytest.raises(ApiError) as err:
        client.gpu_profiles(LOC)
    assert err.value.status == 401 and str(secret / "api_token") in str(err.value)
    assert "WHITESKY_API_TOKEN" not in str(err.value) and first not in str(err.value)
    kubelet_secret(secret, 2, api_token="token-two")
    assert client.gpu_profiles(LOC), "the refusal read the Secret again at once and sent the call again"
    assert client.transport.redact("a %s and a %s" % (first, "token-two")) == "a *** and a ***"
    client.close()


def test_a_mounted_secret_is_read_from_one_version_and_kept_when_it_breaks(tmp_path):
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.credentials import SecretFiles

    now = [0.0]
    secret = tmp_path / "s"
    secret.mkdir()
    kubelet_secret(secret, 1, api_url="u1", api_token="t1")
    files = SecretFiles(
        str(secret), ("api_url", "api_token"), "a test's credential", check_every=5, clock=lambda: now[0]
    )
    assert files.current() == (("u1", "t1"), 0)
    kubelet_secret(secret, 2, api_url="u2", api_token="t2")
    assert files.current() == (("u1", "t1"), 0), "not looked at before check_every"
    now[0] = 5.0
    assert files.current() == (("u2", "t2"), 1)
    kubelet_secret(secret, 3, api_url="u3", api_token="")
    assert files.current(force=True) == (("u2", "t2"), 1) and "api_token (a test's credential)" in str(files.error)
    assert "is empty" in str(files.error) and files.source().startswith("the files api_url, api_token in ")
