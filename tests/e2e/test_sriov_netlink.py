"""The node agent moves a NIC as host-device does (issue 38), in real network namespaces: the NIC's node name kept in
its alias and given back on release, a temporary name while it moves, every step of a move undone when a later one
fails, and a release that fails kept in the ledger for the reclaimer."""

from __future__ import annotations

import itertools
import json
import os

import pytest

import capvco_sriov.netlink as netlink_module
from capvco_lab.netlab import HOOK, NETNS_DIR, sh
from capvco_sriov.commands import NicAgent
from capvco_sriov.config import parse_request
from capvco_sriov.ledger import Ledger
from capvco_sriov.netlink import Netlink
from capvco_sriov.reclaimer import Reclaimer
from capvco_sriov.wire import TRY_AGAIN_LATER, CniError

MAC = "52:54:00:38:00:01"


def links(ns):
    """The links of netns ``ns``: MAC -> (name, alias, mtu, up)."""
    out = {}
    for link in json.loads(sh("ip", "-n", ns, "-j", "link", "show").stdout):
        if link.get("address"):
            out[link["address"]] = (link["ifname"], link.get("ifalias", ""), link["mtu"], "UP" in link["flags"])
    return out


def keep_unplugged_nics(lab):
    """The hot-unplug leaves the veth where it is (a VF that stays on the node once detached), so that where a
    release put the NIC, and under which name, can be seen after the DEL."""
    hook = "EXT_NS=%s NODE_NS=%s %s" % (lab.ext, lab.node, HOOK)
    lab.emu.admin("POST", "/hooks", {"nic_attach": hook, "nic_detach": None})


def hot_plug_name(mac):
    """The name the lab's hot-plug gives the NIC with ``mac`` in the node (hotplug.sh)."""
    return "cvv" + mac.replace(":", "")[-6:]


class Injected(OSError):
    """A netlink change that failed on purpose."""


class Faults:
    """The agent's IPRoute (rtnl), with the changes it sends (``link``, ``addr``, ``route``: set, add, del) failing when
    ``fail(command, kwargs, n)`` says so (``n``: the changes counted so far, this one included)."""

    def __init__(self, monkeypatch):
        self.fail = None
        self.count = 0
        real = netlink_module.IPRoute
        monkeypatch.setattr(netlink_module, "IPRoute", lambda: self.wrap(real()))

    def wrap(self, handle):
        faults = self

        class Handle:
            def __getattr__(self, name):
                attr = getattr(handle, name)
                if name not in ("link", "addr", "route"):
                    return attr

                def change(command, *args, **kwargs):
                    if command in ("set", "add", "del"):
                        faults.count += 1
                        if faults.fail and faults.fail(command, kwargs, faults.count):
                            raise Injected("injected: %s %s %s" % (name, command, sorted(kwargs)))
                    return attr(command, *args, **kwargs)

                return change

        return Handle()


def test_two_nics_released_from_two_pods_leave_their_own_host_names(lab):
    """Each NIC goes back to the node under the name it had there (kept in its alias), not under the pod's
    ``net1``: two released NICs do not collide, and neither stays in its pod."""
    keep_unplugged_nics(lab)
    pods = [lab.add_pod(1), lab.add_pod(2)]
    macs, in_pods = [], []
    for i, pod in enumerate(pods):
        rc, res = lab.cni("ADD", pod, container="c%d" % i)
        assert rc == 0, res
        macs.append(res["interfaces"][0]["mac"])
        in_pods.append(links(pod)[macs[-1]][:2])
    for i, pod in enumerate(pods):
        assert lab.cni("DEL", pod, container="c%d" % i) == (0, None)
    node = links(lab.node)
    names = [node[mac][0] for mac in macs if mac in node]
    assert names == [hot_plug_name(mac) for mac in macs], (names, node)
    assert in_pods == [("net1", hot_plug_name(mac)) for mac in macs], "the node's name was kept in the alias"
    assert all(node[mac][1] == "" for mac in macs), "the alias is cleared once the name is back"
    assert all(mac not in links(pod) for mac, pod in zip(macs, pods, strict=True))
    assert lab.platform_nics() == [] and lab.ledger_entries() == []


