"""The cluster's pools note (issue 37: a GPU pool at zero keeps its definition where the inventory reads it), without
a server: its writer ``poolsnote.pools_note`` and its parser ``poolsread.note_pools`` by property and by fuzzing
(anyone may write a note: whatever a note says parses whole, to the writer's own spelling, or to nothing, and never
raises), its bounds against the cluster spec's, and what the inventory's core makes of a cloudspace's notes
(``vm_inventory``).

``CAPVCO_FUZZ_EXAMPLES`` sets the examples per fuzzer (200 by default), as in test_fuzz_parsers.py.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import (
    inventory_cache,
    inventory_hosts,
    inventory_records,
    vm_inventory,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes, poolsnote, poolsread
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.poolsnote import NotedPool
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import clusterspec, schema

from properties import env_examples

EXAMPLES = env_examples("CAPVCO_FUZZ_EXAMPLES", 200)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
TITLE = notes.NOTE_TITLE
CS = {"cloudspace_id": "cs-1", "name": "shop", "location": "be-gen-1"}
#: A location's hourly prices: 12 a vCPU-month, 3.5 a GiB-month of memory, 0.1 a GiB-month of disk, 730 a vGPU-month.
RATES = billing.rates({"resources": {"vcu": 12.0, "mu": 3.5, "su": 0.1, "fsu": 0.25, "piu": 5.0, "vgu": 730.0}})
WHERE = vm_inventory._Location({}, "EUR", RATES)


def note(content, title=TITLE, **kw):
    return dict({"id": "n-%d" % (abs(hash(content)) % 10**6), "title": title, "content": content}, **kw)


# --- what a valid pool is, drawn --------------------------------------------------------------------------------

labels = st.from_regex(r"\A[a-z0-9]([a-z0-9-]{0,18}[a-z0-9])?\Z")
gpu_types = st.from_regex(r"\A[A-Za-z0-9]([A-Za-z0-9 ._-]{0,62}[A-Za-z0-9])?\Z")


profiles = st.from_regex(r"\A[A-Za-z0-9]([A-Za-z0-9._-]{0,62}[A-Za-z0-9])?\Z")
drivers = st.one_of(st.just(""), st.from_regex(r"\A[0-9]{1,3}(\.[0-9]{1,3}){0,2}\Z"))
packages = st.from_regex(r"\A[a-z0-9][a-z0-9+.:=~*-]{0,127}\Z")


@st.composite
def pools(draw, name=None):
    gpu = draw(st.one_of(st.none(), st.tuples(gpu_types, st.integers(*poolsnote.GPU_COUNT))))
    pool = NotedPool(
        name or draw(labels),
        draw(st.integers(*poolsnote.REPLICAS)),
        draw(st.integers(*poolsnote.VCPUS)),
        draw(st.integers(*poolsnote.MEMORY)),
        gpu[0] if gpu else None,
        gpu[1] if gpu else 0,
    )
    if draw(st.booleans()):  # what its machines are made from (issue 46: a scale of one pool makes them from it)
        pool = pool._replace(
            image=draw(st.one_of(st.none(), st.integers(*poolsnote.IMAGE))),
            disk_size=draw(st.one_of(st.none(), st.integers(*poolsnote.DISK))),
            driver_version=draw(drivers),
            profile=draw(st.one_of(st.none(), profiles)),
        )
    return pool


boots = st.one_of(
    st.none(),
    st.builds(
        poolsnote.NotedBoot,
        st.lists(packages, max_size=5).map(tuple),
        st.integers(*poolsnote.BOOT_ATTEMPTS),
        st.integers(*poolsnote.BOOT_DELAY),
        st.integers(*poolsnote.BOOT_LOCK),
    ),
)


@st.composite
def pool_lists(draw):
    names = draw(st.lists(labels, min_size=1, max_size=poolsnote.POOLS_MAX, unique=True))
    return [draw(pools(name)) for name in names]


clusters = st.from_regex(r"\A[A-Za-z0-9]([A-Za-z0-9-]{0,30}[A-Za-z0-9])?\Z")


# --- the writer and the parser ----------------------------------------------------------------------------------


def test_a_pools_note_says_each_pool_in_one_line():
    pools_ = [NotedPool("cp", 1, 2, 2048, None, 0), NotedPool("gpu", 0, 4, 8192, "NVIDIA A100", 2)]
    assert poolsnote.pools_note("web", pools_) == (
        TITLE,
        "pools cluster=web cp:1:2:2048:0:-;gpu:0:4:8192:2:NVIDIA%20A100",
    )
    assert poolsread.note_pools(*poolsnote.pools_note("web", pools_)) == ("web", tuple(pools_))
    assert poolsread.pools_note_cluster(*poolsnote.pools_note("web", pools_)) == "web"
    # no other note of the collection is a pools note, nor a pools note one of them
    for content in ("creator cluster=web", "member cluster=web", "handover from=web to=x", "lease cluster=web"):
        assert poolsread.pools_note_cluster(TITLE, content) is None and poolsread.note_pools(TITLE, content) is None
    assert notes.note_cluster(*poolsnote.pools_note("web", pools_)) is None
    assert notes.clusters_in([note(poolsnote.pools_note("web", pools_)[1])]) == set(), "information, never a member"


@pytest.mark.parametrize(
    "pools_, message",
    [
        ([], "1 to 21 pools"),
        ([NotedPool("cp", 1, 2, 2048, None, 0)] * 2, "distinct names"),
        ([NotedPool("Cp", 1, 2, 2048, None, 0)], "name 'Cp'"),
        ([NotedPool("cp", 101, 2, 2048, None, 0)], "replicas 101"),
        ([NotedPool("cp", -1, 2, 2048, None, 0)], "replicas -1"),
        ([NotedPool("cp", True, 2, 2048, None, 0)], "replicas True"),
        ([NotedPool("cp", 1, 0, 2048, None, 0)], "vcpus 0"),
        ([NotedPool("cp", 1, 2, 511, None, 0)], "memory 511"),
        ([NotedPool("gpu", 1, 2, 2048, None, 2)], "without a type"),
        ([NotedPool("gpu", 1, 2, 2048, "NVIDIA A100", 0)], "gpu count 0"),
        ([NotedPool("gpu", 1, 2, 2048, "NVIDIA A100", 17)], "gpu count 17"),
        ([NotedPool("gpu", 1, 2, 2048, "{{ x }}", 1)], "gpu type"),
    ],
)
def test_the_writer_refuses_what_the_parser_would_not_read(pools_, message):
    with pytest.raises(InputError, match=re.escape(message)):
        poolsnote.pools_note("web", pools_)
    with pytest.raises(InputError):
        poolsnote.pools_note("web web", [NotedPool("cp", 1, 2, 2048, None, 0)])


def test_a_pools_note_records_what_each_pools_machines_are_made_from_and_the_first_boot():
    """Issue 46: what a scale of one pool needs to make the machines of it, and to keep the others."""
    pools_ = [
        NotedPool("cp", 1, 2, 2048, None, 0, image=12),
        NotedPool("gpu", 0, 4, 8192, "NVIDIA A100", 2, 12, 40, "550.127.05", "nvidia-a100-40c"),
    ]
    boot = poolsnote.NotedBoot(("containerd", "kubelet=1.30*"), 3, 5, 600)
    title, content = poolsnote.pools_note("web", pools_, boot)
    assert content == (
        "pools cluster=web cp:1:2:2048:0:-:12:-::-;gpu:0:4:8192:2:NVIDIA%20A100:12:40:550.127.05:nvidia-a100-40c"
        " boot=3:5:600:containerd,kubelet%3D1.30%2A"
    )
    assert poolsread.note_record(title, content) == poolsnote.NotedCluster("web", tuple(pools_), boot)
    assert poolsread.note_pools(title, content) == ("web", tuple(pools_))
    # a field of another spelling, or one said for nothing, is nothing: one spelling only
    for bad in (
        "pools cluster=web cp:1:2:2048:0:-:-:-::-",
        "pools cluster=web cp:1:2:2048:0:-:012:-::-",
        "pools cluster=web cp:1:2:2048:0:-:12:-:550-server:-",
        "pools cluster=web cp:1:2:2048:0:-:12:-::%2D",
        "pools cluster=web cp:1:2:2048:0:-:12:0::-",
        "pools cluster=web cp:1:2:2048:0:- boot=0:5:600:",
        "pools cluster=web cp:1:2:2048:0:- boot=3:5:600:curl;id",
        "pools cluster=web cp:1:2:2048:0:- boot=3:5:600",
    ):
        assert poolsread.note_record(TITLE, bad) is None, bad
    with pytest.raises(InputError, match="packages"):
        poolsnote.pools_note("web", pools_, boot._replace(packages=("curl; id",)))
    with pytest.raises(InputError, match="gpu profile"):
        poolsnote.pools_note("web", [pools_[1]._replace(profile="-")])


@FUZZ
@given(clusters, pool_lists(), boots)
def test_every_pools_note_the_writer_makes_parses_back_to_its_pools(cluster, pools_, boot):
    title, content = poolsnote.pools_note(cluster, pools_, boot)
    assert len(content) <= poolsread.POOLS_NOTE_MAX
    assert poolsread.note_record(title, content) == (cluster, tuple(pools_), boot)
    assert poolsread.note_pools(title, content) == (cluster, tuple(pools_))
    assert poolsread.pools_note_cluster(title, content) == cluster
    assert poolsread.note_pools("capvco/v2", content) is None and poolsread.note_pools(title, content + "\n") is None


def test_the_longest_pools_note_is_within_the_bound_the_parser_reads():
    long_type = "A" + "b " * 31 + "c"  # 64 characters, 31 of them quoted as %20
    pools_ = [
        NotedPool(("p%d-" % i).ljust(19, "x") + "y", 100, 256, 4194304, long_type, 16)
        for i in range(poolsnote.POOLS_MAX)
    ]
    title, content = poolsnote.pools_note("c" * 32, pools_)
    assert len(content) <= poolsread.POOLS_NOTE_MAX and poolsread.note_pools(title, content) is not None
    # ... with what every pool is made from and the longest first boot, each package quoted at its longest
    made = [
        p._replace(image=poolsnote.IMAGE[1], disk_size=65536, driver_version="1" * 32, profile="p" * 64) for p in pools_
    ]
    boot = poolsnote.NotedBoot(("a" + "*" * 127,) * poolsnote.BOOT_PACKAGES, 20, 600, 7200)
    title, content = poolsnote.pools_note("c" * 32, made, boot)
    assert len(content) <= poolsread.POOLS_NOTE_MAX and poolsread.note_record(title, content) is not None


def _check_parsed(title, content):
    """Whatever parses is the writer's spelling of what it parsed to; what does not is nothing."""
    got = poolsread.note_record(title, content)
    if got is not None:
        assert poolsnote.pools_note(*got) == (title, content)
        assert poolsread.pools_note_cluster(title, content) == got[0]
        assert poolsread.note_pools(title, content) == got[:2]
    return got


