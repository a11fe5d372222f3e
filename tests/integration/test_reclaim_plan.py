"""A reviewed reclaim: plan, then act, against the real emulator.

The property (hypothesis): a location holds reservations of live machines, of gone ones (orphans, some too young
for the grace period), of another cluster, and hand-made ones; a plan is written (orphans of every cluster, of one
cluster, or a cluster's teardown); then, between the plan and the apply, reservations are created, attached,
detached, released, renamed (the same owner, another owner, a name that is not ours), machines come back and VMs
are deleted, in an order hypothesis draws.  The apply (check mode first, then for real, then again) must:

- release only what was in the plan and still matched (the same id, the same name, attached to no VM or to the one
  it was on when planned, and, for orphans, its machine still gone), and every one of those;
- skip every other entry of the plan with the reason the rules give, and change nothing else (every other
  reservation and every VM as it was);
- release nothing the second time, every entry skipped as gone.

The default run is short, with a fixed seed (``CAPVCO_RECLAIM_PLAN_EXAMPLES``, ``CAPVCO_RECLAIM_PLAN_SEED``);
``CAPVCO_RECLAIM_PLAN_RANDOM=1`` draws a random seed.  The figures of a run (examples, entries planned, released,
skipped by reason, the interleaved operations by kind) are written to ``tests/output/reclaim-plan.json`` and printed.

A reservation is renamed by writing the emulator's store (its SQLite file) directly: the platform's API has no
rename, so this stands for a rename made in the portal, or by another tool.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import stat
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from test_cluster_spec import set_price

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import run as cluster_core
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import plandoc, planfile, sweep
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.planmatch import (
    ATTACHED,
    GONE,
    NOT_ORPHANED,
    OWNER_CHANGED,
    RENAMED,
)

from helpers import ROOT, Emulator, run_playbook, save_figures, task_results
from properties import EXPLORE, env_examples
from test_gpu import ensure, live, mutations, vms

LOC, CS, OTHER_LOC = "be-gen-1", "cs-demo", "nl-ams-1"
PROFILE = "nvidia-a100-40c"
EXAMPLES = env_examples("CAPVCO_RECLAIM_PLAN_EXAMPLES", 6)
SEED = int(os.environ.get("CAPVCO_RECLAIM_PLAN_SEED", "2026"))
RANDOM = EXPLORE or os.environ.get("CAPVCO_RECLAIM_PLAN_RANDOM") == "1"
FIGURES = {"examples": 0, "planned": 0, "released": 0, "skipped": {}, "operations": {}, "plans": {}}
PLAYBOOKS = os.path.join(ROOT, "playbooks")


def seed_vgpu(emu, name, vm_id=None):
    body = {"location": LOC, "gpu_id": PROFILE, "vgpu_name": name}
    if vm_id is not None:
        body["vm_id"] = vm_id
    return emu.admin("POST", "/seed-vgpu", body)["vgpu_id"]


def rename(emu, vgpu_id, name):
    """A rename the platform's API cannot make (the portal, another tool): the emulator's store, written directly."""
    db = sqlite3.connect(os.path.join(emu.state_dir, "state.db"), timeout=30)
    try:
        db.execute("UPDATE vgpus SET vgpu_name=? WHERE vgpu_id=?", (name, vgpu_id))
        db.commit()
    finally:
        db.close()


def rows(emu):
    """Every reservation as stored: ``{vgpu_id: (name, vm_id, soft_deleted_at, deleted_at)}``."""
    return {
        r["vgpu_id"]: (r["vgpu_name"], r["vm_id"], r["soft_deleted_at"], r["deleted_at"])
        for r in emu.snapshot()["vgpus"]
    }


def vm_rows(emu):
    return sorted(
        (v["vm_id"], v["cloudspace_id"], v["name"], v["description"], v["deleted_at"]) for v in emu.snapshot()["vms"]
    )


def plan_orphans(emu, path, cluster=None, grace_period=0, permanently=True):
    with emu.client() as client:
        return sweep.reclaim(
            client,
            location=LOC,
            scope="orphans",
            cluster=cluster,
            grace_period=grace_period,
            permanently=permanently,
            plan_file=str(path),
            check_mode=True,
        )


def apply(emu, path, check=False, location=LOC, **kw):
    with emu.client(backoff=0.01) as client:
        return sweep.reclaim(client, location=location, plan=str(path), check_mode=check, **kw)


def orphaned(emu, *machines, cluster="c1", created=None):
    """An unattached reservation per machine (which has no VM), named as ``cluster``'s, made two hours ago."""
    created = int(time.time()) - 7200 if created is None else created
    return [seed_vgpu(emu, naming.encode(cluster, m, 0, created=created)) for m in machines]


# --- the property ---------------------------------------------------------------------------------------------

#: What happens between the plan and the apply.
OPS = ("create", "attach", "detach", "release", "rename", "revive", "delete_vm")
#: The plans drawn: (scope, cluster).
KINDS = (("orphans", None), ("orphans", "c1"), ("cluster", "c1"))


