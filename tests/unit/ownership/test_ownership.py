"""Ownership names: encode, decode, uniqueness, platform rules, and what is not ours."""

from __future__ import annotations

import itertools
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers, naming
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes as ownership_notes
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError, InputError

from properties import examples

PLATFORM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")  # the emulator's (assumed) rule


def test_round_trip():
    name = naming.encode("demo", "demo-gpu-0", 3, created=1795960000)
    assert name.startswith("capvco.demo.demo-gpu-0.03.")
    owner = naming.decode(name)
    assert owner == naming.Owner("demo", "demo-gpu-0", 3, 1795960000)
    assert naming.owned_by(owner, "demo", "demo-gpu-0")
    assert not naming.owned_by(owner, "demo", "demo-gpu-1")
    assert not naming.owned_by(owner, "other")


def test_unique_per_cluster_machine_slot_and_fits_the_platform():
    clusters = ["a", "prod", "x" * 20, "y" * 40, "y" * 41]
    machines = ["m", "worker-0", "w" * 45, "w" * 63, "w" * 62 + "z"]
    seen = set()
    for c, m, s in itertools.product(clusters, machines, (0, 1, 99)):
        name = naming.encode(c, m, s, created=2000000000)
        assert PLATFORM_NAME.match(name) and len(name) <= 64, name
        owner = naming.decode(name)
        key = (owner.cluster, owner.machine, owner.slot)
        assert key not in seen, name
        seen.add(key)
        assert naming.owned_by(owner, c, m)
        assert owner.slot == s and owner.created == 2000000000


def test_long_names_are_shortened_the_same_way_every_time():
    a = naming.encode("c" * 30, "m" * 60, 0, created=1)
    b = naming.encode("c" * 30, "m" * 60, 0, created=1)
    assert a == b and "_" in a


@pytest.mark.parametrize(
    "name",
    [
        "",
        "gpu-1",
        "capvco",
        "capvco.demo.m.00",
        "capvco.demo.m.0.0000001",
        "capvco.demo.m.00.00000!1",
        "other.demo.m.00.0000001",
        "capvco.de.mo.m.00.0000001",
        "capvco.demo.m.xx.0000001",
        "x" * 80,
        None,
        42,
    ],
)
def test_not_ours(name):
    assert naming.decode(name) is None
    assert not naming.owned_by(naming.decode(name), "demo")


@pytest.mark.parametrize(
    "cluster,machine,slot",
    [
        ("bad.name", "m", 0),
        ("ok", "bad_name", 0),
        ("-x", "m", 0),
        ("ok", "", 0),
        ("ok", "m", -1),
        ("ok", "m", 100),
    ],
)
def test_bad_input_names_the_value(cluster, machine, slot):
    with pytest.raises(InputError) as err:
        naming.encode(cluster, machine, slot)
    assert any(repr(v) in str(err.value) for v in (cluster, machine, slot))


@pytest.mark.parametrize(
    "cluster, name, ok",
    [
        ("web", "web-cp-0", True),
        ("web", "web-gpu-cp-0", True),  # a neighbour's name passes the filter; its marker says whose it is
        ("web", "web-", False),
        ("web", "web", False),
        ("web", "webcp-0", False),
        ("web", "cp-0", False),
        ("web", "Web-cp-0", False),
        ("web", None, False),
        ("web", 7, False),
    ],
)
def test_the_machine_name_rule_is_a_filter(cluster, name, ok):
    assert markers.may_own(cluster, name) is ok
    if ok:
        markers.check_machine_name(cluster, name)
    else:
        with pytest.raises(InputError, match=r"does not start with the cluster's name and '-' \('web-'\)"):
            markers.check_machine_name(cluster, name)


def test_every_bad_machine_name_is_named_at_once():
    markers.check_machine_names("c1", ["c1-a", "c1-b"])
    with pytest.raises(InputError) as err:
        markers.check_machine_names("c1", ["c1-a", "w0", "c2-x"])
    assert "'w0', 'c2-x'" in str(err.value) and "'c1-'" in str(err.value)
    with pytest.raises(InputError, match="invalid cluster name"):
        markers.check_machine_names("bad.cluster", ["bad.cluster-0"])