hostile = st.one_of(
    st.text(max_size=300),
    st.text(alphabet=st.sampled_from("pools cluster=web:;-0123456789%20AN {}'|"), max_size=200),
    st.sampled_from(
        [
            "pools cluster=web {{ lookup('pipe', 'id') }}",
            "pools cluster=web cp:1:2:2048:0:{% raw %}",
            "pools cluster=web gpu:1:2:2048:1:%7B%7B%20x%20%7D%7D",
            "pools cluster=web gpu:1:2:2048:1:NVIDIA%2520A100",
            "pools cluster=web gpu:1:2:2048:1:nvidia%20a100",
            "pools cluster=web gpu:1:2:2048:1:NVIDIA%20a100%00",
            "pools cluster=web gpu:1:2:2048:1:%ff%fe",
            "pools cluster=web gpu:1:2:2048:1:%",
            "pools cluster=web gpu:1:2:2048:0:-\n",
            "pools cluster=web gpu:+1:2:2048:0:-",
            "pools cluster=web gpu:1_0:2:2048:0:-",
            "pools cluster=web gpu:\u0661:2:2048:0:-",  # an Arabic-Indic one: a digit to int(), not to the parser
            "pools cluster=web gpu:99999999999999999999:2:2048:0:-",
            "pools cluster=web gpu:1:2:2048:0:-;",
            "pools cluster=web ;gpu:1:2:2048:0:-",
            "pools cluster=web  gpu:1:2:2048:0:-",
            "pools cluster=-web gpu:1:2:2048:0:-",
            "pools cluster=web",
            "pools cluster=",
            "pools cluster=web " + ";".join("p%d:1:2:2048:0:-" % i for i in range(22)),
            "pools cluster=web " + "gpu:1:2:2048:0:-;" * 50000,
            "pools cluster=" + "w" * 100000,
            "pools cluster=web gpu:1:2:2048:1:NVIDIA%20A100:12:40:550:full boot=3:5:600:containerd",
            "pools cluster=web gpu:1:2:2048:1:NVIDIA%20A100:12:40:550:full boot=3:5:600:containerd boot=1:1:1:",
            "pools cluster=web gpu:1:2:2048:1:NVIDIA%20A100:12:40:%35%35%30:full",
            "pools cluster=web gpu:1:2:2048:1:NVIDIA%20A100:-:-:-:-",
            "pools cluster=web cp:1:2:2048:0:- boot=3:5:600:" + ",".join(["curl"] * 101),
        ]
    ),
)