class World:
    """One example's emulator and what it holds, and the interleaved operations on it."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="capvco-reclaim-plan-")
        self.emu = Emulator(os.path.join(self.dir, "state")).start()
        self.made = 0

    def close(self):
        self.emu.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def populate(self):
        """Live machines of c1 and c2 with reservations, one VM made by hand, orphans of both clusters (one too young
        for a grace period), hand-made reservations and a look-alike name."""
        self.vm = {}
        for cluster, names in (("c1", ("c1-a", "c1-b")), ("c2", ("c2-a",)), (None, ("hand-vm",))):
            for name, vm_id in zip(names, vms(self.emu, *names, cluster=cluster), strict=True):
                self.vm[name] = vm_id
        old = int(time.time()) - 7200
        for cluster, machine, slot in (("c1", "c1-a", 0), ("c1", "c1-a", 1), ("c1", "c1-b", 0), ("c2", "c2-a", 0)):
            seed_vgpu(self.emu, naming.encode(cluster, machine, slot, created=old), self.vm[machine])
        seed_vgpu(self.emu, naming.encode("c1", "c1-b", 1, created=old))  # the cluster's, detached
        orphaned(self.emu, "c1-gone0", "c1-gone1", "c1-gone2")
        orphaned(self.emu, "c2-gone0", cluster="c2")
        orphaned(self.emu, "c1-young", created=int(time.time()))
        seed_vgpu(self.emu, "hand-made-by-ops")
        seed_vgpu(self.emu, "capvco.c1.c1-gone0.00")  # looks like ours, is not

    # the operations: each picks its target from ``pick`` (an index) among what it can act on
    def live(self):
        return {i: r for i, r in rows(self.emu).items() if r[3] is None}

    def vm_names(self):
        with self.emu.client() as client:
            return {v["name"]: v["vm_id"] for v in client.vms(CS)}

    @staticmethod
    def target(candidates, planned, pick, bias):
        """One of ``candidates`` (ids in the order they were made, so that a seed replays the same choices): a
        planned one two times in three, when there is one."""
        preferred = [c for c in candidates if c in planned]
        pool = preferred if preferred and bias % 3 else candidates
        return pool[pick % len(pool)] if pool else None

    def op(self, kind, pick, bias, planned):
        FIGURES["operations"][kind] = FIGURES["operations"].get(kind, 0) + 1
        live = self.live()
        vms_now = self.vm_names()
        with self.emu.client(backoff=0.01) as client:
            getattr(self, "op_" + kind)(client, live, vms_now, pick, bias, planned)

    def op_create(self, _client, _live, vms_now, pick, _bias, _planned):
        self.create(pick, vms_now)

    def op_attach(self, client, live, vms_now, pick, bias, planned):
        free = [i for i, r in live.items() if r[1] is None and r[2] is None]
        vgpu = self.target(free, planned, pick, bias)
        if vgpu and vms_now:
            names = sorted(vms_now)
            client.attach_vgpu(CS, vms_now[names[bias % len(names)]], vgpu)

    def op_detach(self, client, live, _vms_now, pick, bias, planned):
        vgpu = self.target([i for i, r in live.items() if r[1] is not None], planned, pick, bias)
        if vgpu:
            client.detach_vgpu(CS, live[vgpu][1], vgpu)

    def op_release(self, client, live, _vms_now, pick, bias, planned):
        vgpu = self.target([i for i, r in live.items() if r[2] is None], planned, pick, bias)
        if vgpu:
            client.delete_vgpu(LOC, vgpu, detach=True, permanently=bool(bias % 2))

    def op_rename(self, _client, live, _vms_now, pick, bias, planned):
        vgpu = self.target(list(live), planned, pick, bias)
        if vgpu:
            rename(self.emu, vgpu, self.new_name(live[vgpu][0], bias))

    def op_revive(self, _client, _live, vms_now, pick, bias, _planned):
        """A gone machine's VM made again: by its cluster, or by hand (either way, a VM of its name exists)."""
        gone = sorted({"c1-gone0", "c1-gone1", "c1-gone2", "c2-gone0"} - set(vms_now))
        if gone:
            name = gone[pick % len(gone)]
            vms(self.emu, name, cluster=name.split("-")[0] if bias % 2 else None)

    def op_delete_vm(self, client, _live, vms_now, pick, _bias, _planned):
        names = sorted(vms_now)
        if names:
            client.delete_vm(CS, vms_now[names[pick % len(names)]], detach_gpu=True)

    def create(self, pick, vms_now):
        """A reservation made after the plan: an orphan's, a live machine's, or a hand-made one."""
        self.made += 1
        old = int(time.time()) - 7200
        choice = pick % 3
        if choice == 0:
            seed_vgpu(self.emu, naming.encode("c1", "c1-gone%d" % (pick % 3), 10 + self.made, created=old))
        elif choice == 1 and "c1-a" in vms_now:
            seed_vgpu(self.emu, naming.encode("c1", "c1-a", 10 + self.made, created=old), vms_now["c1-a"])
        else:
            seed_vgpu(self.emu, "hand-made-%d" % self.made)

    @staticmethod
    def new_name(name, bias):
        owner = naming.decode(name)
        if owner is None or bias % 3 == 0:
            return "renamed-by-hand-%d" % bias  # not ours
        if bias % 3 == 1:  # the same owner, another slot
            return naming.encode(owner.cluster, owner.machine, (owner.slot + 50) % 100, created=owner.created)
        return naming.encode("c2" if owner.cluster == "c1" else "c1", "other-m", owner.slot, created=owner.created)


def expected(plan, before, machines):
    """The model: ``{vgpu_id: None (released) or the reason it is skipped}`` for every entry of the plan, from the
    stored reservations ``before`` the apply and the names of the location's VMs then."""
    scope = plan["scope"]
    out = {}
    for e in plan["entries"]:
        row = before.get(e["vgpu_id"])
        if row is None or row[3] is not None or (row[2] is not None and not scope["permanently"]):
            out[e["vgpu_id"]] = GONE
        elif row[0] != e["vgpu_name"]:
            owner = naming.decode(row[0])
            same = owner is not None and (owner.cluster, owner.machine) == (e["cluster"], e["machine"])
            out[e["vgpu_id"]] = RENAMED if owner is None or same else OWNER_CHANGED
        elif row[1] is not None and row[1] != e["vm_id"]:
            out[e["vgpu_id"]] = ATTACHED
        elif scope["kind"] == "orphans" and e["machine"] in machines:
            out[e["vgpu_id"]] = NOT_ORPHANED
        else:
            out[e["vgpu_id"]] = None
    return out


