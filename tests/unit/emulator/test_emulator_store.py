"""The emulator's store, apart from HTTP: typed rows from each resource's store, the billing maths (``metering``)
and the choice of addresses and MACs (``addressing``) as pure functions, and the vGPU listing cache, which only the
writes that change a listing's members invalidate."""

from __future__ import annotations

import dataclasses
import sqlite3
from typing import NamedTuple

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from whitesky_emulator import addressing, metering
from whitesky_emulator.state import Emulator
from whitesky_emulator.store import ExternalNetwork, Nic, Store, Vgpu, Vm
from whitesky_emulator.world import DEFAULT_IMAGES, DEFAULT_WORLD

from properties import examples

CUSTOMER = "capvco-demo"


@pytest.fixture
def store(tmp_path):
    made = Store(str(tmp_path / "state.db"))
    made.seed(DEFAULT_WORLD)
    return made


# -- metering ------------------------------------------------------------------------------------------------------
class Reservation(NamedTuple):
    vgpu_id: str
    reserved_at: float
    deleted_at: float | None


class Span(NamedTuple):
    vgpu_id: str
    vm_id: int
    start: float
    end: float | None


def test_a_reservation_bills_from_reservation_to_permanent_deletion_within_the_window():
    assert metering.reserved_seconds(Reservation("a", 100.0, None), now=400.0) == 300.0
    assert metering.reserved_seconds(Reservation("a", 100.0, 250.0), now=400.0) == 150.0
    assert metering.reserved_seconds(Reservation("a", 100.0, 250.0), now=400.0, start=200, end=1000) == 50.0
    assert metering.reserved_seconds(Reservation("a", 100.0, None), now=400.0, start=0, end=50) == 0.0


def test_attached_seconds_sum_per_vm_and_clip_to_the_window():
    spans = [Span("a", 1, 0.0, 100.0), Span("a", 2, 100.0, None), Span("a", 1, 150.0, 160.0), Span("b", 1, 0.0, 5.0)]
    assert metering.attached_seconds(spans, 50, 200, now=300.0) == {"a": {1: 60.0, 2: 100.0}}


def test_one_report_is_made_at_one_instant():
    """An attached vGPU whose span is still open leaves nothing unassigned, however late ``end`` is."""
    report = metering.consumption([Reservation("a", 100.0, None)], [Span("a", 7, 100.0, None)], 0, 10**9, now=500.0)
    assert report.seconds == 400.0 and dict(report.per_vm) == {7: 400.0} and report.unassigned == []
    assert report.vm_units(7) == 400.0 / metering.VGU_SECONDS and report.vm_units(8) == 0.0


@settings(max_examples=examples(50), deadline=None)
@given(
    edges=st.lists(st.integers(0, 1000), unique=True, max_size=8).map(sorted),
    vms=st.lists(st.integers(1, 3), min_size=8, max_size=8),
    window=st.tuples(st.integers(0, 1200), st.integers(0, 1200)),
)
@example(edges=[], vms=[1] * 8, window=(1101, 1101))  # a window that starts after now: nothing billed in it yet
@example(edges=[0, 1000], vms=[1] * 8, window=(1200, 1150))
def test_a_reservations_seconds_are_its_vms_plus_its_own(edges, vms, window):
    """Attachments do not overlap (a vGPU is on one VM at a time): billed = attached + unassigned."""
    start, end = sorted(window)
    now = 1100.0
    attachments = [Span("a", vms[i], float(edges[i]), float(edges[i + 1])) for i in range(0, len(edges) - 1, 2)]
    report = metering.consumption([Reservation("a", 0.0, None)], attachments, start, end, now)
    unassigned = sum(seconds for _, seconds in report.unassigned)
    assert report.seconds == pytest.approx(sum(report.per_vm.values()) + unassigned)
    assert report.seconds == pytest.approx(max(0.0, min(end, now) - start))


# -- addressing ----------------------------------------------------------------------------------------------------
NET = ExternalNetwork(1, "loc", "n", "10.0.0.0", "10.0.0.1", "255.255.255.248", 0, 0)  # hosts .1-.6


def test_free_addresses_are_the_hosts_less_the_gateway_and_attached_ones():
    assert addressing.free_addresses(NET, ["10.0.0.3"]) == ["10.0.0.2", "10.0.0.4", "10.0.0.5", "10.0.0.6"]