@FUZZ
@given(hostile)
def test_fuzz_any_text_parses_whole_to_the_writers_spelling_or_to_nothing(content):
    _check_parsed(TITLE, content)
    _check_parsed(TITLE, "pools cluster=web " + content)
    poolsread.pools_note_cluster(TITLE, content)


@FUZZ
@given(clusters, pool_lists(), boots, st.data())
def test_fuzz_a_valid_note_changed_in_one_place_parses_to_its_spelling_or_to_nothing(cluster, pools_, boot, data):
    title, content = poolsnote.pools_note(cluster, pools_, boot)
    at = data.draw(st.integers(0, len(content)))
    change = data.draw(st.sampled_from(["insert", "delete", "replace"]))
    char = data.draw(st.sampled_from(list(":;-% 0123456789aZ{}\n\x00é")))
    if change == "insert":
        content = content[:at] + char + content[at:]
    elif change == "delete":
        content = content[:at] + content[at + 1 :]
    else:
        content = content[:at] + char + content[at + 1 :]
    _check_parsed(title, content)


json_values = st.one_of(st.none(), st.integers(), st.text(max_size=40), st.lists(st.integers(), max_size=2))
any_notes = st.lists(
    st.one_of(
        st.none(),
        st.integers(),
        st.text(max_size=20),
        st.dictionaries(st.sampled_from(["id", "title", "content", "x"]), json_values, max_size=4),
        st.builds(note, hostile),
    ),
    max_size=6,
)