def make_plan(world, path, kind, cluster, permanently, grace_period):
    if kind == "orphans":
        return plan_orphans(world.emu, path, cluster, grace_period, permanently)
    with world.emu.client() as client:
        return sweep.reclaim(
            client, location=LOC, scope="cluster", cluster=cluster, plan_file=str(path), check_mode=True
        )


def check_apply(world, path, plan, interleaving):
    """Apply in check mode, then for real, then again, against the model."""
    before = rows(world.emu)
    vms_before = vm_rows(world.emu)
    machines = {v[2] for v in vms_before if v[4] is None}
    model = expected(plan, before, machines)
    want = {i for i, why in model.items() if why is None}
    dry = apply(world.emu, path, check=True)
    assert {r["vgpu_id"] for r in dry["released"]} == want, (interleaving, model, dry)
    assert rows(world.emu) == before, "check mode released something"
    got = apply(world.emu, path)
    released = {r["vgpu_id"] for r in got["released"]}
    assert released == want, (interleaving, model, got)
    assert {s["vgpu_id"]: s["reason"] for s in got["not_released"]} == {
        i: why for i, why in model.items() if why is not None
    }, (interleaving, got["not_released"])
    after = rows(world.emu)
    for vgpu_id, row in before.items():
        if vgpu_id in want:  # released as the plan says: permanently, or into the recycle bin
            assert after.get(vgpu_id, (None, None, None, 1))[3 if plan["scope"]["permanently"] else 2] is not None
            assert after[vgpu_id][1] is None
        else:
            assert after[vgpu_id] == row, ("changed, but not released by the plan", vgpu_id, interleaving)
    assert set(after) == set(before), "nothing was made"
    assert vm_rows(world.emu) == vms_before, "a VM changed"
    again = apply(world.emu, path)
    assert again["released"] == [] and not again["changed"]
    assert {s["reason"] for s in again["not_released"] if s["vgpu_id"] in want} <= {GONE}
    assert rows(world.emu) == after
    FIGURES["released"] += len(released)
    for s in got["not_released"]:
        FIGURES["skipped"][s["reason"]] = FIGURES["skipped"].get(s["reason"], 0) + 1


@pytest.fixture
def figures():
    started = time.monotonic()
    yield FIGURES
    FIGURES["seconds"] = round(time.monotonic() - started, 1)
    FIGURES["seed"] = "random" if RANDOM else SEED
    save_figures("reclaim-plan.json", FIGURES, "reclaim plan")


def _property(data):
    """One example: a world, a plan, an interleaving, the apply against the model."""
    FIGURES["examples"] += 1
    kind, cluster = data.draw(st.sampled_from(KINDS), label="plan")
    permanently = data.draw(st.booleans(), label="permanently") if kind == "orphans" else True
    grace_period = data.draw(st.sampled_from([0, 900]), label="grace_period")
    interleaving = data.draw(
        st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 99), st.integers(0, 99)), min_size=3, max_size=10),
        label="interleaving",
    )
    key = "%s/%s" % (kind, cluster or "all")
    FIGURES["plans"][key] = FIGURES["plans"].get(key, 0) + 1
    world = World()
    try:
        world.populate()
        before = rows(world.emu)
        path = os.path.join(world.dir, "plan.json")
        made = make_plan(world, path, kind, cluster, permanently, grace_period)
        assert rows(world.emu) == before, "writing a plan changed the platform"
        with open(path, encoding="utf-8") as fh:
            plan = json.load(fh)
        assert plan["digest"] == made["reclaim_plan"]["digest"]
        planned = {e["vgpu_id"] for e in plan["entries"]}
        assert planned == {r["vgpu_id"] for r in made["released"]}
        FIGURES["planned"] += len(planned)
        for op, pick, bias in interleaving:
            world.op(op, pick, bias, planned)
        world.emu.quiesce()
        check_apply(world, path, plan, interleaving)
    finally:
        world.close()


def test_a_reviewed_reclaim_releases_exactly_the_plan_entries_that_still_match(figures):
    config = settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=False,
        phases=[Phase.explicit, Phase.generate],  # each example starts an emulator: report a failure, unshrunk
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    prop = given(st.data())(_property)
    prop = config(prop)
    if not RANDOM:
        prop = seed(SEED)(prop)
    prop()
    assert FIGURES["examples"] >= EXAMPLES


# --- the plain tests ------------------------------------------------------------------------------------------