def test_creator_and_member_notes_name_the_clusters_of_a_cloudspace():
    notes = [
        dict(zip(("title", "content"), ownership_notes.creator_note("web"), strict=True)),
        dict(zip(("title", "content"), ownership_notes.member_note("web-gpu"), strict=True)),
        {"title": "capvco/v1", "content": "member cluster=web-gpu"},  # twice is once
        {"title": "capvco/v1", "content": "lease cluster=db run=0123456789abcdef ttl=30"},  # a lease is not a member
        {"title": "capvco/v1", "content": "member cluster=bad.name"},
        {"title": "capvco/v1", "content": "member cluster=web\n"},
        {"title": "notes", "content": "member cluster=hand"},
        {"content": "member cluster=x"},
        "not a note",
    ]
    assert ownership_notes.clusters_in(notes) == {"web", "web-gpu"}
    assert ownership_notes.note_cluster(*ownership_notes.member_note("a")) == "a"
    assert ownership_notes.note_creator(*ownership_notes.member_note("a")) is None, (
        "a member note never claims the cloudspace"
    )
    with pytest.raises(InputError):
        ownership_notes.member_note("a.b")


class _Spaces:
    """The two reads ``cloudspaces_named`` makes, answered from lists."""

    def __init__(self, spaces, notes):
        self.spaces, self.notes, self.note_reads = spaces, notes, 0

    def cloudspaces(self):
        return self.spaces

    def cloudspace_notes(self, cs_id):
        self.note_reads += 1
        return self.notes.get(cs_id, [])


def test_two_cloudspaces_made_in_one_second_are_ordered_by_their_creator_notes_not_their_ids():
    """Run A made cs-b (its note first), run B made cs-a a moment later in the same second: by id, B would keep
    cs-a while A, which listed before cs-a existed, kept cs-b. By the creator notes both keep cs-b."""
    from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces

    spaces = [
        {"cloudspace_id": "cs-a", "name": "s", "location": "l", "creation_time": 100},
        {"cloudspace_id": "cs-b", "name": "s", "location": "l", "creation_time": 100},
        {"cloudspace_id": "cs-0", "name": "s", "location": "l", "creation_time": 101},
    ]
    note = {"title": "capvco/v1", "content": "creator cluster=a"}
    client = _Spaces(spaces, {"cs-b": [dict(note, creation_time=100.2)], "cs-a": [dict(note, creation_time=100.7)]})
    assert [c["cloudspace_id"] for c in cloudspaces.cloudspaces_named(client, "s", "l")] == ["cs-b", "cs-a", "cs-0"]
    assert client.note_reads == 2, "only the tied ones' notes are read"
    client = _Spaces(spaces, {"cs-a": [dict(note, creation_time=100.7)]})  # cs-b's run has not written its note yet
    assert [c["cloudspace_id"] for c in cloudspaces.cloudspaces_named(client, "s", "l")][:2] == ["cs-a", "cs-b"]
    client = _Spaces(spaces[2:], {})
    assert cloudspaces.cloudspaces_named(client, "s", "l") == spaces[2:] and client.note_reads == 0


def test_a_cloudspace_is_held_by_its_creator_then_by_each_handover_its_holder_wrote():
    from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces

    def note(t, content):
        return {"title": "capvco/v1", "content": content, "creation_time": t, "id": str(t)}

    notes = [note(1, "creator cluster=a"), note(2, "creator cluster=x"), note(3, "handover from=x to=y")]
    assert cloudspaces.holder(notes) == "a", "a later creator note and a handover from a non-holder change nothing"
    notes.append(note(4, "handover from=a to=b"))
    assert cloudspaces.holder(notes) == "b"
    notes.append(note(5, "handover from=b to=c"))
    assert cloudspaces.holder(list(reversed(notes))) == "c", "in the notes' order, whatever the listing's"
    assert cloudspaces.holder([note(1, "handover from=a to=b")]) is None
    left = [{"name": "b-cp-0", "owner": None}, {"name": "c-w-0", "owner": "c"}, {"name": "a-x", "owner": "a"}]
    assert cloudspaces.successor(left, "a", ["b"]) == "b"
    assert cloudspaces.successor(left + [{"name": "db-0", "owner": None}], "a", ["b"]) is None, "a hand-made VM"
    assert cloudspaces.successor([{"name": "a-x", "owner": "a"}], "a", []) is None


