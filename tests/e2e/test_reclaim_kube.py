"""The reclaimer's Kubernetes signal: a pod gone from the API (faked at the client boundary) loses its NIC."""

from __future__ import annotations

import os
from types import SimpleNamespace

from capvco_lab.netlab import NETNS_DIR
from capvco_sriov.commands import NicAgent
from capvco_sriov.config import parse_request
from capvco_sriov.ledger import Ledger
from capvco_sriov.netlink import Netlink
from capvco_sriov.pods import KubePods
from capvco_sriov.reclaimer import Reclaimer


class FakeCoreV1:
    """Stands in for kubernetes.client.CoreV1Api (there is no API server here)."""

    def __init__(self):
        self.uids = set()
        self.calls = []
        self.down = False

    def list_pod_for_all_namespaces(self, field_selector, watch):
        self.calls.append(field_selector)
        if self.down:
            raise OSError("connection refused")
        return SimpleNamespace(items=[SimpleNamespace(metadata=SimpleNamespace(uid=u)) for u in self.uids])


def test_pod_gone_from_the_api_is_reclaimed_after_grace(lab, tmp_path):
    api = FakeCoreV1()
    pods = KubePods("node-a", api=api)
    clock = [1000.0]
    with lab.emu.client() as client:
        agent = NicAgent(
            client,
            "be-gen-1",
            "cs-demo",
            lab.vm_id,
            Ledger(str(tmp_path / "l2")),
            Netlink(os.path.join(NETNS_DIR, lab.node)),
            clock=lambda: clock[0],
        )
        reclaimer = Reclaimer(agent, pods=pods, grace_period=5.0)
        pod = lab.add_pod(1)
        env = {
            "CNI_COMMAND": "ADD",
            "CNI_CONTAINERID": "k1",
            "CNI_IFNAME": "net1",
            "CNI_NETNS": os.path.join(NETNS_DIR, pod),
            "CNI_ARGS": "K8S_POD_UID=uid-1",
        }
        agent.handle(parse_request(env, {"cniVersion": "1.0.0", "network": "101"}))
        api.uids = {"uid-1"}
        assert reclaimer.reclaim_once() == [] and len(lab.platform_nics()) == 1
        api.down = True  # the API cannot say: not a reason to reclaim, however long it lasts
        clock[0] += 60
        assert reclaimer.reclaim_once() == []
        clock[0] += 60  # past the grace period, still down: an "unknown" read as "no pods" would release now
        assert reclaimer.reclaim_once() == [] and len(lab.platform_nics()) == 1
        api.down, api.uids = False, set()  # the pod is gone from the node
        assert reclaimer.reclaim_once() == []  # first seen gone: the grace period starts
        clock[0] += 4.9
        assert reclaimer.reclaim_once() == []
        clock[0] += 0.2
        (released,) = reclaimer.reclaim_once()
        assert "no longer on this node" in released["reason"]
        assert lab.platform_nics() == [] and api.calls[0] == "spec.nodeName=node-a"
        assert "net1" not in os.popen("ip -n %s link" % pod).read()