def test_gpu_orphans_plan_review_apply_and_apply_again(emulator, tmp_path):
    """The playbook: -e plan_file writes the plan (0600, nothing released, exit 0), --check -e reclaim_plan says what
    it would do, -e reclaim_plan releases the plan only (an orphan made since stays), and again releases nothing."""
    vms(emulator, "c1-w0", "c1-w1")
    ensure(emulator, machines=["c1-w0", "c1-w1"], count=1)
    with emulator.client() as client:
        by_name = {v["name"]: v["vm_id"] for v in client.vms(CS)}
        client.delete_vm(CS, by_name["c1-w0"], detach_gpu=True)
    playbook = os.path.join(PLAYBOOKS, "gpu_orphans.yml")
    plan_path = tmp_path / "orphans-plan.json"
    base = {"location": LOC, "grace_period": 0}
    emulator.reset_stats()
    rc, out, data = run_playbook(playbook, emulator, extra_vars=dict(base, plan_file=str(plan_path)))
    assert rc == 0, out[-3000:]
    assert mutations(emulator) == 0 and len(live(emulator)) == 2
    assert stat.S_IMODE(os.stat(plan_path).st_mode) == 0o600
    plan = json.loads(plan_path.read_text())
    (entry,) = plan["entries"]
    assert entry["machine"] == "c1-w0" and entry["cluster"] == "c1" and entry["gpu_id"].startswith("nvidia-a100")
    assert entry["cost"]["currency"] == "EUR" and entry["cost"]["per_hour"] == pytest.approx(1.0)
    assert plan["scope"] == {
        "kind": "orphans",
        "location": LOC,
        "cluster": None,
        "grace_period": 0,
        "permanently": True,
    }
    assert plan["digest"] == plandoc.digest(plan["scope"], plan["entries"])
    report = task_results(data, "Report every reservation that escaped")[0]["msg"]
    assert report[-1].startswith("plan written to %s: 1 reservation(s)" % plan_path), report
    # writing it again over the reviewed file is refused
    rc, out, data = run_playbook(playbook, emulator, extra_vars=dict(base, plan_file=str(plan_path)))
    assert rc != 0 and "exists: a plan is never overwritten" in out, out[-2000:]
    # an orphan made after the review is not in the plan
    with emulator.client() as client:
        client.delete_vm(CS, by_name["c1-w1"], detach_gpu=True)
    apply_vars = dict(base, reclaim_plan=str(plan_path))
    # a plan of every cluster's orphans, applied with -e cluster: refused (the check below is that cluster's only)
    rc, out, data = run_playbook(playbook, emulator, extra_vars=dict(apply_vars, cluster="zz"))
    assert rc != 0 and "is a plan of every cluster's orphans, not of cluster 'zz'" in out, out[-2000:]
    assert len(live(emulator)) == 2
    rc, out, data = run_playbook(playbook, emulator, extra_vars=apply_vars, check=True)
    assert rc != 0 and len(live(emulator)) == 2
    report = task_results(data, "Report every reservation that escaped")[0]["msg"]
    assert "would release 1, skip 0 (check mode, nothing was released)" in report[-1], report
    rc, out, data = run_playbook(playbook, emulator, extra_vars=apply_vars)
    assert rc != 0, "the orphan made since the plan is still there, and the check still fails for it"
    (left,) = live(emulator)
    assert naming.decode(left["vgpu_name"]).machine == "c1-w1"
    report = task_results(data, "Report every reservation that escaped")[0]["msg"]
    assert "released now 1" in report[-1], report
    rc, out, data = run_playbook(playbook, emulator, extra_vars=apply_vars)
    report = task_results(data, "Report every reservation that escaped")[0]["msg"]
    assert "released now 0" in report[-2] and report[-1].startswith("skipped %s: gone" % entry["vgpu_name"]), report
    assert len(live(emulator)) == 1
    # one way at a time
    rc, out, data = run_playbook(playbook, emulator, extra_vars=dict(apply_vars, reclaim=True))
    assert rc != 0 and "give one" in out and len(live(emulator)) == 1, out[-2000:]


def unknown_cost(plan):
    """What a plan says of its cost when the price is not known: every entry's cost and the totals' null."""
    assert plan["entries"] and all(e["cost"] is None for e in plan["entries"]), plan["entries"]
    assert plan["summary"]["cost_per_hour"] is None and plan["summary"]["cost_so_far"] is None, plan["summary"]
    assert plan["summary"]["count"] == len(plan["entries"])


@pytest.mark.parametrize("vgu", [None, -730, "abc", [730]], ids=["null", "negative", "garbage", "list"])
def test_a_plan_written_while_the_price_is_unknown_says_so_never_0(emulator, tmp_path, vgu):
    """Issue 34, point 3, in the plan file: gpu_orphans --check -e plan_file with the location's vgu price null,
    negative or garbage writes every entry's cost and the plan's totals as null (unknown), never 0 or negative, and
    its report says "unknown"; the plan is applied as reviewed (an unknown cost is no reason to refuse it), and the
    saving is unknown."""
    orphaned(emulator, "c1-w0", "c1-w1")
    set_price(emulator, vgu)
    playbook = os.path.join(PLAYBOOKS, "gpu_orphans.yml")
    plan_path = tmp_path / "orphans-plan.json"
    base = {"location": LOC, "grace_period": 0}
    rc, out, data = run_playbook(playbook, emulator, extra_vars=dict(base, plan_file=str(plan_path)), check=True)
    assert rc == 0, out[-3000:]
    assert len(live(emulator)) == 2
    plan = json.loads(plan_path.read_text())
    unknown_cost(plan)
    assert sorted(e["machine"] for e in plan["entries"]) == ["c1-w0", "c1-w1"]
    assert '"per_hour": 0' not in plan_path.read_text() and '"cost_per_hour": 0' not in plan_path.read_text()
    report = task_results(data, "Report every reservation that escaped")[0]["msg"]
    assert report[-1].startswith("plan written to %s: 2 reservation(s) to release (unknown " % plan_path), report
    assert "costing unknown per hour, unknown so far" in " ".join(report[:-1]), report
    rc, out, data = run_playbook(playbook, emulator, extra_vars=dict(base, reclaim_plan=str(plan_path)))
    assert rc == 0, out[-3000:]
    assert live(emulator) == []
    report = task_results(data, "Report every reservation that escaped")[0]["msg"]
    assert "released now 2 (saving unknown " in report[-1], report


def test_a_plan_written_while_the_price_list_has_no_vgu_price_says_the_cost_is_unknown(emulator, tmp_path):
    """The same, with no vgu price in the platform's answer at all (the emulator's store holds none, and its answer
    then has none), through the core that vgpu_reclaim's plan_file runs."""
    set_price(emulator, None, drop=True)
    orphaned(emulator, "c1-w0", "c1-w1")
    path = tmp_path / "plan.json"
    result = plan_orphans(emulator, path)
    unknown_cost(json.loads(path.read_text()))
    assert result["reclaim_plan"]["summary"]["cost_per_hour"] is None and len(live(emulator)) == 2
    set_price(emulator, 730.0)
    known = tmp_path / "known.json"
    plan_orphans(emulator, known)
    costs = [e["cost"] for e in json.loads(known.read_text())["entries"]]
    assert [c["per_hour"] for c in costs] == [1.0, 1.0], "with the price known, the same plan has its cost"


