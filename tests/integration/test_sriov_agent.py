"""The SR-IOV agent's NicAgent against the real emulator, without root: netlink is faked behind its interface.

Netlink (moving interfaces between network namespaces) needs root; tests/e2e
drives the real one.  Here a fake stands in, so the attach, the ledger, the
rollback, recovery, reclamation, GC and CHECK run on any machine.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError
from capvco_sriov import wire
from capvco_sriov.addresses import FRESH_SECONDS
from capvco_sriov.agent import Redact, serve_one
from capvco_sriov.attachments import ADDRESS_TRIES
from capvco_sriov.commands import NicAgent
from capvco_sriov.config import parse_request
from capvco_sriov.ledger import Ledger
from capvco_sriov.reclaimer import Reclaimer
from capvco_sriov.wire import CniError

from helpers import wait_for

CS, LOC = "cs-demo", "be-gen-1"


class FakeNetlink:
    """The netlink interface of capvco_sriov.attachments (NetlinkOps), in memory: a NIC 'appears' unless told
    otherwise."""

    def __init__(self):
        self.absent = set()  # MACs that never show up in the node
        self.fail_configure = False
        self.pods = {}  # (netns, ifname) -> {"mac", "addresses", "routes"}
        self.released = []

    def wait_for(self, mac, timeout):
        return mac not in self.absent

    def configure(self, mac, netns, ifname, address, prefixlen, mtu, routes):
        if self.fail_configure:
            raise OSError("netlink: operation not permitted")
        self.pods[(netns, ifname)] = {
            "mac": mac,
            "addresses": ["%s/%d" % (address, prefixlen)],
            "routes": [r["dst"] for r in routes],
        }
        return True  # the link runs

    def release(self, netns, ifname, mac):
        self.released.append((netns, ifname, mac))
        self.pods.pop((netns, ifname), None)

    def inspect(self, netns, ifname):
        return self.pods.get((netns, ifname))


@pytest.fixture
def node(emulator, tmp_path):
    client = emulator.client()
    vm_id = client.create_vm(CS, name="node-a", description="node", vcpus=2, memory=2048)
    clock = [1000.0]
    agent = NicAgent(
        client,
        LOC,
        CS,
        vm_id,
        Ledger(str(tmp_path / "ledger")),
        FakeNetlink(),
        clock=lambda: clock[0],
    )
    agent.reclaimer = Reclaimer(agent, grace_period=5.0)
    agent.clock_value = clock
    netns = tmp_path / "netns-pod1"
    netns.touch()
    agent.test_netns = str(netns)
    yield agent
    client.close()


def cni(agent, command, container="c1", conf=None, netns=None):
    config = {"cniVersion": "1.1.0", "name": "ext", "type": "capvco-sriov", "network": "sriov-ext"}
    config.update(conf or {})
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": container,
        "CNI_IFNAME": "net1",
        "CNI_NETNS": netns or agent.test_netns,
        "CNI_ARGS": "K8S_POD_UID=uid-" + container,
    }
    return agent.handle(parse_request(env, config))


def platform(agent):
    return agent.client.nics(CS, agent.vm_id)


def test_add_attaches_one_nic_and_configures_the_pod_with_the_platforms_address(node):
    result = cni(node, "ADD", conf={"routes": [{"dst": "203.0.113.0/24"}]})
    (nic,) = platform(node)
    assert result["ips"] == [{"address": nic["ip_address"] + "/24", "interface": 0}]
    assert result["interfaces"][0] == {"name": "net1", "mac": nic["mac_address"], "sandbox": node.test_netns}
    assert result["routes"] == [{"dst": "203.0.113.0/24", "gw": "198.51.100.1"}]
    assert node.netlink.pods[(node.test_netns, "net1")]["mac"] == nic["mac_address"]
    assert node.ledger.get("c1@net1")["state"] == "ready"
    assert cni(node, "ADD") == result and len(platform(node)) == 1  # a repeated ADD attaches nothing more
    assert cni(node, "CHECK", conf={"prevResult": result}) == {}
    assert cni(node, "DEL") == {} and platform(node) == [] and node.ledger.items() == {}
    assert cni(node, "DEL") == {}  # DEL again is fine


def test_check_reports_a_mismatch(node):
    result = cni(node, "ADD")
    node.netlink.pods[(node.test_netns, "net1")]["mac"] = "52:54:ff:ff:ff:ff"
    with pytest.raises(CniError) as err:
        cni(node, "CHECK", conf={"prevResult": result})
    assert err.value.code == wire.CHECK_MISMATCH
    with pytest.raises(CniError) as err:
        cni(node, "CHECK", container="never-added")
    assert err.value.code == wire.UNKNOWN_CONTAINER


@pytest.mark.parametrize("how", ["configure fails", "never appears"])
def test_a_failure_after_the_attach_rolls_back(node, how):
    if how == "configure fails":
        node.netlink.fail_configure = True
    else:
        node.netlink.absent = {"52:54:00:00:00:01"}
    with pytest.raises(CniError) as err:
        cni(node, "ADD")
    assert err.value.code == wire.IO_FAILURE
    assert platform(node) == [] and node.ledger.items() == {}, "the NIC is detached and the entry is gone"


@pytest.mark.parametrize(
    ("faults", "code"),
    [
        ({"error_rates": {"503": 1.0}, "operations": ["attachExternalNetworksVirtualMachine"]}, wire.TRY_AGAIN_LATER),
        ({"fail_next": {"attachExternalNetworksVirtualMachine": [500, 1]}}, wire.IO_FAILURE),
    ],
)
def test_a_platform_failure_at_attach_leaves_nothing(node, emulator, faults, code):
    node.client.transport.retry.backoff = 0.01
    emulator.faults(**faults)
    with pytest.raises(CniError) as err:
        cni(node, "ADD")
    assert err.value.code == code
    assert platform(node) == [] and node.ledger.items() == {}


def test_an_attach_whose_answer_is_a_503_is_resolved_and_sent_again_once(node, emulator):
    emulator.faults(fail_next={"attachExternalNetworksVirtualMachine": [503, 1]})
    result = cni(node, "ADD")
    (nic,) = platform(node)
    assert result["ips"][0]["address"].startswith(nic["ip_address"] + "/")
    assert emulator.op_count("attachExternalNetworksVirtualMachine") == 2


def test_a_pod_whose_netns_is_gone_is_reclaimed_after_the_grace_period(node, tmp_path):
    cni(node, "ADD")
    (tmp_path / "netns-pod1").unlink()
    assert node.reclaimer.reclaim_once() == []  # first seen gone: the grace period starts
    node.clock_value[0] += 4.9
    assert node.reclaimer.reclaim_once() == [] and len(platform(node)) == 1
    node.clock_value[0] += 0.2
    (released,) = node.reclaimer.reclaim_once()
    assert "netns" in released["reason"] and platform(node) == [] and node.ledger.items() == {}


def test_gc_releases_what_the_runtime_no_longer_lists(node, tmp_path):
    other = tmp_path / "netns-pod2"
    other.touch()
    cni(node, "ADD", container="keep")
    cni(node, "ADD", container="drop", netns=str(other))
    assert len(platform(node)) == 2
    gc = {"CNI_COMMAND": "GC"}
    conf = {
        "cniVersion": "1.1.0",
        "name": "ext",
        "type": "capvco-sriov",
        "network": "sriov-ext",
        "cni.dev/valid-attachments": [{"containerID": "keep", "ifname": "net1"}],
    }
    node.handle(parse_request(gc, conf))
    assert set(node.ledger.items()) == {"keep@net1"} and len(platform(node)) == 1


def test_a_409_at_attach_is_another_address_and_then_try_again_later(node, emulator):
    """The platform refused the chosen address (taken meanwhile): the agent chooses another, and after
    ADDRESS_TRIES refusals in a row answers 11 (the runtime retries), never 5; nothing is left behind."""
    emulator.faults(fail_next={"attachExternalNetworksVirtualMachine": [409, 1]})
    result = cni(node, "ADD")
    (nic,) = platform(node)
    assert result["ips"][0]["address"] == nic["ip_address"] + "/24"
    assert emulator.op_count("attachExternalNetworksVirtualMachine") == 2
    assert emulator.op_count("getExternalNetworkAddresses") == 2, "a refused address makes the list be read again"
    emulator.faults(fail_next={"attachExternalNetworksVirtualMachine": [409, ADDRESS_TRIES]})
    with pytest.raises(CniError) as err:
        cni(node, "ADD", container="c2")
    assert err.value.code == wire.TRY_AGAIN_LATER and "refused %d" % ADDRESS_TRIES in err.value.msg
    assert platform(node) == [nic] and set(node.ledger.items()) == {"c1@net1"}


def test_a_platform_outage_on_every_call_is_try_again_later(node, emulator):
    node.client.transport.retry.backoff = 0.01
    node.client.transport.deadlines.retry_budget = 1.0
    emulator.faults(error_rates={"503": 1.0})
    code, doc = serve_one(node, request("ADD", node.test_netns))
    assert (code, doc["code"]) == (1, wire.TRY_AGAIN_LATER), doc
    assert node.ledger.items() == {}


def test_errors_never_carry_the_credential(node):
    token = node.client.transport._token

    class Echoing:  # a platform whose error body echoes the request's headers
        client = node.client

        def handle(self, req):
            raise ApiError("POST", "/x", 500, "bad request; headers: Authorization: Bearer %s" % token)

    code, doc = serve_one(Echoing(), request("ADD", node.test_netns))
    assert code == 1 and token not in json.dumps(doc) and "Authorization: ***" in doc["details"]
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    handler.addFilter(Redact(node.client.transport.redact))
    log = logging.getLogger("capvco-redact-test")
    log.addHandler(handler)
    try:
        raise ApiError("GET", "/y", 500, "echo: Bearer %s and %s" % (token, token))
    except ApiError:
        log.exception("failed")
    assert token not in handler.format(records[0]) and "***" in records[0].getMessage()


def request(command, netns, container="c1"):
    config = {"cniVersion": "1.1.0", "name": "ext", "type": "capvco-sriov", "network": "sriov-ext"}
    env = {"CNI_COMMAND": command, "CNI_CONTAINERID": container, "CNI_IFNAME": "net1", "CNI_NETNS": netns}
    return wire.encode_request(env, config)


def test_gc_is_scoped_to_the_network_configuration_name(node, tmp_path):
    """Two configurations on one platform network: GC of net-a never releases net-b's attachment."""
    other = tmp_path / "netns-pod2"
    other.touch()
    cni(node, "ADD", container="ca", conf={"name": "net-a"})
    cni(node, "ADD", container="cb", conf={"name": "net-b"}, netns=str(other))
    gc = {"CNI_COMMAND": "GC"}
    conf = {"cniVersion": "1.1.0", "type": "capvco-sriov", "network": "sriov-ext"}
    valid = {"cni.dev/valid-attachments": [{"containerID": "ca", "ifname": "net1"}]}
    node.handle(parse_request(gc, dict(conf, name="net-a", **valid)))
    assert set(node.ledger.items()) == {"ca@net1", "cb@net1"} and len(platform(node)) == 2
    node.handle(parse_request(gc, dict(conf, name="net-b", **{"cni.dev/valid-attachments": []})))
    assert set(node.ledger.items()) == {"ca@net1"} and len(platform(node)) == 1