@FUZZ
@given(any_notes)
def test_fuzz_a_cloudspaces_notes_of_any_shape_never_raise(found):
    pools_, refused = poolsread.pools_in(found)
    assert set(pools_).isdisjoint(refused)
    records, warnings = vm_inventory.pool_records(CS, found, WHERE)
    assert all(set(r) == set(inventory_records.PoolRecord.__annotations__) for r in records)
    assert all("{{" not in json.dumps(r) for r in records)
    assert len(warnings) <= len(refused)


def test_a_clusters_pools_are_told_by_one_note_that_parses_whole():
    valid = poolsnote.pools_note("web", [NotedPool("cp", 1, 2, 2048, None, 0)])[1]
    other = poolsnote.pools_note("db", [NotedPool("cp", 3, 2, 2048, None, 0)])[1]
    assert poolsread.pools_in([note(valid), note(other)]) == (
        {"web": (NotedPool("cp", 1, 2, 2048, None, 0),), "db": (NotedPool("cp", 3, 2, 2048, None, 0),)},
        [],
    )
    # a second note of web, valid or not, or one that does not parse: web's pools cannot be told
    for extra in (valid, "pools cluster=web {{ x }}"):
        assert poolsread.pools_in([note(valid), note(extra, id="x")])[1] == ["web"]
    assert poolsread.pools_in([note("pools cluster=web garbage")]) == ({}, ["web"])
    # another title, or not a note at all: nothing
    assert poolsread.pools_in([note(valid, title="capvco/v2"), "x", None, {"content": valid}]) == ({}, [])


