"""Every module's EXAMPLES, run as a person copies them (issue 39): in order, as one play on localhost, against a
fresh emulator. The play succeeds, and it leaves nothing behind - the live cloudspaces, VMs and vGPU reservations
(recycle bin included: it bills) are the ones there were, no note is left on a live cloudspace, nothing accrues in
the ledger, and no file (a reclaim plan) is left in the home directory the examples write to.

An example sets up what it uses (a cloudspace, machines) and names nothing it did not make; the variables it uses it
defines. ``vco_status`` talks to Kubernetes only: its examples run against the fake API server, with the objects
Cluster API would have made. ``gpu_driver_install`` and ``gpu_driver_verify`` run on a GPU node: not run here.
"""

from __future__ import annotations

import ast
import glob
import os

import pytest
import yaml
from ansible.playbook.block import Block
from ansible.playbook.task import Task

from capvco_lab.capi import IV, make_cluster, make_machine

from helpers import ROOT, read_text, run_playbook

MODULES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")))

#: Modules whose examples do not run against the emulator, and why.
NOT_ON_THE_PLATFORM = {
    "gpu_driver_install": "node-only: apt, modprobe and a reboot on a GPU node (roles/gpu_driver runs it, in "
    "tests/containers/test_gpu_driver.py)",
    "gpu_driver_verify": "node-only: nvidia-smi on a GPU node (roles/gpu_driver runs it, in "
    "tests/containers/test_gpu_driver.py)",
    "vco_status": "Kubernetes-only: run against the fake Kubernetes API server (test_vco_status_examples)",
}

#: What a task may carry besides its action.
KEYWORDS = set(Task.fattributes) | set(Block.fattributes) | {"local_action"}


def examples(module):
    """The module's EXAMPLES (read from its source, never imported), as the YAML list of tasks it is."""
    tree = ast.parse(read_text(os.path.join(ROOT, "plugins", "modules", module + ".py")))
    (text,) = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["EXAMPLES"]
    ]
    return yaml.safe_load(text)


def leaf_tasks(tasks):
    for task in tasks:
        if "block" in task:
            for part in ("block", "rescue", "always"):
                yield from leaf_tasks(task.get(part) or [])
        else:
            yield task


def action(task):
    (name,) = [key for key in task if key not in KEYWORDS and not key.startswith("with_")]
    return name


@pytest.mark.parametrize("module", MODULES)
def test_the_examples_are_named_tasks_with_fqcns(module):
    tasks = examples(module)
    assert isinstance(tasks, list) and tasks, "%s: EXAMPLES is no list of tasks" % module
    actions = []
    for task in leaf_tasks(tasks):
        assert isinstance(task, dict) and task.get("name"), "%s: a task without a name: %r" % (module, task)
        actions.append(action(task))
    short = [a for a in actions if not a.startswith(("ansible.builtin.", "whitesky.capvco."))]
    assert not short, "%s: actions without their FQCN: %s" % (module, short)
    assert "whitesky.capvco." + module in actions, "%s: its EXAMPLES never use it" % module


def live(snapshot):
    """What a snapshot holds that is there, or bills: cloudspaces and VMs not deleted, reservations not deleted for
    good (the recycle bin bills), and the notes on live cloudspaces."""
    cloudspaces = [c for c in snapshot["cloudspaces"] if c["deleted_at"] is None]
    ids = {c["cloudspace_id"] for c in cloudspaces}
    return {
        "cloudspaces": cloudspaces,
        "vms": [vm for vm in snapshot["vms"] if vm["deleted_at"] is None],
        "vgpus": [g for g in snapshot["vgpus"] if g["deleted_at"] is None],
        "notes": [n for n in snapshot["notes"] if n["cloudspace_id"] in ids],
    }


def run_examples(module, tmp_path, emulator=None, env=None):
    """The module's EXAMPLES as one play on localhost, with a home directory of their own; the run's document."""
    home = tmp_path / "home"
    home.mkdir()
    playbook = tmp_path / ("%s-examples.yml" % module)
    play = {"name": module, "hosts": "localhost", "connection": "local", "gather_facts": False}
    playbook.write_text(yaml.safe_dump([dict(play, tasks=examples(module))], sort_keys=False))
    rc, out, data = run_playbook(str(playbook), emulator, env=dict(env or {}, HOME=str(home)))
    assert rc == 0 and data, "%s: its EXAMPLES fail:\n%s" % (module, failures(data) or out[-4000:])
    results = [r for play in data["plays"] for task in play["tasks"] for r in task["hosts"].values()]
    ran = [r for r in results if r.get("action") == "whitesky.capvco." + module and not r.get("skipped")]
    assert ran, "%s: its EXAMPLES ran it nowhere" % module
    left = sorted(p.name for p in home.iterdir() if p.name != ".ansible")
    assert not left, "%s: its EXAMPLES left files behind in ~: %s" % (module, left)
    return data


def failures(data):
    if not data:
        return ""
    return "\n".join(
        "%s: %s" % (task["task"]["name"], result.get("msg"))
        for play in data["plays"]
        for task in play["tasks"]
        for result in task["hosts"].values()
        if result.get("failed")
    )


@pytest.mark.parametrize(
    "module",
    [
        pytest.param(m, marks=pytest.mark.skip(reason=NOT_ON_THE_PLATFORM[m])) if m in NOT_ON_THE_PLATFORM else m
        for m in MODULES
    ],
)
def test_the_examples_run_and_leave_nothing_behind(module, emulator, tmp_path):
    before = live(emulator.snapshot())
    assert emulator.ledger()["accruing"] == 0
    run_examples(module, tmp_path, emulator)
    after = live(emulator.snapshot())
    for kind in ("cloudspaces", "vms", "vgpus", "notes"):
        assert after[kind] == before[kind], "%s: its EXAMPLES left %s behind: %s" % (module, kind, after[kind])
    assert emulator.ledger()["accruing"] == 0, "%s: its EXAMPLES left vGPUs billed" % module


def test_vco_status_examples(kube, tmp_path):
    """The objects Cluster API makes (the VCOCluster demo, the VCOMachine demo-gpu-0), then the examples."""
    make_cluster(kube, name="demo")
    make_machine(kube, "demo-gpu-0", cluster="demo")
    run_examples("vco_status", tmp_path, env=kube.env())
    machine = kube.get((IV, "VCOMachine"), "demo-gpu-0")
    assert machine["spec"]["providerID"] == "whitesky://be-gen-1/cs-demo/17"
    assert machine["status"]["ready"] is True and machine["status"]["vmID"] == 17
    cluster = kube.get((IV, "VCOCluster"), "demo")
    assert cluster["status"]["gpu"] == {"orphans": 2}
    (clean,) = [c for c in cluster["status"]["conditions"] if c["type"] == "GPUReservationsClean"]
    assert clean["status"] == "False" and clean["reason"] == "OrphansFound"
