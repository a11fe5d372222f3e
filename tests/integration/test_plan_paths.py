"""A relative plan_file or reclaim_plan is taken from the directory ansible-playbook was started in (issue 39): the
playbook run by its name, as a user runs it, from a folder of the user's; never inside the installed collection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from capvco_lab.emulator import COLLECTIONS

from helpers import ROOT

LOC = "be-gen-1"


def playbook(emulator, cwd, extra, pwd=True):
    env = dict(os.environ, **emulator.env(), ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_FORCE_COLOR="0")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.pop("PWD", None)
    if pwd:
        env["PWD"] = str(cwd)  # what the user's shell sets
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "whitesky.capvco.gpu_orphans"]
    return subprocess.run(argv + ["-e", json.dumps(extra)], cwd=cwd, env=env, capture_output=True, text=True)


def test_a_relative_plan_file_lands_where_ansible_playbook_was_started(emulator, tmp_path):
    created = int(time.time()) - 7200
    emulator.admin(
        "POST",
        "/seed-vgpu",
        {"location": LOC, "gpu_id": "nvidia-a100-20c", "vgpu_name": naming.encode("c1", "gone", 0, created)},
    )
    work = tmp_path / "work"
    work.mkdir()
    proc = playbook(emulator, work, {"location": LOC, "plan_file": "orphans.json", "grace_period": 0})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (work / "orphans.json").is_file()
    shipped = os.path.join(ROOT, "playbooks", "orphans.json")
    assert not os.path.exists(shipped), "never inside the collection"
    assert str(work / "orphans.json") in proc.stdout
    # ... and the reviewed plan is applied by the same relative name
    proc = playbook(emulator, work, {"location": LOC, "reclaim_plan": "orphans.json"})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert emulator.ledger()["accruing"] == 0

    # without PWD (ansible-playbook started by a program that does not set it) a relative path is refused, naming it
    proc = playbook(emulator, work, {"location": LOC, "plan_file": "again.json", "grace_period": 0}, pwd=False)
    assert proc.returncode != 0 and "give an absolute one" in proc.stdout, proc.stdout[-3000:]
    assert not (work / "again.json").exists() and not os.path.exists(os.path.join(ROOT, "playbooks", "again.json"))