def test_cluster_delete_check_writes_a_plan_that_is_reviewed_then_applied(emulator, tmp_path):
    """cluster_delete --check -e plan_file: the teardown's releases, as a cluster plan; without --check it is refused
    and nothing is deleted; applied by vgpu_reclaim plan=, it releases what is still the cluster's."""
    spec = {"cluster": {"name": "rv", "location": LOC, "cloudspace": "capvco-demo"}}
    vms(emulator, "rv-g0", "rv-g1", cluster="rv")
    vms(emulator, "other-0", cluster="other")
    ensure(emulator, machines=["rv-g0", "rv-g1"], cluster="rv", count=1)
    ensure(emulator, machines=["other-0"], cluster="other", count=1)
    plan_path = tmp_path / "teardown.json"
    playbook = os.path.join(PLAYBOOKS, "cluster_delete.yml")
    emulator.reset_stats()
    rc, out, data = run_playbook(playbook, emulator, extra_vars=dict(spec, plan_file=str(plan_path)))
    assert rc != 0 and "check mode only" in out and not plan_path.exists(), out[-2000:]
    assert mutations(emulator) == 0
    rc, out, data = run_playbook(playbook, emulator, extra_vars=dict(spec, plan_file=str(plan_path)), check=True)
    assert rc == 0, out[-3000:]
    assert mutations(emulator) == 0
    said = task_results(data, "Say where the reclaim plan was written")[0]["msg"]
    assert said.startswith("reclaim plan written to %s: 2 reservation(s) of cluster rv" % plan_path), said
    # the review: the plan lists the teardown's releases, each with its owner, profile and cost
    plan = json.loads(plan_path.read_text())
    deleted = task_results(
        data, "Delete every machine the cluster owns, release every reservation it owns, then its own cloudspace"
    )[0]
    assert sorted(e["vgpu_name"] for e in plan["entries"]) == deleted["released"]
    assert plan["scope"]["kind"] == "cluster" and plan["scope"]["cluster"] == "rv"
    assert {e["machine"] for e in plan["entries"]} == {"rv-g0", "rv-g1"}
    assert all(e["vm_name"] in ("rv-g0", "rv-g1") and e["status"] == "ATTACHED" for e in plan["entries"])
    assert plan["made_by"] == "whitesky.capvco.cluster"
    # since the review, one was released by hand: the apply skips it as gone, releases the other, nothing else
    first = plan["entries"][0]["vgpu_id"]
    with emulator.client() as client:
        client.delete_vgpu(LOC, first, detach=True, permanently=True)
    got = apply(emulator, plan_path, scope="cluster", cluster="rv")
    assert [r["vgpu_id"] for r in got["released"]] == [plan["entries"][1]["vgpu_id"]]
    assert [(s["vgpu_id"], s["reason"]) for s in got["not_released"]] == [(first, GONE)]
    assert live(emulator, "rv") == [] and len(live(emulator, "other")) == 1
    with pytest.raises(InputError, match="not of cluster 'other'"):
        apply(emulator, plan_path, cluster="other")
    with pytest.raises(InputError, match="scope cluster, not orphans"):
        apply(emulator, plan_path, scope="orphans")
    # machine_delete's plan is not a plan of the cluster
    with emulator.client() as client, pytest.raises(InputError, match="whole cluster's teardown"):
        cluster_core.run(
            client, spec=spec, state="absent", machine="rv-g0", plan_file=str(tmp_path / "m.json"), check_mode=True
        )


@pytest.mark.parametrize(
    "tamper,message",
    [
        (lambda p: p["entries"][0].update(vgpu_id="vgpu-someone-else"), "was changed since it was written"),
        (lambda p: p["entries"].append(dict(p["entries"][0], vgpu_id="vgpu-x")), "was changed since it was written"),
        (lambda p: p["scope"].update(grace_period=5), "was changed since it was written"),
        (lambda p: p.update(digest="sha256:" + "0" * 64), "was changed since it was written"),
        (lambda p: p["summary"].update(count=0), "its summary is not its entries'"),
        (lambda p: p.update(format="something-else"), "is not a plan"),
        (lambda p: p.update(version=2), "is a plan of version 2"),
    ],
)
def test_a_changed_plan_is_refused_before_any_write(emulator, tmp_path, tamper, message):
    orphaned(emulator, "c1-gone")
    path = tmp_path / "plan.json"
    plan_orphans(emulator, path)
    doc = json.loads(path.read_text())
    tamper(doc)
    path.write_text(json.dumps(doc))
    emulator.reset_stats()
    with pytest.raises(InputError) as err:
        apply(emulator, path)
    assert str(path) in str(err.value) and message in str(err.value) and "nothing was released" in str(err.value)
    assert emulator.stats()["operations"] == {}, "refused before anything was read"
    assert len(live(emulator)) == 1