def test_an_address_is_chosen_first_free_or_as_wanted_if_it_may_be_taken():
    assert addressing.choose_address(NET, ["10.0.0.2"]) == "10.0.0.3"
    assert addressing.choose_address(NET, [], wanted="10.0.0.6") == "10.0.0.6"
    for refused in ("10.0.0.0", "10.0.0.7", "10.0.0.1", "10.0.0.2", "10.0.1.2"):  # network, broadcast, gw, taken, out
        assert addressing.choose_address(NET, ["10.0.0.2"], wanted=refused) is None, refused
    assert addressing.choose_address(NET, ["10.0.0.%d" % i for i in range(2, 7)]) is None


@given(st.sets(st.integers(1, 2**32 - 1), min_size=2, max_size=50))
def test_macs_are_unique_per_nic_id_and_locally_administered(ids):
    macs = {addressing.mac_address(i) for i in ids}
    assert len(macs) == len(ids) and all(m.startswith("52:54:") and len(m) == 17 for m in macs)


def test_device_names_and_prefix_lengths():
    assert addressing.device_name(1) == "eth1" and addressing.prefix_length("255.255.255.0") == 24


# -- the stores ------------------------------------------------------------------------------------------------------
def test_the_stores_answer_typed_frozen_rows(store):
    vm_id = store.vms.create("cs-demo", "m", "d", 1, 1024, None, None, None)
    vm = store.vms.get("cs-demo", vm_id)
    assert isinstance(vm, Vm) and vm.status == "RUNNING" and vm.image_id is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        vm.name = "other"
    vgpu_id = store.vgpus.reserve(CUSTOMER, "be-gen-1", "nvidia-l4-24q", "g0", vm_id)
    row = store.vgpus.get(CUSTOMER, vgpu_id)
    assert isinstance(row, Vgpu) and row.vm_id == vm_id and row.duplicate == 0
    assert store.profiles.get("nvidia-l4-24q").available_instances == 3
    net = store.networks.network("be-gen-1", 101)
    nic = store.networks.attach(vm_id, net, store.networks.choose_address(net), "virtio")
    assert isinstance(nic, Nic) and nic.ip_address == "198.51.100.2" and nic.device_name == "eth1"
    assert nic.mac_address == addressing.mac_address(nic.nic_id)


def test_deleting_a_vm_detaches_what_it_holds(store):
    vm_id = store.vms.create("cs-demo", "m", "d", 1, 1024, None, None, None)
    vgpu_id = store.vgpus.reserve(CUSTOMER, "be-gen-1", "nvidia-l4-24q", "g0", vm_id)
    net = store.networks.network("be-gen-1", 101)
    store.networks.attach(vm_id, net, "198.51.100.9", "virtio")
    store.vms.write_file(vm_id, "/etc/x", "y")
    detached = store.delete_vm(vm_id)
    assert [n.ip_address for n in detached] == ["198.51.100.9"] and store.networks.of_vm(vm_id) == []
    assert store.vgpus.get(CUSTOMER, vgpu_id).vm_id is None and store.vgpus.of_vm(vm_id) == []
    assert store.vms.get("cs-demo", vm_id) is None and store.vms.file(vm_id, "/etc/x") is None
    assert "198.51.100.9" in store.networks.free_addresses(net)
    (span,) = store.billing.attachments(CUSTOMER, "be-gen-1")
    assert span.vgpu_id == vgpu_id and span.end is not None


def test_a_failed_batch_of_reservations_leaves_nothing(store):
    with pytest.raises(sqlite3.Error):  # a name the database cannot bind, after one reservation was made
        store.reserve_many(CUSTOMER, "be-gen-1", "nvidia-l4-24q", ["ok", {"not": "a name"}])
    assert store.billing.ledger() == [] and store.profiles.get("nvidia-l4-24q").available_instances == 4
    assert store.reserve_many(CUSTOMER, "be-gen-1", "nvidia-l4-24q", ["a", "b"])


def test_a_permanently_deleted_cloudspace_takes_its_notes(store):
    store.notes.create("cs-demo", "t", "c", CUSTOMER)
    store.cloudspaces.delete("cs-demo", permanently=False)
    assert [n.title for n in store.notes.listing("cs-demo")] == ["t"]
    store.cloudspaces.delete("cs-demo", permanently=True)
    assert store.notes.listing("cs-demo") == []
    assert [c.cloudspace_id for c in store.cloudspaces.listing(CUSTOMER, include_deleted=True)] == ["cs-ams"]
    assert "cs-demo" in [c.cloudspace_id for c in store.cloudspaces.listing(CUSTOMER, every=True)]


# -- the listing cache ---------------------------------------------------------------------------------------------
def names(store, **flags):
    return [r.vgpu_name for r in store.vgpus.page(CUSTOMER, "be-gen-1", None, 0, **flags)]


