"""The agent run from its image (``node/Containerfile``, built from this working tree), as the DaemonSet runs it:
host network, only NET_ADMIN and SYS_ADMIN, the node's netns directory mounted HostToContainer."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from capvco_lab import podman_cni
from capvco_lab.images import agent_image
from capvco_lab.netlab import LAUNCHER, PLUGIN, Lab, missing

from helpers import SRIOV_VARS, render_sriov, require


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
    for path, ours in (
        ("/opt/capvco/cni/capvco-sriov", LAUNCHER),
        ("/opt/capvco/cni/capvco-sriov.d/capvco_sriov_shim.py", PLUGIN),
    ):
        shipped = subprocess.run(["podman", "exec", name, "cat", path], capture_output=True, check=True).stdout
        with open(ours, "rb") as fh:
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


def init_container(tmp_path):
    """The DaemonSet's init container, as the role renders it."""
    rc, out, _data, docs = render_sriov(tmp_path, SRIOV_VARS)
    assert rc == 0, out[-2000:]
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    (init,) = ds["spec"]["template"]["spec"]["initContainers"]
    return init


def test_the_init_container_installs_a_plugin_that_runs_on_the_host(tmp_path):
    require(not podman_cni.missing(), "needs podman")
    init = init_container(tmp_path)
    host_bin = tmp_path / "host-cni-bin"
    host_bin.mkdir()
    (mount,) = init["volumeMounts"]
    command = init["command"]
    run = ["podman", "run", "--rm", "--network", "none", "--read-only", "--read-only-tmpfs=false"]
    run += ["-v", "%s:%s" % (host_bin, mount["mountPath"])]
    for _ in range(2):  # a first install, then an upgrade over it
        subprocess.run(run + ["--entrypoint", command[0], agent_image()] + command[1:], check=True)
    assert sorted(os.listdir(host_bin)) == ["capvco-sriov", "capvco-sriov.d"], "no temporary file is left"
    plugin = str(host_bin / "capvco-sriov")
    for _ in range(2):  # the host's python3 runs it, and keeps the body compiled beside it after the first run
        out = subprocess.run([plugin], env={"CNI_COMMAND": "VERSION"}, capture_output=True, text=True, check=True)
        assert json.loads(out.stdout)["supportedVersions"] == ["1.0.0", "1.1.0"]
    assert os.listdir(host_bin / "capvco-sriov.d" / "__pycache__")