def test_a_forged_plan_with_a_good_digest_still_names_only_ours(emulator, tmp_path):
    """The digest is no signature: a plan rewritten whole, with its digest computed again, to release a hand-made
    reservation (or another cluster's, under a plan of c1) is refused by the entries' own checks."""
    (ours,) = orphaned(emulator, "c1-gone")
    theirs = seed_vgpu(emulator, "hand-made-by-ops")
    path = tmp_path / "plan.json"
    plan_orphans(emulator, path, cluster="c1")
    doc = json.loads(path.read_text())
    forged = dict(doc["entries"][0], vgpu_id=theirs, vgpu_name="hand-made-by-ops")
    doc["entries"] = [doc["entries"][0], forged]
    doc["summary"] = plandoc.summary(doc["entries"])
    doc["digest"] = plandoc.digest(doc["scope"], doc["entries"])
    forged_path = tmp_path / "forged.json"
    forged_path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="which is not this collection's name"):
        apply(emulator, forged_path)
    created = doc["entries"][0]["created"]
    other = naming.encode("c2", "c2-gone", 0, created=created)
    doc["entries"] = [
        doc["entries"][0],
        dict(doc["entries"][0], vgpu_id=theirs, vgpu_name=other, cluster="c2", machine="c2-gone"),
    ]
    doc["summary"] = plandoc.summary(doc["entries"])
    doc["digest"] = plandoc.digest(doc["scope"], doc["entries"])
    forged_path.unlink()
    forged_path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="not cluster 'c1''s"):
        apply(emulator, forged_path)
    assert {r["vgpu_id"] for r in emulator.ledger()["reservations"] if r["deleted_at"] is None} == {ours, theirs}


def test_wrong_location_unreadable_and_not_json_are_refused_naming_the_file(emulator, tmp_path):
    orphaned(emulator, "c1-gone")
    path = tmp_path / "plan.json"
    plan_orphans(emulator, path)
    emulator.reset_stats()
    with pytest.raises(InputError, match="was made for location 'be-gen-1', not 'nl-ams-1'") as err:
        apply(emulator, path, location=OTHER_LOC)
    assert str(path) in str(err.value)
    missing = tmp_path / "nowhere.json"
    with pytest.raises(InputError, match="%s cannot be read" % missing):
        apply(emulator, missing)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    with pytest.raises(InputError, match="%s is not a plan: it is not JSON" % garbage):
        apply(emulator, garbage)
    assert emulator.stats()["operations"] == {} and len(live(emulator)) == 1
    # a plan is written in check mode only, never over a file, and in a folder that exists
    with emulator.client() as client:
        for kwargs, words in (
            (dict(plan_file=str(tmp_path / "new.json"), check_mode=False), "check mode only"),
            (dict(plan_file=str(path), check_mode=True), "exists: a plan is never overwritten"),
            (dict(plan_file=str(tmp_path / "no" / "p.json"), check_mode=True), "does not exist"),
        ):
            with pytest.raises(InputError, match=words):
                sweep.reclaim(client, location=LOC, scope="orphans", grace_period=0, **kwargs)
    assert not (tmp_path / "new.json").exists()
    assert emulator.stats()["operations"] == {}, "refused before anything was read"


def test_apply_twice_and_the_skip_reasons(emulator, tmp_path):
    """Each reason, one reservation each: released since, renamed, re-owned, attached, machine back; the rest
    released; then again, nothing."""
    ids = orphaned(emulator, "c1-g0", "c1-g1", "c1-g2", "c1-g3", "c1-g4", "c1-g5")
    path = tmp_path / "plan.json"
    assert len(plan_orphans(emulator, path)["released"]) == 6
    made_since = orphaned(emulator, "c1-g6")
    old = int(time.time()) - 7200
    (hand_vm,) = vms(emulator, "hand-vm", cluster=None)
    with emulator.client() as client:
        client.delete_vgpu(LOC, ids[0], detach=True, permanently=True)
        rename(emulator, ids[1], naming.encode("c1", "c1-g1", 7, created=old))
        rename(emulator, ids[2], naming.encode("c2", "c2-x", 0, created=old))
        client.attach_vgpu(CS, hand_vm, ids[3])
    vms(emulator, "c1-g4")
    got = apply(emulator, path)
    assert [r["vgpu_id"] for r in got["released"]] == [ids[5]]
    reasons = {s["vgpu_id"]: (s["reason"], s["message"]) for s in got["not_released"]}
    assert reasons[ids[0]] == (GONE, "no longer listed: released already")
    assert reasons[ids[1]][0] == RENAMED
    assert reasons[ids[2]][0] == OWNER_CHANGED and "'c2'" in reasons[ids[2]][1]
    assert reasons[ids[3]] == (ATTACHED, "attached now to VM 'hand-vm' (%s)" % hand_vm)
    assert reasons[ids[4]] == (NOT_ORPHANED, "no longer orphaned: machine 'c1-g4' exists again")
    still = {r["vgpu_id"] for r in emulator.ledger()["reservations"] if r["deleted_at"] is None}
    assert still == set(ids[1:5]) | set(made_since)
    again = apply(emulator, path)
    assert again["released"] == [] and not again["changed"]
    assert {s["vgpu_id"]: s["reason"] for s in again["not_released"]}[ids[5]] == GONE


def test_the_apply_goes_through_the_release_path_lost_answers_included(emulator, tmp_path):
    """The release's answer is lost after it committed: the apply resolves it as the sweeps do (gone is done), and
    the next apply skips it as gone; the entry whose machine came back is skipped both times."""
    ids = orphaned(emulator, "c1-g0", "c1-g1")
    path = tmp_path / "plan.json"
    plan_orphans(emulator, path)
    vms(emulator, "c1-g1")
    emulator.faults(drop_after_commit={"deleteVGPU": 1})
    got = apply(emulator, path)
    assert emulator.stats()["faults"]["dropped"] == 1
    emulator.faults()
    assert [r["vgpu_id"] for r in got["released"]] == [ids[0]]
    assert {s["vgpu_id"]: s["reason"] for s in got["not_released"]} == {ids[1]: NOT_ORPHANED}
    assert [r["vgpu_id"] for r in live(emulator)] == [ids[1]]
    again = apply(emulator, path)
    assert {s["vgpu_id"]: s["reason"] for s in again["not_released"]} == {ids[0]: GONE, ids[1]: NOT_ORPHANED}