def test_a_failure_at_each_step_of_configure_leaves_the_nic_on_the_node_with_its_name(lab, monkeypatch):
    """Every change that moving a NIC into a pod makes, failed in turn (the first, then the second, ...): each time
    the NIC is back on the node under its own name, with its alias, its MTU and its state as they were, and
    nothing of it is in the pod; then the move with no failure succeeds."""
    faults = Faults(monkeypatch)
    pod = lab.add_pod(1)
    sh("ip", "-n", lab.node, "link", "add", "cvnic0", "address", MAC, "type", "veth", "peer", "name", "cvnic0p")
    sh("ip", "-n", lab.node, "link", "set", "cvnic0p", "up")
    before = links(lab.node)[MAC]
    assert before == ("cvnic0", "", 1500, False)
    netlink = Netlink(os.path.join(NETNS_DIR, lab.node))
    routes = [{"dst": "203.0.113.0/24", "gw": "198.51.100.1"}]
    for step in itertools.count(1):
        faults.count = 0
        faults.fail = lambda _command, _kwargs, n, step=step: n == step
        try:
            netlink.configure(MAC, os.path.join(NETNS_DIR, pod), "net1", "198.51.100.50", 24, 1400, routes)
        except Injected:
            assert links(lab.node).get(MAC) == before, "step %d failed: the NIC is on the node as it was" % step
            assert MAC not in links(pod), step
            continue
        break
    assert step > 6, "every step was failed once: down or not, alias, temporary name, move, name, MTU, address, up"
    assert links(pod)[MAC] == ("net1", "cvnic0", 1400, True)
    assert "198.51.100.50/24" in sh("ip", "-n", pod, "addr", "show", "net1").stdout
    assert "203.0.113.0/24" in sh("ip", "-n", pod, "route").stdout


def test_a_failed_release_keeps_the_entry_and_the_reclaimer_finishes_it(lab, monkeypatch, tmp_path):
    """On a platform whose unplug leaves the device, moving it back out of the pod fails on a DEL: the NIC is
    detached at once (billing stops), the DEL answers 11, the device stays in the pod as it was, and the ledger
    keeps its entry, marked; the reclaimer's next pass finishes the release (the device on the node under its own
    name, the entry gone)."""
    keep_unplugged_nics(lab)
    faults = Faults(monkeypatch)
    pod = lab.add_pod(1)
    env = {
        "CNI_CONTAINERID": "r1",
        "CNI_IFNAME": "net1",
        "CNI_NETNS": os.path.join(NETNS_DIR, pod),
        "CNI_ARGS": "K8S_POD_UID=uid-r1",
    }
    config = {"cniVersion": "1.1.0", "name": "sriov-ext", "network": "sriov-ext"}
    with lab.emu.client() as client:
        agent = NicAgent(
            client,
            lab.location,
            lab.cloudspace_id,
            lab.vm_id,
            Ledger(str(tmp_path / "ledger-r")),
            Netlink(os.path.join(NETNS_DIR, lab.node)),
        )
        reclaimer = Reclaimer(agent, grace_period=3600.0)
        result = agent.handle(parse_request(dict(env, CNI_COMMAND="ADD"), config))
        mac = result["interfaces"][0]["mac"]
        faults.fail = lambda _command, kwargs, _n: "net_ns_fd" in kwargs  # the move out of the pod
        with pytest.raises(CniError) as err:
            agent.handle(parse_request(dict(env, CNI_COMMAND="DEL"), config))
        assert err.value.code == TRY_AGAIN_LATER, err.value.msg
        entry = agent.ledger.get("r1@net1")
        assert entry is not None and "back to the node failed" in entry["release_failed"], entry
        assert lab.platform_nics() == [], "detached where it was: the unplug is what takes a NIC out of a pod"
        assert links(pod)[mac][:2] == ("net1", hot_plug_name(mac)), "the pod's interface as it was"
        faults.fail = None
        (released,) = reclaimer.reclaim_once()  # no grace period: the DEL asked for it
        assert released["key"] == "r1@net1" and "release failed" in released["reason"]
        assert agent.ledger.items() == {} and lab.platform_nics() == []
        assert links(lab.node)[mac][:2] == (hot_plug_name(mac), "")
        assert mac not in links(pod)
