"""The ledger never forgets a NIC that may be attached, and never releases one it cannot prove its own (issue 25,
points 6 and 7), end to end: real netns, the real agent and plugin, the emulator behind a proxy at the platform's
boundary (tests/e2e/conftest.py) for what the emulator has no fault for."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from helpers import wait_for

NET = "198.51.100."


def entries(lab):
    out = {}
    for name in lab.ledger_entries():
        with open(os.path.join(lab.ledger, name), encoding="utf-8") as fh:
            out[name[: -len(".json")]] = json.load(fh)
    return out


def agent_log(lab):
    return (lab.tmp / "agent.log").read_text(encoding="utf-8")


def rewrite(body, **fields):
    doc = json.loads(body)
    doc.update(fields)
    return json.dumps(doc).encode()


@pytest.mark.parametrize("lab", [{"grace": 1.0, "interval": 0.2, "wait_timeout": 2.0}], indirect=True)
def test_a_nic_whose_first_read_gave_another_mac_stays_recorded_until_it_is_gone(lab, platform_proxy):
    """Point 6: the first read of the new NIC reports another MAC than later reads. The ADD fails (that MAC never
    appears), the rollback rightly refuses to detach a NIC whose MAC differs, and the entry stays: the NIC is
    recorded, reported, never detached on a guess; the runtime's retry gets a NIC of its own; once a person has
    detached the first NIC, the reclaimer lets its entry go."""
    first = []

    def on_answer(method, path, status, body):
        if method == "GET" and "/external-nics/" in path and status == 200 and not first:
            first.append(json.loads(body)["mac_address"])
            return rewrite(body, mac_address="52:54:00:ee:ee:ee")
        return body

    platform_proxy.on_answer = on_answer
    lab.kill_agent()
    platform_proxy.start_agent(lab)
    pod = lab.add_pod(1)
    rc, err = lab.cni("ADD", pod, container="c1")
    assert rc == 1 and err["code"] == 5 and "did not appear" in err["msg"], err
    (nic,) = lab.platform_nics()
    assert nic["mac_address"] == first[0] != "52:54:00:ee:ee:ee"
    ((key, entry),) = entries(lab).items()
    assert key == "c1@net1" and entry["ip"] == nic["ip_address"] and entry["held"], entry
    assert "left for a person" in agent_log(lab) and nic["ip_address"] in agent_log(lab)
    time.sleep(1.0)  # five reclaimer passes
    assert lab.platform_nics() == [nic] and set(entries(lab)) == {"c1@net1"}
    rc, res = lab.cni("ADD", pod, container="c1")  # the runtime's retry: its own NIC, the held entry kept aside
    assert rc == 0, res
    assert res["ips"][0]["address"] != nic["ip_address"] + "/24" and lab.ping(pod) == 0
    assert len(lab.platform_nics()) == 2 and len(entries(lab)) == 2
    with lab.emu.client() as client:  # a person detaches the NIC left for them
        client.detach_nic(lab.cloudspace_id, lab.vm_id, nic["ip_address"], 101)
    assert wait_for(lambda: set(entries(lab)) == {"c1@net1"}, timeout=10), entries(lab)
    assert lab.cni("DEL", pod, container="c1") == (0, None)
    assert lab.platform_nics() == [] and lab.ledger_entries() == []


def test_recovery_never_detaches_a_nic_at_an_address_whose_attach_was_never_sent(lab, platform_proxy):
    """Point 7: the agent chose .77 and died before sending the attach (it waited for the VM's lock, which another
    ADD held); an operator then attached a NIC at .77. On restart the intent just goes: the operator's NIC stays.
    The other ADD's attach was sent and landed while the agent was dead, so its answer never came: that NIC may be
    the agent's or anyone's, and it stays too, recorded and reported for a person; the retried ADD gets another
    address."""
    reads = iter([[NET + "76"], [NET + "77"]])  # the free addresses the platform lists, one read after the other
    posted, release = threading.Event(), threading.Event()

    def on_answer(method, path, status, body):
        if method == "GET" and path.split("?")[0].endswith("/ip-addresses") and status == 200:
            listed = next(reads, None)
            if listed is not None:
                return rewrite(body, ip_addresses=listed)
        return body

    def on_request(method, path):
        if method == "POST" and "/external-nics" in path and not posted.is_set():
            posted.set()
            release.wait(60)  # the first attach holds the agent's VM lock until the agent is dead

    platform_proxy.on_answer, platform_proxy.on_request = on_answer, on_request
    lab.kill_agent()
    platform_proxy.start_agent(lab)
    pod_a, pod_b = lab.add_pod(1), lab.add_pod(2)
    adds = [
        threading.Thread(target=lab.cni, args=("ADD", pod_a), kwargs={"container": "ca"}),
        threading.Thread(target=lab.cni, args=("ADD", pod_b), kwargs={"container": "cb"}),
    ]
    adds[0].start()
    assert posted.wait(30), "the first attach reached the platform's boundary"
    adds[1].start()
    assert wait_for(lambda: set(entries(lab)) == {"ca@net1", "cb@net1"}, timeout=30), entries(lab)
    assert entries(lab)["cb@net1"]["ip"] == NET + "77", "the second ADD chose .77 and waits for the VM's lock"
    time.sleep(0.2)
    lab.kill_agent()  # .77's attach was never sent
    for t in adds:
        t.join(60)
    release.set()  # the first attach lands now, its answer lost with the agent
    assert wait_for(lambda: [n["ip_address"] for n in lab.platform_nics()] == [NET + "76"], timeout=30)
    with lab.emu.client() as client:  # an operator attaches a NIC at .77
        client.attach_nic(lab.cloudspace_id, lab.vm_id, 101, ip_address=NET + "77")
    platform_proxy.on_answer = platform_proxy.on_request = None
    lab.start_agent()  # recovery
    assert sorted(n["ip_address"] for n in lab.platform_nics()) == [NET + "76", NET + "77"], "nothing detached"
    ((key, entry),) = entries(lab).items()
    assert key == "ca@net1" and entry["state"] == "sent" and entry["held"], entry
    assert "ca@net1: left for a person" in agent_log(lab) and NET + "76" in agent_log(lab)
    rc, res = lab.cni("ADD", pod_b, container="cb")  # the runtime retries the ADD whose attach was never sent
    assert rc == 0, res
    assert res["ips"][0]["address"].split("/")[0] not in (NET + "76", NET + "77") and lab.ping(pod_b) == 0
    assert lab.cni("DEL", pod_b, container="cb") == (0, None)
    assert sorted(n["ip_address"] for n in lab.platform_nics()) == [NET + "76", NET + "77"]
