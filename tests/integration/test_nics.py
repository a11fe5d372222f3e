"""external_nic and external_network_info against the running emulator."""

from __future__ import annotations

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.machines import nics
from ansible_collections.whitesky.capvco.plugins.module_utils.machines.errors import AddressTaken
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError

from test_gpu import three_ways, vms

CS = "cs-demo"


def test_external_nic_three_ways(emulator, tmp_path):
    (vm,) = vms(emulator, "n0")
    args = "{location: be-gen-1, cloudspace_id: cs-demo, machine: n0, network: sriov-ext}"
    emulator.reset_stats()
    check, apply, again = three_ways(emulator, tmp_path, "external_nic", args)
    assert check["changed"] and "nic" not in check
    assert apply["changed"] and apply["nic"]["ip_address"].startswith("198.51.100.")
    assert apply["diff"] == {"before": "", "after": "nic %s\n" % apply["nic"]["ip_address"]}
    assert not again["changed"] and again["nic"] == apply["nic"]
    assert emulator.op_count("attachExternalNetworksVirtualMachine") == 1
    with emulator.client() as client:
        assert [n["mac_address"] for n in client.nics(CS, vm)] == [apply["nic"]["mac_address"]]
    args = (
        "{location: be-gen-1, cloudspace_id: cs-demo, machine: n0, network: '101', state: absent, ip_address: %s}"
        % apply["nic"]["ip_address"]
    )
    check, apply, again = three_ways(emulator, tmp_path, "external_nic", args)
    assert check["changed"] and apply["changed"] and not again["changed"]
    with emulator.client() as client:
        assert client.nics(CS, vm) == []


def test_lost_attach_answer_is_found_by_diff_not_attached_twice(emulator):
    vms(emulator, "n0")
    emulator.faults(drop_after_commit={"attachExternalNetworksVirtualMachine": 1})
    params = dict(
        location="be-gen-1",
        cloudspace_id=CS,
        machine="n0",
        network="sriov-ext",
        ip_address=None,
        model="virtio",
        state="present",
    )
    with emulator.client() as client:
        result = nics.ensure(client, **params)
        assert result["changed"] and result["nic"]["mac_address"]
        assert len(client.nics(CS, result["vm_id"])) == 1
    assert emulator.op_count("attachExternalNetworksVirtualMachine") == 1


def test_unknown_network_lists_the_networks(emulator):
    with emulator.client() as client:
        with pytest.raises(InputError) as err:
            nics.network_info(client, location="be-gen-1", name="nope")
        assert "sriov-ext (101)" in str(err.value)
        assert nics.network_info(client, location="be-gen-1")["networks"][0]["subnet_mask"] == "255.255.255.0"


def test_a_chosen_address_is_the_nics_identity_and_a_taken_one_is_refused_by_name(emulator):
    """With ``ip_address`` the NIC is found at that address (no list diff: a stranger's NIC on the network is
    never taken for it); an address another NIC holds, or the broadcast address, fails naming it."""
    vm_a, vm_b = vms(emulator, "n0", "n1")
    params = dict(location="be-gen-1", cloudspace_id=CS, network="sriov-ext", model="virtio", state="present")
    with emulator.client() as client:
        client.attach_nic(CS, vm_a, 101)  # a stranger's NIC on the same network and VM
        emulator.reset_stats()
        result = nics.ensure(client, **dict(params, machine="n0", ip_address="198.51.100.77"))
        assert result["changed"] and result["nic"]["ip_address"] == "198.51.100.77"
        assert emulator.op_count("listExternalNetworksVirtualMachine") == 1, "one read before; none to diff after"
        for ip in ("198.51.100.77", "198.51.100.255"):
            with pytest.raises(AddressTaken) as err:
                nics.ensure(client, **dict(params, machine="n1", ip_address=ip))
            assert ip in str(err.value) and "not available on external network 101" in str(err.value)
        assert client.nics(CS, vm_b) == []
        assert "198.51.100.77" in [n["ip_address"] for n in client.nics(CS, vm_a)]
        assert "198.51.100.77" not in client.free_addresses("be-gen-1", 101)