# --- the bounds are the spec's -----------------------------------------------------------------------------------


def test_the_notes_bounds_are_the_cluster_specs():
    pool = clusterspec.SPEC.fields["pools"].items
    cp = clusterspec.SPEC.fields["control_plane"]
    gpu = pool.fields["gpu"]
    for fields in (pool.fields, cp.fields):
        assert (fields["replicas"].minimum, fields["replicas"].maximum) == poolsnote.REPLICAS
        assert (fields["vcpus"].minimum, fields["vcpus"].maximum) == poolsnote.VCPUS
        assert (fields["memory"].minimum, fields["memory"].maximum) == poolsnote.MEMORY
    assert (gpu.fields["count"].minimum, gpu.fields["count"].maximum) == poolsnote.GPU_COUNT
    assert clusterspec.SPEC.fields["pools"].max_items + 1 == poolsnote.POOLS_MAX
    assert pool.fields["name"].max_length == poolsnote.POOL_NAME_MAX and pool.fields["name"].pattern == schema.LABEL
    assert gpu.fields["type"].max_length == poolsnote.GPU_TYPE_MAX and gpu.fields["type"].pattern == schema.GPU_TYPE
    assert poolsnote._POOL_NAME.pattern == schema.LABEL and poolsnote._GPU_TYPE.pattern == schema.GPU_TYPE
    assert clusterspec.SPEC.fields["cluster"].fields["name"].max_length <= poolsnote.CLUSTER_MAX
    # what a pool's machines are made from and the first boot (issue 46)
    for fields in (pool.fields, cp.fields):
        assert fields["image"].minimum == poolsnote.IMAGE[0] and fields["image"].maximum is None
        assert (fields["diskSize"].minimum, fields["diskSize"].maximum) == poolsnote.DISK
    assert gpu.fields["driverVersion"].max_length == poolsnote.DRIVER_MAX
    assert gpu.fields["driverVersion"].pattern == poolsnote._DRIVER.pattern == schema.DRIVER_VERSION
    assert gpu.fields["profile"].max_length == poolsnote.PROFILE_MAX
    assert gpu.fields["profile"].pattern == poolsnote._PROFILE.pattern == schema.GPU_PROFILE
    boot = clusterspec.SPEC.fields["first_boot"].fields
    assert (
        boot["packages"].max_items == poolsnote.BOOT_PACKAGES
        and boot["packages"].items.max_length == poolsnote.PACKAGE_MAX
    )
    assert boot["packages"].items.pattern == poolsnote._PACKAGE.pattern == schema.PACKAGE
    for key, bounds in (
        ("attempts", poolsnote.BOOT_ATTEMPTS),
        ("delay", poolsnote.BOOT_DELAY),
        ("lock_timeout", poolsnote.BOOT_LOCK),
    ):
        assert (boot[key].minimum, boot[key].maximum) == bounds


# --- the inventory's core ----------------------------------------------------------------------------------------