def test_a_plan_that_releases_one_and_skips_one_is_changed_never_skipping(emulator, tmp_path):
    """The result of a reviewed reclaim names what it did not release ``not_released``: ``skipped`` is Ansible's
    flag of a task that did not run (the default callback printed ``skipping:``, and ``r is skipped`` was true
    while a reservation was released)."""
    spec = {"cluster": {"name": "rv", "location": LOC, "cloudspace": "capvco-demo"}}
    vms(emulator, "rv-g0", "rv-g1", cluster="rv")
    ensure(emulator, machines=["rv-g0", "rv-g1"], cluster="rv", count=1)
    plan_path = tmp_path / "teardown.json"
    rc, out, _data = run_playbook(
        os.path.join(PLAYBOOKS, "cluster_delete.yml"),
        emulator,
        extra_vars=dict(spec, plan_file=str(plan_path)),
        check=True,
    )
    assert rc == 0, out[-3000:]
    first = json.loads(plan_path.read_text())["entries"][0]["vgpu_id"]
    with emulator.client() as client:
        client.delete_vgpu(LOC, first, detach=True, permanently=True)
    play = tmp_path / "reclaim.yml"
    play.write_text(
        """- hosts: localhost
  gather_facts: false
  tasks:
    - name: Release the plan
      whitesky.capvco.vgpu_reclaim:
        location: %s
        scope: cluster
        cluster: rv
        plan: %s
      register: r
    - name: What Ansible made of it
      ansible.builtin.assert:
        that: [r is changed, r is not skipped, r.released | length == 1, r.not_released | length == 1]
"""
        % (LOC, plan_path)
    )
    rc, out, _data = run_playbook(str(play), emulator, env={"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default"})
    assert rc == 0 and "changed: [localhost]" in out and "skipping:" not in out, out[-3000:]
    assert live(emulator, "rv") == []


def test_no_module_returns_a_key_that_ansible_reserves():
    """Every module's RETURN keys avoid the keys of a task result that Ansible reads itself."""
    import glob
    import re

    import yaml

    reserved = {
        "changed",
        "failed",
        "skipped",
        "msg",
        "rc",
        "results",
        "invocation",
        "warnings",
        "deprecations",
        "diff",
        "ansible_facts",
        "exception",
        "stdout",
        "stderr",
        "stdout_lines",
        "stderr_lines",
        "skip_reason",
        "unreachable",
        "module_stdout",
        "module_stderr",
        "attempts",
        "backup_file",
        "checksum",
        "item",
    }
    offenders = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py"))):
        found = re.search(r'^RETURN = r?"""(.*?)"""', Path(path).read_text(encoding="utf-8"), re.S | re.M)
        if found is None:
            continue
        body = found.group(1)
        keys = set((yaml.safe_load(body) or {}).keys())
        if keys & reserved:
            offenders[os.path.basename(path)] = sorted(keys & reserved)
    assert not offenders, offenders


def _deep(n):
    return "[" * n + "]" * n


@pytest.mark.parametrize(
    "text,words",
    [
        ("[" * 100000, "nests deeper than any plan"),
        ('{"format": "x", "entries": %s}' % _deep(100000), "nests deeper than any plan"),
        ('{"format": "x", "entries": %s}' % _deep(50), "nests deeper than 6 levels"),
        ('{"a": NaN}', "NaN is not a number a plan holds"),
        ('{"a": -Infinity}', "-Infinity is not a number a plan holds"),
        ('{"a": 1e400}', "1e400 is out of range"),
    ],
    ids=["brackets", "deep-entries", "50-deep", "nan", "infinity", "1e400"],
)
def test_a_hostile_plan_is_refused_whole_naming_the_file(emulator, tmp_path, text, words):
    orphaned(emulator, "c1-gone")
    path = tmp_path / "hostile.json"
    path.write_text(text)
    emulator.reset_stats()
    with pytest.raises(InputError) as err:
        apply(emulator, path)
    assert str(path) in str(err.value) and words in str(err.value) and "nothing was released" in str(err.value)
    assert emulator.stats()["operations"] == {} and len(live(emulator)) == 1


def test_a_plan_with_a_nan_cost_or_an_infinite_created_is_refused(emulator, tmp_path):
    orphaned(emulator, "c1-gone")
    path = tmp_path / "plan.json"
    plan_orphans(emulator, path)
    for bad, words in (('"per_hour": NaN', "NaN is not a number"), ('"created": 1e400', "1e400 is out of range")):
        doc = path.read_text()
        key = bad.split(":")[0]
        text = re.sub(r"%s: [^,\n}]+" % re.escape(key), bad, doc, count=1)
        assert text != doc
        hostile = tmp_path / ("hostile-%s.json" % key.strip('"'))
        hostile.write_text(text)
        with pytest.raises(InputError, match=words):
            apply(emulator, hostile)
    assert len(live(emulator)) == 1


def test_a_plan_file_another_user_could_write_is_refused(emulator, tmp_path):
    """As ssh does with its keys: a symbolic link, a file writable by its group or by others, one owned by another
    user, or one that is not a regular file decides nothing."""
    orphaned(emulator, "c1-gone")
    path = tmp_path / "plan.json"
    plan_orphans(emulator, path)
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(InputError, match="%s is a symbolic link" % link):
        apply(emulator, link)
    for mode, who in ((0o620, "its group"), (0o602, "others"), (0o666, "others")):
        os.chmod(path, mode)
        with pytest.raises(InputError, match=r"is writable by %s \(mode %04o\)" % (who, mode)):
            apply(emulator, path)
    os.chmod(path, 0o600)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)
        with pytest.raises(InputError, match=r"is owned by uid 65534, not by the user applying it \(uid 0\)"):
            apply(emulator, path)
        os.chown(path, 0, 0)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is not a regular file"):
        apply(emulator, fifo)
    assert len(live(emulator)) == 1
    got = apply(emulator, path)  # the file as written: applied
    assert len(got["released"]) == 1 and live(emulator) == []


