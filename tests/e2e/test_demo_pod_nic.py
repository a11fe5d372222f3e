"""The demo's pod NIC step leaves nothing behind: no work directory, so no copy of the API token."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from capvco_lab.netlab import missing

from helpers import ROOT, require


def test_the_demo_removes_its_work_directory_and_the_credential_in_it(emulator, tmp_path):
    require(not missing(), "the netns lab needs %s" % missing())
    with emulator.client() as client:
        client.create_vm("cs-demo", name="demo-node", description="demo", vcpus=2, memory=2048)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "capvco_lab.demo_pod_nic",
            "--vm-name",
            "demo-node",
            "--cloudspace-id",
            "cs-demo",
            "--location",
            "be-gen-1",
        ],
        env=dict(os.environ, TMPDIR=str(scratch), **emulator.env()),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["ping_external_host"] and summary["nics_left"] == 0
    assert list(scratch.iterdir()) == [], "the demo left its work directory (with the agent's credential) behind"
    token = emulator.env()["WHITESKY_API_TOKEN"]
    leftovers = subprocess.run(["grep", "-rl", token, str(tmp_path)], capture_output=True, text=True).stdout
    assert leftovers == "", leftovers