def test_the_inventory_prices_each_noted_pool_of_a_noted_cluster():
    gpu = poolsnote.pools_note(
        "web",
        [
            NotedPool("cp", 1, 2, 2048, None, 0, disk_size=10),
            NotedPool("gpu", 0, 4, 8192, "NVIDIA A100", 2, disk_size=40),
        ],
    )
    stranger = poolsnote.pools_note("zz", [NotedPool("cp", 9, 2, 2048, None, 0)])  # no creator or member note of zz
    found = [note("creator cluster=web"), note(gpu[1]), note(stranger[1])]
    records, warnings = vm_inventory.pool_records(CS, found, WHERE)
    assert warnings == []
    assert [(r["cluster"], r["name"], r["replicas"]) for r in records] == [("web", "cp", 1), ("web", "gpu", 0)]
    at_zero = records[1]
    assert at_zero["gpu"] == {"type": "NVIDIA A100", "count": 2}
    # one machine whole, as the plan prices it: 4 vCPUs, 8 GiB, 40 GiB of disk and 2 vGPUs
    whole = (4 * 12.0 + 8 * 3.5 + 40 * 0.1) / 730 + 2.0
    assert at_zero["per_machine_hourly"] == round(whole, 6) and at_zero["currency"] == "EUR"
    assert records[0]["gpu"] is None and records[0]["per_machine_hourly"] == round((2 * 12 + 2 * 3.5 + 1) / 730, 6)
    assert inventory_hosts.pool_group(at_zero) == "pool_gpu"
    assert inventory_hosts.pool_vars(at_zero) == {
        "capvco_pool_cluster": "web",
        "capvco_pool_cloudspace_id": "cs-1",
        "capvco_pool_cloudspace": "shop",
        "capvco_pool_location": "be-gen-1",
        "capvco_pool_replicas": 0,
        "capvco_pool_vcpus": 4,
        "capvco_pool_memory": 8192,
        "capvco_pool_disk": 40,
        "capvco_pool_gpu": {"type": "NVIDIA A100", "count": 2},
        "capvco_pool_per_machine_hourly": round(whole, 6),
        "capvco_pool_currency": "EUR",
    }
    assert [p["name"] for p in inventory_hosts.cluster_vars(records)["cluster_web"]["capvco_pools"]] == ["cp", "gpu"]
    # a price that is not known is never free: without a vgu price a GPU pool's price per machine is null, one
    # without GPUs is still known; without a su price neither is; a note that records no disk prices no machine
    no_vgu = vm_inventory._Location({}, None, dict(RATES, vgu=None))
    unknown, _ = vm_inventory.pool_records(CS, found, no_vgu)
    assert [r["per_machine_hourly"] for r in unknown] == [records[0]["per_machine_hourly"], None]
    unknown, _ = vm_inventory.pool_records(CS, found, vm_inventory._Location({}, None, dict(RATES, su=None)))
    assert [r["per_machine_hourly"] for r in unknown] == [None, None]
    old = poolsnote.pools_note("web", [NotedPool("cp", 1, 2, 2048, None, 0)])  # as an earlier release wrote it
    unknown, _ = vm_inventory.pool_records(CS, [note("creator cluster=web"), note(old[1])], WHERE)
    assert unknown[0]["disk"] is None and unknown[0]["per_machine_hourly"] is None
    # a noted cluster whose pools note does not parse: a warning, and none of its pools
    found = [note("member cluster=web"), note("pools cluster=web {{ lookup('pipe', 'id') }}")]
    records, warnings = vm_inventory.pool_records(CS, found, WHERE)
    assert records == [] and warnings == [
        "cloudspace 'shop': the pools note of cluster 'web' does not parse, or there is more than one: its pools are "
        "not shown"
    ]


def test_the_cache_keeps_the_pools_and_refuses_pools_of_another_shape():
    gpu = poolsnote.pools_note("web", [NotedPool("gpu", 0, 4, 8192, "NVIDIA A100", 2)])
    records, _ = vm_inventory.pool_records(CS, [note("creator cluster=web"), note(gpu[1])], WHERE)
    key = inventory_cache.fingerprint("http://x/api/1", "acme", [], [])
    got = inventory_records.Read([], ["w"], records)
    assert inventory_cache.from_cache(json.loads(json.dumps(inventory_cache.to_cache(got, key))), key) == got
    entry = inventory_cache.to_cache(got, key)
    for bad in (
        dict(entry, pools=None),
        dict(entry, pools=[{"name": "gpu"}]),
        dict(entry, pools=[dict(records[0], name=5)]),
        dict(entry, format=1),
    ):
        assert inventory_cache.from_cache(bad, key) is None
