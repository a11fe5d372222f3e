"""Two runs of one cluster at once: never a double-billed slot, never a stranded resource, and each run says what it
did or that another run held the cluster.

Each pair starts two actors (the cores the playbooks run, each with its own client: two processes' worth of
connections) with a random offset, against the emulator with latency, waits for both, then checks the invariant:

- at most one live reservation per (cluster, machine, slot), and every VM named by the spec carries the marker;
- when the run that finished last was a converge that returned, the cluster is exactly its spec;
- when it was a teardown that returned, nothing of the cluster is left: no machine, no reservation (recycle bin
  included), no cloudspace of its name;
- a run that did not return failed saying that another run holds the cluster (nothing else is accepted).
"""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import run as cluster
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease, markers, naming
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.errors import ClusterBusy, LeaseLost
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import sweep
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import speccheck
from capvco_lab.emulator import wait_for
from capvco_lab.runs import start_playbook, stopped

from helpers import COLLECTIONS, ROOT, run_playbook

LOC = "be-gen-1"
PAIRS = int(os.environ.get("CAPVCO_PAIRS", "20"))
SEED = int(os.environ.get("CAPVCO_PAIRS_SEED", "24"))


def spec(replicas=2, name="duo"):
    return {
        "cluster": {"name": name, "location": LOC, "cloudspace": name + "-cs"},
        "control_plane": {"replicas": 1, "vcpus": 2, "memory": 2048, "image": 12},
        "pools": [
            {
                "name": "gpu",
                "replicas": replicas,
                "vcpus": 4,
                "memory": 8192,
                "image": 12,
                "gpu": {"type": "NVIDIA A100", "count": 1, "driverVersion": "550"},
            }
        ],
    }


def converge(s):
    def run(client):
        return cluster.run(client, spec=s, parallel=8)

    run.kind, run.spec = "converge", s
    return run


def teardown(s):
    def run(client):
        return cluster.run(client, spec={"cluster": s["cluster"]}, state="absent", parallel=8)

    run.kind, run.spec = "teardown", s
    return run


def orphans():
    def run(client):
        return sweep.reclaim(client, location=LOC, scope="orphans", grace_period=0)

    run.kind, run.spec = "reclaim", None
    return run