def test_an_add_after_a_lost_del_in_a_new_netns_attaches_there(node, tmp_path):
    """The runtime kept the container id, lost the DEL, and made a new netns: the saved result is stale."""
    first = cni(node, "ADD")
    os.unlink(node.test_netns)  # the runtime deleted netns A without a DEL reaching the agent
    node.netlink.pods.pop((node.test_netns, "net1"))
    fresh = tmp_path / "netns-b"
    fresh.touch()
    second = cni(node, "ADD", netns=str(fresh))
    assert second["interfaces"][0]["sandbox"] == str(fresh) != first["interfaces"][0]["sandbox"]
    assert node.netlink.pods[(str(fresh), "net1")]["mac"] == second["interfaces"][0]["mac"]
    (nic,) = platform(node)
    assert nic["mac_address"] == second["interfaces"][0]["mac"], "the stale NIC went, one NIC is live"
    # the same netns, but the interface is not there any more: also stale
    node.netlink.pods.pop((str(fresh), "net1"))
    third = cni(node, "ADD", netns=str(fresh))
    assert node.netlink.pods[(str(fresh), "net1")]["mac"] == third["interfaces"][0]["mac"]
    assert len(platform(node)) == 1


def test_two_concurrent_adds_of_one_attachment_get_one_outcome(node):
    """A runtime retrying a slow ADD: the second waits for the first, and both get its result; one NIC."""
    slow = node.netlink.configure

    def configure(*args):
        time.sleep(0.3)
        return slow(*args)

    node.netlink.configure = configure
    results = []
    threads = [threading.Thread(target=lambda: results.append(cni(node, "ADD"))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2 and results[0] == results[1]
    assert len(platform(node)) == 1 and set(node.ledger.items()) == {"c1@net1"}
    assert cni(node, "DEL") == {} and platform(node) == [] and node.ledger.items() == {}


def test_the_agent_answers_the_liveness_probe(node):
    assert serve_one(node, wire.PROBE) == (0, {})


def test_del_never_detaches_a_nic_that_took_over_the_address(node):
    """The entry's NIC was removed outside the agent, and its address went to another NIC: DEL leaves that one."""
    result = cni(node, "ADD")
    ip = result["ips"][0]["address"].split("/")[0]
    (mine,) = platform(node)
    node.client.detach_nic(CS, node.vm_id, ip, mine["network_id"])
    node.client.attach_nic(CS, node.vm_id, mine["network_id"], ip_address=ip)  # someone else's, same address
    (other,) = platform(node)
    assert other["ip_address"] == ip and other["mac_address"] != mine["mac_address"]
    assert cni(node, "DEL") == {}
    assert platform(node) == [other] and node.ledger.items() == {}


def test_an_add_is_one_platform_mutation_and_lists_nothing(node, emulator):
    """The agent chooses the address and attaches there: one attach call, one read of the NIC at that address,
    no listing of the VM's NICs; the list of free addresses is read once for many ADDs."""
    emulator.reset_stats()
    for i in range(3):
        netns = node.test_netns + "-%d" % i
        open(netns, "w").close()
        cni(node, "ADD", container="c%d" % i, netns=netns)
    ops = {op: v["count"] for op, v in emulator.stats()["operations"].items()}
    assert ops.get("attachExternalNetworksVirtualMachine") == 3
    assert ops.get("getExternalNetworksVirtualMachine") == 3
    assert ops.get("getExternalNetworkAddresses") == 1
    assert "listExternalNetworksVirtualMachine" not in ops, ops


def test_a_foreign_nic_attached_during_an_add_is_never_claimed(node):
    """Someone attaches a NIC on the same network to the same VM right after the agent's attach: the ADD gets
    its own NIC (by its address), and the DEL detaches only that one."""
    attach = node.client.attach_nic
    foreign = []

    def attach_then_a_stranger(*args, **kwargs):
        answer = attach(*args, **kwargs)
        if not foreign:
            foreign.append(attach(CS, node.vm_id, 101))  # an operator's NIC, the platform's choice of address
        return answer

    node.client.attach_nic = attach_then_a_stranger
    result = cni(node, "ADD")
    node.client.attach_nic = attach
    ip = result["ips"][0]["address"].split("/")[0]
    assert len(platform(node)) == 2
    (mine,) = [n for n in platform(node) if n["ip_address"] == ip]
    assert result["interfaces"][0]["mac"] == mine["mac_address"]
    assert cni(node, "DEL") == {}
    (left,) = platform(node)
    assert left["ip_address"] != ip, "the operator's NIC stays"


def intent(node, state, ip, **kw):
    entry = {"state": state, "pod_uid": "u9", "netns": node.test_netns, "ifname": "net1", "network": "sriov-ext"}
    entry.update(network_id=101, config_name="ext", since=0, prefixlen=24, routes=[], mtu=None, ip=ip, **kw)
    return entry


def test_recovery_settles_each_intent_by_what_its_state_proves(node):
    """A crash during ADDs. Recovery detaches the NIC of an attach the platform answered (at its address); drops
    an intent whose attach was never sent, leaving the operator's NIC that took its address; keeps and reports an
    attach sent with no answer whose address holds a NIC (the agent's or not: nothing tells); and never touches
    an operator's NIC at another address."""
    free = node.client.free_addresses(LOC, 101)
    answered, chosen, sent, other = free[10], free[11], free[12], free[13]
    node.ledger.put("c9@net1", intent(node, "attached", answered))  # answered; the agent died before the read
    node.ledger.put("c8@net1", intent(node, "chosen", chosen))  # died waiting for the VM's lock
    node.ledger.put("c7@net1", intent(node, "sent", sent, sent_at=time.time()))  # died before the answer
    for ip in (answered, chosen, sent, other):  # the agent's, then two operators' at the free addresses, then one
        node.client.attach_nic(CS, node.vm_id, 101, ip_address=ip)
    assert sorted(node.reclaimer.recover()) == ["c8@net1", "c9@net1"]
    assert sorted(n["ip_address"] for n in platform(node)) == sorted([chosen, sent, other])
    assert set(node.ledger.items()) == {"c7@net1"} and node.reclaimer.held().keys() == {"c7@net1"}


def test_the_reclaimer_settles_an_intent_that_no_add_is_working_on(node):
    """An ADD whose outcome stayed unknown after the platform answered leaves its entry: the reclaimer settles it
    without a restart, and leaves alone an entry whose ADD is still running."""
    ip = node.client.free_addresses(LOC, 101)[5]
    node.ledger.put("c7@net1", intent(node, "attached", ip))
    node.client.attach_nic(CS, node.vm_id, 101, ip_address=ip)
    with node.key_lock("c7@net1"):  # an ADD is on it
        assert node.reclaimer.reclaim_once() == [] and len(platform(node)) == 1
    (released,) = node.reclaimer.reclaim_once()
    assert released["key"] == "c7@net1" and released["ip"] == ip
    assert platform(node) == [] and node.ledger.items() == {}


def test_a_lost_attach_answer_is_resolved_by_the_address(node, emulator):
    """The platform attached, the answer was lost: the read at the chosen address finds the NIC, and the
    attach is not sent again."""
    emulator.faults(drop_after_commit={"attachExternalNetworksVirtualMachine": 1})
    result = cni(node, "ADD")
    (nic,) = platform(node)
    assert result["interfaces"][0]["mac"] == nic["mac_address"]
    assert emulator.op_count("attachExternalNetworksVirtualMachine") == 1


def test_a_vm_locked_past_the_call_deadline_is_try_again_later(node, emulator):
    """Another operation holds the VM longer than the agent's call may wait: 11 (the runtime retries), not 5,
    and not a different address (a lock is not a taken address); nothing is left behind."""
    emulator.faults(vm_op_seconds=4.0)
    holder = emulator.client()
    t = threading.Thread(target=holder.attach_nic, args=(CS, node.vm_id, 101))
    t.start()
    try:
        assert wait_for(lambda: node.client.get_vm(CS, node.vm_id).get("locked"), timeout=10)
        deadlines = node.client.transport.deadlines
        deadlines.timeout, deadlines.retry_budget, node.client.transport.retry.backoff = 1.0, 0.2, 0.05
        with pytest.raises(CniError) as err:
            cni(node, "ADD")
        assert err.value.code == wire.TRY_AGAIN_LATER and "locked" in str(err.value.details), err.value.details
        assert emulator.op_count("getExternalNetworkAddresses") == 1, "no new address was chosen for a lock"
    finally:
        t.join()
        holder.close()
    assert node.ledger.items() == {} and len(platform(node)) == 1  # only the other operation's NIC


def test_a_failed_rollback_keeps_the_entry_until_the_platform_shows_the_nic_gone(node):
    """Point 6 of issue 25: the first read of the new NIC gives another MAC than later reads. The ADD fails (that
    MAC never appears), the rollback rightly refuses to detach a NIC whose MAC differs -- and keeps the entry: the
    NIC stays recorded (and reported), the reclaimer leaves it, and the entry goes once the NIC is gone."""
    read = node.client.nic
    first = []

    def nic_with_another_mac_at_first(*args, **kwargs):
        nic = read(*args, **kwargs)
        if not first:
            first.append(nic["mac_address"])
            nic = dict(nic, mac_address="52:54:00:ee:ee:ee")
        return nic

    node.client.nic = nic_with_another_mac_at_first
    node.netlink.absent = {"52:54:00:ee:ee:ee"}
    with pytest.raises(CniError) as err:
        cni(node, "ADD")
    assert err.value.code == wire.IO_FAILURE and "stays in the ledger" in err.value.msg, err.value.msg
    (nic,) = platform(node)
    (entry,) = node.ledger.items().values()
    assert entry["ip"] == nic["ip_address"] and entry["held"], entry
    assert node.reclaimer.reclaim_once() == [] and platform(node) == [nic], "not provably the agent's: never detached"
    # the runtime retries the ADD: a fresh NIC at another address, the held entry kept aside
    node.client.nic = read
    node.netlink.absent = set()
    result = cni(node, "ADD")
    assert result["ips"][0]["address"] != nic["ip_address"] + "/24" and len(platform(node)) == 2
    node.client.detach_nic(CS, node.vm_id, nic["ip_address"], 101)  # a person detaches it
    (settled,) = node.reclaimer.reclaim_once()
    assert settled["ip"] == nic["ip_address"] and set(node.ledger.items()) == {"c1@net1"}


def test_an_answered_attach_whose_read_failed_is_detached_by_the_next_read(node, emulator):
    """The platform answered the attach, then the read of the new NIC failed: the entry says "attached" (the
    answer proves the NIC at the address is this attach's), so the next read names it and it is detached."""
    emulator.faults(fail_next={"getExternalNetworksVirtualMachine": [500, 1]})
    with pytest.raises(CniError) as err:
        cni(node, "ADD")
    assert err.value.code == wire.IO_FAILURE
    assert emulator.op_count("attachExternalNetworksVirtualMachine") == 1
    assert platform(node) == [] and node.ledger.items() == {}


def test_a_choice_is_confirmed_against_a_fresh_list_once_the_vm_is_held(node, emulator):
    """An ADD chooses its address when it arrives and confirms it once it holds the VM's lock: against the list it
    has when that is at most FRESH_SECONDS old, else against the platform's list read again, so an address another
    node took meanwhile is replaced before the attach (a refused attach would cost a token of the budget)."""
    addresses = node.addresses
    net = node.network("sriov-ext")["external_network_id"]
    emulator.reset_stats()
    ip = addresses.choose(net)
    with emulator.client() as client:  # another node takes that very address meanwhile
        other = client.create_vm(CS, name="node-b", description="node", vcpus=2, memory=2048)
        client.attach_nic(CS, other, net, ip_address=ip)
    assert addresses.confirm(net, ip) == ip, "a fresh list is not read again (the platform's 409 says it is taken)"
    assert emulator.op_count("getExternalNetworkAddresses") == 1
    addresses.choose(net)  # the next ADD's choice, from the same list
    addresses._read_at[net] -= FRESH_SECONDS + 1  # the list is older than FRESH_SECONDS now
    again = addresses.confirm(net, ip)
    assert again != ip and emulator.op_count("getExternalNetworkAddresses") == 2
    # a whole ADD whose choice was taken meanwhile attaches elsewhere, with no refused attach
    addresses._read_at[net] -= FRESH_SECONDS + 1
    emulator.reset_stats()
    result = cni(node, "ADD")
    assert result["ips"][0]["address"].split("/")[0] not in (ip,)
    statuses = emulator.stats()["operations"]["attachExternalNetworksVirtualMachine"]["statuses"]
    assert statuses == {"200": 1}
