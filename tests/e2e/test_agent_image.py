"""The agent run from its image (``node/Containerfile``, built from this working tree), as the DaemonSet runs it:
host network, only NET_ADMIN and SYS_ADMIN, the node's netns directory mounted HostToContainer."""

from __future__ import annotations

import subprocess

import pytest

from capvco_lab import podman_cni
from capvco_lab.agent_image import agent_image
from capvco_lab.netlab import PLUGIN, Lab, missing

from helpers import require


@pytest.fixture
def image_lab(tmp_path):
    require(not missing() and not podman_cni.missing(), "the image lab needs %s" % (missing() or "podman"))
    lab = Lab(tmp_path, agent_image=agent_image()).up(grace=1.0, interval=0.2)
    yield lab
    lab.down()


def test_the_agent_from_its_image_serves_probes_adds_dels_and_reclaims(image_lab):
    lab = image_lab
    name = lab.prefix + "-agent"
    probe = subprocess.run(
        ["podman", "exec", name, "/opt/capvco/cni/capvco-sriov", "--probe", lab.socket], capture_output=True, text=True
    )
    assert probe.returncode == 0, probe.stderr  # the DaemonSet's liveness probe, inside the image
    shipped = subprocess.run(
        ["podman", "exec", name, "cat", "/opt/capvco/cni/capvco-sriov"], capture_output=True, check=True
    ).stdout
    with open(PLUGIN, "rb") as fh:
        assert shipped == fh.read(), "the image ships this tree's plugin"
    pod = lab.add_pod(1)
    rc, res = lab.cni("ADD", pod, container="c1")
    assert rc == 0, (res, (lab.tmp / "agent.log").read_text(encoding="utf-8")[-2000:])
    (nic,) = lab.platform_nics()
    assert res["interfaces"][0]["mac"] == nic["mac_address"] and lab.ping(pod) == 0
    assert lab.cni("DEL", pod, container="c1") == (0, None) and lab.platform_nics() == []
    other = lab.add_pod(2)
    assert lab.cni("ADD", other, container="c2")[0] == 0
    lab.del_pod(other)  # no DEL: the reclaimer in the image releases it
    assert lab.wait_nics(0, timeout=30)
