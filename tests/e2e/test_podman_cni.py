"""The plugin driven by a real CNI runtime: podman 4.3's CNI backend (libcni), not the project's own harness.

Each test has the netns lab (the emulator whose NIC hook hot-plugs a veth into
the node, the real agent) and a private podman whose only network is a
``capvco-sriov`` conflist (cniVersion 1.0.0, the version podman's libcni reads).
A container's ``eth0`` is the pod NIC: podman calls ADD at start and DEL at
stop, through libcni, with its own container ids and netns paths.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading

import pytest

from capvco_lab.podman_cni import Podman, missing

from helpers import require, wait_for


@pytest.fixture
def podman(lab, tmp_path):
    require(not missing(), "podman's CNI backend needs %s" % missing())
    pm = Podman(tmp_path / "podman", lab.socket)
    yield pm
    pm.cleanup()


def holds_its_nic(lab, podman, name):
    """The container's eth0 is the platform's NIC, by MAC and address, and the platform has it on this VM."""
    iface = podman.interface(name)
    assert iface is not None, "%s has no eth0" % name
    addresses = [a["local"] for a in iface["addr_info"] if a["family"] == "inet"]
    nics = [n for n in lab.platform_nics() if n["mac_address"] == iface["address"]]
    assert len(nics) == 1 and addresses == [nics[0]["ip_address"]], (iface, lab.platform_nics())
    return nics[0]


def test_run_stop_start_reload_and_rm(lab, podman):
    podman.run("c1")
    first = holds_its_nic(lab, podman, "c1")
    assert podman.ping("c1") == 0, "the container reaches the external host over its NIC"
    routes = subprocess.run(
        ["nsenter", "-t", str(podman.inspect("c1")["State"]["Pid"]), "-n", "ip", "route", "show", "default"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert routes.strip() == "", "the plugin never adds a default route"
    assert len(lab.ledger_entries()) == 1
    podman("stop", "-t", "0", "c1")  # DEL through libcni
    assert lab.platform_nics() == [] and lab.ledger_entries() == []
    podman("start", "c1")  # the same container id, a new netns: a fresh ADD
    again = holds_its_nic(lab, podman, "c1")
    assert len(lab.platform_nics()) == 1 and again["mac_address"] != first["mac_address"]
    podman("network", "reload", "c1")  # podman tears the network down and sets it up again
    holds_its_nic(lab, podman, "c1")
    assert len(lab.platform_nics()) == 1 and len(lab.ledger_entries()) == 1
    podman("rm", "-f", "-t", "0", "c1")
    assert lab.platform_nics() == [] and lab.ledger_entries() == []


def test_a_killed_container_that_gets_no_del_is_reclaimed(lab, podman):
    """conmon and the container are killed, so podman's cleanup (and its DEL) never runs, and the netns goes
    as after a node reboot: the reclaimer releases the NIC after the grace period; the late DEL is a no-op."""
    podman.run("c1")
    holds_its_nic(lab, podman, "c1")
    state = podman.inspect("c1")["State"]
    netns = podman.netns("c1")
    os.kill(state["ConmonPid"], signal.SIGKILL)
    os.kill(state["Pid"], signal.SIGKILL)
    subprocess.run(["ip", "netns", "delete", os.path.basename(netns)], check=True)
    assert lab.wait_nics(0, timeout=30), "reclaimed without a DEL"
    assert wait_for(lambda: lab.ledger_entries() == [], timeout=5)
    podman("rm", "-f", "-t", "0", "c1", check=False)  # podman's own teardown of what is left: its DEL finds nothing
    assert lab.platform_nics() == []


def test_the_agent_killed_mid_pod_and_restarted(lab, podman):
    """The agent dies while a container runs; podman's DEL at stop fails (11) and podman drops the netns
    anyway; the agent comes back; ``podman start`` (same container id, new netns) gets a working NIC, and
    the one of the old netns is gone."""
    podman.run("c1")
    old = holds_its_nic(lab, podman, "c1")
    lab.kill_agent()
    podman("stop", "-t", "0", "c1", check=False)  # its DEL cannot reach the agent
    assert lab.platform_nics() == [old], "nothing released while the agent is down"
    lab.start_agent()
    podman("start", "c1")
    new = holds_its_nic(lab, podman, "c1")
    assert lab.platform_nics() == [new] and podman.ping("c1") == 0
    podman("rm", "-f", "-t", "0", "c1")
    assert lab.platform_nics() == [] and lab.ledger_entries() == []


def test_five_containers_at_once(lab, podman):
    names = ["c%d" % i for i in range(5)]
    errors = []

    def run(name):
        try:
            podman.run(name)
        except AssertionError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=run, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    nics = [holds_its_nic(lab, podman, n) for n in names]
    assert len({n["ip_address"] for n in nics}) == 5 and len(lab.platform_nics()) == 5
    podman("rm", "-f", "-t", "0", *names)
    assert lab.platform_nics() == [] and lab.ledger_entries() == []