def test_a_teardown_plan_of_a_cluster_with_live_machines_says_so_before_it_is_applied(emulator, tmp_path):
    """A plan of scope cluster for a live cluster (a forged one, or one made long before) takes the vGPUs of
    running machines: check mode and the run say so, naming them."""
    spec = {"cluster": {"name": "rv", "location": LOC, "cloudspace": "capvco-demo"}}
    vms(emulator, "rv-g0", "rv-g1", cluster="rv")
    ensure(emulator, machines=["rv-g0", "rv-g1"], cluster="rv", count=1)
    plan_path = tmp_path / "teardown.json"
    with emulator.client() as client:
        cluster_core.run(client, spec=spec, state="absent", plan_file=str(plan_path), check_mode=True)
    got = apply(emulator, plan_path, check=True, scope="cluster", cluster="rv")
    (warning,) = got["warnings"]
    assert "is a teardown of cluster 'rv', and 2 of its reservations are attached to machines that exist" in warning
    assert "rv-g0, rv-g1" in warning and "check mode: nothing was released" in warning
    assert len(live(emulator, "rv")) == 2


def seed_orphan(emulator, machine, created):
    name = naming.encode("c1", machine, 0, created)
    emulator.admin("POST", "/seed-vgpu", {"location": LOC, "gpu_id": PROFILE, "vgpu_name": name})
    return name


def test_a_plan_says_which_orphans_it_left_out_for_the_grace_period_and_when_they_become_eligible(emulator, tmp_path):
    """Issue 46, point 14: a plan made with the default grace period left a young orphan out without a word
    (``0 reservation(s) to release`` under a report that listed 1)."""
    now = int(time.time())
    old = seed_orphan(emulator, "gone-old", now - 7200)
    young = seed_orphan(emulator, "gone-new", now - 60)
    playbook = os.path.join(PLAYBOOKS, "gpu_orphans.yml")
    plan_path = tmp_path / "orphans.json"
    rc, out, data = run_playbook(playbook, emulator, extra_vars={"location": LOC, "plan_file": str(plan_path)})
    assert rc == 0, out[-3000:]
    plan = json.loads(plan_path.read_text())
    assert [e["vgpu_name"] for e in plan["entries"]] == [old]
    eligible = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 60 + 900))
    assert plan["left_out"] == {
        "count": 1,
        "grace_period": 900,
        "first_eligible_at": eligible,
        "last_eligible_at": eligible,
        "reservations": [{"vgpu_id": plan["left_out"]["reservations"][0]["vgpu_id"], "vgpu_name": young,
                          "eligible_at": eligible}],
    }  # fmt: skip
    report = task_results(data, "Report every reservation that escaped")[0]["msg"]
    assert report[-1].startswith("plan written to %s: 1 reservation(s) to release" % plan_path), report
    assert report[-1].endswith(
        "Left out: 1 orphan(s) within the grace period of 900 s, eligible from %s: plan again then, or with a "
        "shorter -e grace_period" % eligible
    ), report
    # the plan's digest is its entries' and scope's: what it says of the others is for the reviewer only
    assert plan["digest"] == plandoc.digest(plan["scope"], plan["entries"])
    assert planfile.read(str(plan_path), LOC)["entries"] == plan["entries"]
    # the module says the same
    (planned,) = task_results(data, "Write the orphans that would be released to a plan file, to review")
    assert planned["reclaim_plan"]["left_out"] == plan["left_out"]


def test_check_mode_of_a_release_succeeds_when_nothing_would_escape_after_it(emulator, tmp_path):
    """Issue 46, point 14: ``reclaim_plan`` in check mode said ``would release 1``, then failed the play for the
    orphan it would release; it fails only for what would still escape once the release was done, as the real run
    does."""
    now = int(time.time())
    seed_orphan(emulator, "gone-a", now - 7200)
    playbook = os.path.join(PLAYBOOKS, "gpu_orphans.yml")
    plan_path = tmp_path / "orphans.json"
    rc, out, _ = run_playbook(playbook, emulator, extra_vars={"location": LOC, "plan_file": str(plan_path)})
    assert rc == 0, out[-3000:]
    before = emulator.snapshot()
    for extra in ({"reclaim_plan": str(plan_path)}, {"reclaim": True}):
        rc, out, data = run_playbook(playbook, emulator, extra_vars=dict(extra, location=LOC), check=True)
        assert rc == 0, out[-3000:]
        (verdict,) = task_results(data, "Fail while any reservation escapes")
        assert verdict["msg"] == (
            "No orphaned vGPU reservation would escape: 1 would be released (check mode: nothing was released)."
        ), verdict
    assert emulator.snapshot() == before, "check mode released nothing"
    # an orphan the release would not take still fails the check run, as it fails the real one
    seed_orphan(emulator, "gone-b", now - 7200)
    rc, out, data = run_playbook(
        playbook, emulator, extra_vars={"location": LOC, "reclaim_plan": str(plan_path)}, check=True
    )
    assert rc != 0 and "1 orphaned vGPU reservation(s) would still be billed" in " ".join(out.split()), out[-3000:]
    rc, out, data = run_playbook(playbook, emulator, extra_vars={"location": LOC, "reclaim_plan": str(plan_path)})
    assert rc != 0 and "1 orphaned vGPU reservation(s) are still billed" in " ".join(out.split()), out[-3000:]
    rc, out, data = run_playbook(playbook, emulator, extra_vars={"location": LOC, "reclaim": True, "grace_period": 0})
    assert rc == 0 and emulator.ledger()["accruing"] == 0, out[-3000:]