class _SlowNotes:
    """A cloudspace's notes in memory, whose updates take ``latency`` seconds (a slow platform)."""

    def __init__(self, latency):
        self.latency, self.notes, self.updates = latency, [], 0
        self.leases = {}

    def create_cloudspace_note(self, cs, title, content, resolve=None):
        self.notes.append(
            {
                "id": str(len(self.notes) + 1),
                "title": title,
                "content": content,
                "creation_time": float(len(self.notes)),
                "last_update_time": 0,
            }
        )

    def cloudspace_notes(self, cs):
        return [dict(n) for n in self.notes]

    def update_cloudspace_note(self, cs, note_id, title, content):
        time.sleep(self.latency)
        self.updates += 1
        for n in self.notes:
            if n["id"] == note_id:
                n["last_update_time"] += 1

    def delete_cloudspace_note(self, cs, note_id):
        self.notes = [n for n in self.notes if n["id"] != note_id]


def test_a_holder_on_a_slow_platform_keeps_its_proof_fresh():
    """Renewals are paced from their send, not from their answer: with updates that take a quarter of the time to
    live, a holder that is never stopped is never fenced (it was, after a few renewals, at 6 s per call)."""
    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease

    client = _SlowNotes(latency=1.0)
    client.create_cloudspace_note("cs", *ownership_notes.creator_note("slow"))
    held = lease.Lease(client, "cs", "slow", ttl=4).acquire()
    try:
        end = time.monotonic() + 6.5
        while time.monotonic() < end:
            held.fence()
            time.sleep(0.05)
    finally:
        held.release()
    assert client.updates >= 4


class _TakenNotes(_SlowNotes):
    """A cloudspace's notes whose update of a note that is gone is a 404, as the platform answers it."""

    def update_cloudspace_note(self, cs, note_id, title, content):
        if not any(n["id"] == note_id for n in self.notes):
            raise ApiError("PUT", "/notes/%s" % note_id, 404, "no such note")
        super().update_cloudspace_note(cs, note_id, title, content)


def test_a_holder_whose_renewal_found_its_note_gone_is_told_another_run_took_the_cluster_over():
    """``Lease.lost`` is read: a renewal that finds the note gone sets it and renews nothing more; once the fence
    refuses, its message says that the note is gone (without ``lost``, it does not)."""
    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease
    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.errors import LeaseLost

    now = [0.0]
    client = _TakenNotes(latency=0.0)
    client.create_cloudspace_note("cs", *ownership_notes.creator_note("taken"))
    held = lease.Lease(client, "cs", "taken", clock=lambda: now[0]).acquire()
    try:
        now[0] = lease.TTL * lease.FENCE
        with pytest.raises(LeaseLost) as stalled:
            held.fence("create_vm")
        assert "took the cluster over" not in str(stalled.value)
        assert held._renew_once() and not held.lost, "its note is there: renewed"
        client.notes = [n for n in client.notes if n["id"] != held.note_id]  # another run took it over
        assert not held._renew_once() and held.lost
        now[0] += lease.TTL * lease.FENCE
        with pytest.raises(LeaseLost, match="its note is gone: another run took the cluster over"):
            held.fence("create_vm")
    finally:
        held.release()


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,60}[a-z0-9]", fullmatch=True), min_size=1, max_size=6),
    st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,70}[a-z0-9]", fullmatch=True), max_size=8),
)
def test_the_orphan_check_keyed_by_the_clusters_length_says_what_one_per_cluster_says(clusters, vm_names):
    """OrphanCheck computes machine keys once per length of a cluster's part; for any clusters and VMs it answers
    as a check that computes them for each cluster apart."""
    from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.orphans import OrphanCheck

    shared = OrphanCheck(vm_names)
    for cluster in clusters:
        for machine in vm_names + ["gone-machine"]:
            owner = naming.decode(naming.encode(cluster, machine, 0, created=0))
            assert owner is not None
            alone = OrphanCheck(vm_names)
            assert shared(owner) == alone(owner)
            assert shared(owner) == (machine not in vm_names)