def test_the_writes_that_change_a_listing_invalidate_it_and_no_others(store):
    a = store.vgpus.reserve(CUSTOMER, "be-gen-1", "nvidia-a100-20c", "a")
    store.vgpus.reserve(CUSTOMER, "nl-ams-1", "nvidia-h100-80c", "elsewhere")
    assert names(store) == ["a"] and names(store, only_deleted=True) == []
    cache = store.vgpus.listings
    assert len(cache) == 2
    vm_id = store.vms.create("cs-demo", "m", "d", 1, 1024, None, None, None)
    store.vgpus.attach(a, vm_id)  # membership unchanged: the listings stay
    store.vgpus.detach(a)
    assert store.vgpus.count(CUSTOMER, "nl-ams-1") == 1
    assert len(cache) == 3
    store.vgpus.delete(store.vgpus.get(CUSTOMER, a), permanently=False)  # to the recycle bin: be-gen-1's go
    assert len(cache) == 1
    assert names(store) == [] and names(store, only_deleted=True) == ["a"]
    store.vgpus.restore(store.vgpus.get(CUSTOMER, a))
    assert names(store) == ["a"] and names(store, only_deleted=True) == []
    b = store.vgpus.reserve(CUSTOMER, "be-gen-1", "nvidia-a100-20c", "b")
    assert names(store) == ["a", "b"]
    store.vgpus.delete(store.vgpus.get(CUSTOMER, b), permanently=True)
    assert names(store) == ["a"] and names(store, include_deleted=True) == ["a"]


@settings(max_examples=examples(30), deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["reserve", "soft", "hard", "restore", "attach", "detach"]), st.integers(0, 9)),
        max_size=25,
    )
)
def test_a_cached_listing_is_always_what_sql_reads(tmp_path_factory, steps):
    store = Store(str(tmp_path_factory.mktemp("s") / "state.db"))
    store.seed(DEFAULT_WORLD)
    vm_id = store.vms.create("cs-demo", "m", "d", 1, 1024, None, None, None)
    made = []
    for action, pick in steps:
        if action == "reserve" or not made:
            made.append(store.vgpus.reserve(CUSTOMER, "be-gen-1", "nvidia-a100-20c", "v%d" % len(made)))
            continue
        row = store.vgpus.get(CUSTOMER, made[pick % len(made)])
        if row is None:  # deleted permanently
            continue
        if action == "soft" and row.soft_deleted_at is None:
            store.vgpus.delete(row, permanently=False)
        elif action == "hard":
            store.vgpus.delete(row, permanently=True)
        elif action == "restore" and row.soft_deleted_at is not None:
            store.vgpus.restore(row)
        elif action == "attach" and row.vm_id is None:
            store.vgpus.attach(row.vgpu_id, vm_id)
        elif action == "detach" and row.vm_id is not None:
            store.vgpus.detach(row.vgpu_id)
        for flags in ({}, {"only_deleted": True}, {"include_deleted": True}):  # the cached listing, and SQL's now
            assert names(store, **flags) == [
                r["vgpu_name"]
                for r in store.db.rows(
                    "SELECT vgpu_name FROM vgpus WHERE customer_id=? AND location='be-gen-1' AND deleted_at IS NULL"
                    + (
                        " AND soft_deleted_at IS NOT NULL"
                        if flags.get("only_deleted")
                        else ""
                        if flags.get("include_deleted")
                        else " AND soft_deleted_at IS NULL"
                    )
                    + " ORDER BY rowid",
                    CUSTOMER,
                )
            ], flags


# -- images --------------------------------------------------------------------------------------------------------
def test_each_location_has_its_images_and_a_seed_without_images_gets_the_defaults(tmp_path, store):
    assert [i.image_id for i in store.images.listing("be-gen-1")] == [12, 14, 21]
    assert [i.image_id for i in store.images.listing("nl-ams-1")] == [12, 14]
    assert store.images.get("nl-ams-1", 21) is None and store.images.get("be-gen-1", 21).name.startswith("Debian")
    bare = Store(str(tmp_path / "bare.db"))
    bare.seed({"customers": [{"customer_id": CUSTOMER}], "locations": [{"name": "x-1"}]})
    assert [i.image_id for i in bare.images.listing("x-1")] == [i["image_id"] for i in DEFAULT_IMAGES]


def test_a_state_file_from_before_images_gets_them_when_the_emulator_starts(tmp_path):
    old = Store(str(tmp_path / "state.db"))
    old.seed(DEFAULT_WORLD)
    old.db.run("DELETE FROM images")  # what a state file written before the emulator had images holds
    old.db.conn.close()
    emu = Emulator(str(tmp_path), "token", DEFAULT_WORLD)
    assert [i.image_id for i in emu.store.images.listing("be-gen-1")] == [12, 14, 21]