def together(emu, first, second, offset):
    """Run both actors, the second ``offset`` seconds after the first; ``[(actor, result or error, ended)]``."""
    out = [None, None]

    def go(i, actor, delay):
        if delay:
            time.sleep(delay)  # the drawn start offset of the pair, not a wait for a condition
        with emu.client(backoff=0.01, timeout=30) as client:
            try:
                got = actor(client)
            except WhiteskyError as exc:
                got = exc
        out[i] = (actor, got, time.monotonic())

    threads = [threading.Thread(target=go, args=(i, a, d)) for i, (a, d) in enumerate(((first, 0), (second, offset)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
        assert not t.is_alive(), "a run did not return within 120 s"
    return out


def live_slots(emu, name):
    """``{(machine, slot): count}`` of the cluster's reservations not permanently deleted, and how many of them are
    still billing (not permanently deleted at all: the recycle bin bills too)."""
    slots = {}
    for r in emu.ledger()["reservations"]:
        owner = naming.decode(r["vgpu_name"])
        if r["deleted_at"] is None and owner is not None and owner.cluster == name:
            key = (owner.machine, owner.slot)
            slots.setdefault(key, []).append(r)
    return slots


def cluster_state(emu, name):
    with emu.client() as client:
        spaces = [c for c in client.cloudspaces() if c["name"] == name + "-cs"]
        vms = [dict(v, cs=c["cloudspace_id"]) for c in spaces for v in client.vms(c["cloudspace_id"])]
        described = [client.get_vm(v["cs"], v["vm_id"]) for v in vms]
    return spaces, described


def check_invariant(emu, outcome, name="duo"):
    slots = live_slots(emu, name)
    doubles = {k: len(v) for k, v in slots.items() if len(v) > 1}
    assert not doubles, "two live reservations for one slot: %s" % doubles
    spaces, vms = cluster_state(emu, name)
    unmarked = [v["name"] for v in vms if not markers.machine_owned(v.get("description"), name)]
    assert not unmarked, "VMs of the cluster's cloudspace without its marker: %s" % unmarked
    for actor, got, _ended in outcome:
        if isinstance(got, Exception):
            assert isinstance(got, ClusterBusy) or "another run holds" in str(got), (
                "a %s failed for another reason than a held cluster: %s" % (actor.kind, got)
            )
    done = [(ended, actor) for actor, got, ended in outcome if not isinstance(got, Exception) and actor.spec]
    if not done:
        return
    _ended, last = max(done, key=lambda pair: pair[0])
    if last.kind == "teardown":
        assert not vms and not spaces and not slots, "a teardown returned last, yet left: %s %s %s" % (
            [v["name"] for v in vms],
            [c["cloudspace_id"] for c in spaces],
            sorted(slots),
        )
        return
    want = sorted(speccheck.check(last.spec).names)
    assert len(spaces) == 1, "one cloudspace of the cluster's name, got %d" % len(spaces)
    assert sorted(v["name"] for v in vms) == want, "a converge returned last; the machines are not its spec"
    gpu_names = [n for n in want if "-gpu-" in n]
    assert sorted(slots) == sorted((n, 0) for n in gpu_names), "one vGPU per GPU machine, got %s" % sorted(slots)
    by_id = {v["vm_id"]: v["name"] for v in vms}
    for (machine, _slot), (r,) in slots.items():
        assert r["soft_deleted_at"] is None and by_id.get(r["vm_id"]) == machine, "attached to its machine"


KINDS = {
    "create + create": lambda: (converge(spec()), converge(spec())),
    "create + delete": lambda: (converge(spec()), teardown(spec())),
    "delete + create": lambda: (teardown(spec()), converge(spec())),
    "scale up + scale down": lambda: (converge(spec(3)), converge(spec(1))),
    "create + orphan reclaim": lambda: (converge(spec()), orphans()),
}


def test_pairs_of_runs_on_one_cluster_keep_the_invariant(emulator):
    """``PAIRS`` pairs (20 in ``make test``; ``make chaos`` runs more), each kind in turn, each from a random state
    (the cluster there or not), with a random start offset; the invariant after each pair."""
    rnd = random.Random(SEED)
    emulator.faults(latency_ms=15)
    kinds = sorted(KINDS)
    tally = {}
    for i in range(PAIRS):
        kind = kinds[i % len(kinds)]
        first, second = KINDS[kind]()
        if rnd.random() < 0.5:  # the start: the cluster there, or not
            together(emulator, converge(spec()), converge(spec()), 0)
        offset = rnd.uniform(0, 0.15)
        outcome = together(emulator, first, second, offset)
        check_invariant(emulator, outcome)
        tally[kind] = tally.get(kind, 0) + 1
        waits = sum(
            1
            for _a, got, _e in outcome
            if isinstance(got, dict) and any("held by another run" in w for w in got.get("warnings", []))
        )
        tally["a run waited for the other"] = tally.get("a run waited for the other", 0) + waits
    print("pairs: %s" % tally)
    together(emulator, teardown(spec()), teardown(spec()), 0)
    check_invariant(emulator, [])
    assert not live_slots(emulator, "duo") and cluster_state(emulator, "duo") == ([], [])


def test_two_create_playbooks_at_once_never_double_bill(emulator):
    """The observed race: two ``cluster_create`` runs of one cluster, started together, both rc 0, each GPU machine
    with 2 vGPUs where the spec says 1."""
    emulator.faults(latency_ms=20)
    play = os.path.join(ROOT, "playbooks", "cluster_create.yml")
    s = spec()
    results = [None, None]

    def go(i):
        results[i] = run_playbook(play, emulator, extra_vars=s)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    for rc, out, _data in results:
        assert rc == 0, out[-3000:]
    assert emulator.ledger()["double_reservations"] == 0


def test_a_killed_holders_lease_expires_and_a_waiter_goes_on(emulator):
    """A lease note left by a run that died (never renewed) holds the cluster for its time to live only; a run
    that finds the cluster held longer than it may wait fails naming the holder and changes nothing."""
    s = spec(1)
    with emulator.client() as client:
        cluster.run(client, spec=s)
        cs = [c["cloudspace_id"] for c in client.cloudspaces() if c["name"] == "duo-cs"][0]
        title, content = lease.lease_note("duo", "0" * 16, 2)
        client.create_cloudspace_note(cs, title, content)
        t0 = time.monotonic()
        with lease.held(client, cs, "duo") as got:
            waited = time.monotonic() - t0
            assert got.holders == ["0" * 16] and 2 <= waited < 10
        assert not [n for n in client.cloudspace_notes(cs) if lease.parse_lease(n["title"], n["content"])]
        client.create_cloudspace_note(cs, *lease.lease_note("duo", "1" * 16, 600))
        before = emulator.snapshot()
        busy = pytest.raises(ClusterBusy, match="held by another run .run 1111111111111111.")
        with busy, lease.held(client, cs, "duo", wait=1.5):
            pass
        assert emulator.snapshot()["notes"] == before["notes"], "the waiter took its own note back"


def _lease_notes(emu, name):
    return [n for n in emu.snapshot()["notes"] if (lease.parse_lease(n["title"], n["content"]) or (0,))[0] == name]


def test_a_holder_stopped_past_its_lease_writes_nothing_when_it_resumes(emulator):
    """A cluster_create that holds the lease is stopped (SIGSTOP of its whole run: ansible-playbook, the worker and
    the module's process, which left the group) for longer than the lease's time to live; a second run waits the
    time to live, takes the cluster over and converges; the first, resumed, fails saying it lost the lease and
    writes nothing more: one reservation per slot (3 machines x 2 A100: 6, never 12)."""
    s = spec(3)
    s["pools"][0]["gpu"]["count"] = 2
    emulator.faults(latency_ms=150)
    marker = "stall-%d" % os.getpid()
    play = os.path.join(ROOT, "playbooks", "cluster_create.yml")
    first = start_playbook(play, s, emulator.env(), marker, COLLECTIONS, ROOT)

    def holds_with_a_vm():
        vms = [v for v in emulator.snapshot()["vms"] if v["name"].startswith("duo-") and v["deleted_at"] is None]
        return first.poll() is not None or (_lease_notes(emulator, "duo") and vms)

    held = wait_for(holds_with_a_vm, timeout=120)
    assert held and first.poll() is None, "the first run neither held the lease with a VM made nor ran on"
    with stopped(marker):
        t0 = time.monotonic()
        rc, out, _data = run_playbook(play, emulator, extra_vars=s)
        took_over = time.monotonic() - t0
        assert rc == 0, out[-3000:]
        assert took_over >= lease.TTL, "the second run went on after %.1fs, before the time to live" % took_over
    out, _ = first.communicate(timeout=600)
    emulator.faults()
    assert first.returncode != 0, out[-3000:]
    assert "no longer holds the lease of cluster 'duo'" in out, out[-3000:]
    slots = live_slots(emulator, "duo")
    assert len(slots) == 6 and all(len(v) == 1 for v in slots.values()), slots
    assert emulator.ledger()["double_reservations"] == 0


class FakeClock:
    """A clock that moves only when a waiter sleeps, or when the test says so."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_a_lease_note_that_claims_a_day_is_believed_for_the_collections_time_to_live_only(emulator):
    """A note ``ttl=99999`` written by anyone who can write notes holds the cluster for :data:`lease.TTL` seconds of
    silence, not 27.7 hours; a run that waits names the holder and how long its note has been silent."""
    s = spec(1)
    clock = FakeClock()
    with emulator.client() as client:
        cluster.run(client, spec=s)
        cs = [c["cloudspace_id"] for c in client.cloudspaces() if c["name"] == "duo-cs"][0]
        client.create_cloudspace_note(cs, "capvco/v1", "lease cluster=duo run=0123456789abcdef ttl=99999")
        busy = pytest.raises(
            ClusterBusy, match=r"run 0123456789abcdef, its note unchanged for 1[0-9]s\) and it did not let go"
        )
        with busy:
            lease.Lease(client, cs, "duo", wait=15, clock=clock, sleep=clock.sleep).acquire()
        got = lease.Lease(client, cs, "duo", clock=clock, sleep=clock.sleep).acquire()
        try:
            assert got.holders == ["0123456789abcdef"] and lease.TTL <= got.waited <= lease.TTL + 2
        finally:
            got.release()
        assert not [n for n in client.cloudspace_notes(cs) if lease.parse_lease(n["title"], n["content"])]


def test_a_holder_past_its_fence_writes_nothing_and_its_run_fails(emulator):
    """Once the last renewal that succeeded is FENCE of the time to live old, every mutating call of the holder's
    client is refused before it is sent, and the ``with`` block fails even where the refusal was swallowed."""
    s = spec(1)
    clock = FakeClock()
    with emulator.client() as client:
        cluster.run(client, spec=s)
        cs = [c["cloudspace_id"] for c in client.cloudspaces() if c["name"] == "duo-cs"][0]
        got = lease.Lease(client, cs, "duo", clock=clock, sleep=clock.sleep).acquire()
        client.leases[(cs, "duo")] = got
        try:
            client.create_cloudspace_note(cs, "scratch", "a note write is the lease's own: never fenced")
            clock.now += lease.TTL * lease.FENCE - 1
            got.fence()  # still proven
            clock.now += 1
            before = emulator.snapshot()
            with pytest.raises(LeaseLost, match=r"last renewal was 20s ago, past 20s of its 30s time to live"):
                client.create_vm(cs, name="duo-x", description="", vcpus=1, memory=512)
            assert emulator.snapshot()["vms"] == before["vms"]
        finally:
            del client.leases[(cs, "duo")]
            got.release()
        with pytest.raises(LeaseLost), lease.held(client, cs, "duo") as inner:
            inner._clock = clock
            inner.proven = clock.now - lease.TTL
            with pytest.raises(LeaseLost):
                client.create_vm(cs, name="duo-x", description="", vcpus=1, memory=512)


def _shared(name):
    s = spec(1, name=name)
    s["cluster"]["cloudspace"] = "shared-cs"
    return s


@pytest.mark.parametrize("order", ["creator-first", "member-first", "at-once"])
def test_two_clusters_in_a_new_shared_cloudspace_both_torn_down_leave_nothing(emulator, order):
    """Two clusters converge at once into a cloudspace neither had; then both are torn down (one after the other,
    either way, or at once), each rc 0: the cloudspace goes with the last of them. The creator's teardown, kept out
    by the other's machines, hands the cloudspace over to that cluster (a note), and deletes it itself when that
    cluster's teardown ran meanwhile."""
    a, b = _shared("sha"), _shared("shb")
    results = {}

    def go(key, fn):
        with emulator.client() as client:
            results[key] = fn(client)

    threads = [
        threading.Thread(target=go, args=(s["cluster"]["name"], lambda c, s=s: cluster.run(c, spec=s, parallel=8)))
        for s in (a, b)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert set(results) == {"sha", "shb"}
    with emulator.client() as client:
        spaces = [c for c in client.cloudspaces() if c["name"] == "shared-cs"]
        assert len(spaces) == 1, "one cloudspace for both"
        made_by = cloudspaces.creator(client, spaces[0]["cloudspace_id"])
    first, second = (a, b) if (made_by == "sha") == (order == "creator-first") else (b, a)

    def down(s):
        return lambda c: cluster.run(c, spec={"cluster": s["cluster"]}, state="absent", parallel=8)

    if order == "at-once":
        threads = [threading.Thread(target=go, args=("down-" + s["cluster"]["name"], down(s))) for s in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
    else:
        go("down-first", down(first))
        go("down-second", down(second))
    with emulator.client() as client:
        left = [c for c in client.cloudspaces() if c["name"] == "shared-cs"]
        assert left == [], "the shared cloudspace outlived both clusters (%s)" % results
        assert not [
            v for c in client.cloudspaces() for v in client.vms(c["cloudspace_id"]) if v["name"][:4] in ("sha-", "shb-")
        ]
    assert emulator.ledger()["accruing"] == 0 or not [
        r
        for r in emulator.ledger()["reservations"]
        if r["deleted_at"] is None and r["vgpu_name"].split(".")[1] in ("sha", "shb")
    ]