def test_a_marker_is_owned_by_its_whole_cluster_name_never_by_a_prefix_of_it():
    """``web`` does not own a machine of ``web-db`` (nor ``web-db`` one of ``web``): ownership is the marker's whole
    cluster name, the proof that keeps a cluster from changing a neighbour whose name starts as its own."""
    for owner, other in (("web", "web-db"), ("web-db", "web"), ("a", "a1"), ("gpu", "gpu-2")):
        assert markers.machine_owned(markers.machine_marker(owner), owner)
        assert markers.machine_owned(markers.machine_marker(owner, "md-0"), owner)
        assert not markers.machine_owned(markers.machine_marker(other), owner), (other, owner)
        assert not markers.machine_owned(markers.machine_marker(other, "md-0"), owner), (other, owner)


def _fake_time():
    """A clock and a sleep on it: time moves only when the lease sleeps (or the test moves it)."""
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds

    return now, (lambda: now[0]), sleep


def test_a_stalled_holder_whose_note_claims_a_long_time_to_live_is_judged_by_the_collections_own():
    """A lease note that says ``ttl=99999`` and is never renewed keeps the cluster no longer than the collection's
    own time to live (``lease.TTL``) of silence on this run's clock: a note cannot buy a stalled run the cluster
    for a day.  The waiting run takes the cluster within that time, and deletes the stalled note."""
    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease

    client = _SlowNotes(latency=0.0)
    client.delete_cloudspace_note = lambda cs, note_id: client.notes.remove(
        next(n for n in client.notes if n["id"] == note_id)
    )
    client.create_cloudspace_note("cs", *ownership_notes.creator_note("web"))
    client.create_cloudspace_note("cs", *lease.lease_note("web", "0123456789abcdef", 99999))  # stalled, first
    now, clock, sleep = _fake_time()
    held = lease.Lease(client, "cs", "web", clock=clock, sleep=sleep).acquire()
    try:
        assert held.holders == ["0123456789abcdef"]
        assert lease.TTL <= held.waited <= lease.TTL + 2 * lease.POLL, held.waited
        assert not [n for n in client.notes if "0123456789abcdef" in n["content"]], "the stalled note is deleted"
    finally:
        held.release()


def test_a_write_fenced_by_the_runs_leases_is_refused_once_a_lease_can_no_longer_be_proven():
    """``lease.fence(client, ...)`` (what the pools note's writer calls) refuses once any lease the run holds has
    gone unrenewed for ``FENCE`` of its time to live: a run stopped past its lease writes nothing when it resumes."""
    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease
    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.errors import LeaseLost

    client = _SlowNotes(latency=0.0)
    client.create_cloudspace_note("cs", *ownership_notes.creator_note("web"))
    now, clock, sleep = _fake_time()
    held = lease.Lease(client, "cs", "web", clock=clock, sleep=sleep).acquire()
    client.leases[("cs", "web")] = held
    held._stop.set()  # the renewing thread stops (as in a stopped run): only the test's clock moves from here
    held._renewer.join()
    try:
        lease.fence(client, "update the pools note")  # proven just now: the write goes on
        now[0] += lease.TTL * lease.FENCE  # the run was stopped, nothing renewed on this clock
        with pytest.raises(LeaseLost, match="stopped before update the pools note"):
            lease.fence(client, "update the pools note")
    finally:
        del client.leases[("cs", "web")]
        held.release()


def test_a_run_whose_note_is_deleted_while_it_waits_is_told_it_lost_the_lease_and_changed_nothing():
    """A run stopped while it waited for the cluster (behind another run's lease) past its time to live finds, when it
    resumes, its own note deleted by a run that judged it expired: it fails as a run that lost its lease does
    (``LeaseLost``, the reason and "changed nothing"), not with a bare "note is gone"."""
    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import lease
    from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.errors import LeaseLost

    client = _SlowNotes(latency=0.0)
    client.create_cloudspace_note("cs", *ownership_notes.creator_note("web"))
    client.create_cloudspace_note("cs", *lease.lease_note("web", "0123456789abcdef", 30))  # ahead of this run
    now, clock, sleep = _fake_time()

    def stalled(seconds):  # while this run sleeps, another deletes its note (as an expired one)
        sleep(seconds)
        client.notes = [n for n in client.notes if "0123456789abcdef" in n["content"] or "lease" not in n["content"]]

    said = "no longer holds the lease of cluster 'web'.*gone while it waited.*changed nothing"
    with pytest.raises(LeaseLost, match=said):
        lease.Lease(client, "cs", "web", clock=clock, sleep=stalled).acquire()
