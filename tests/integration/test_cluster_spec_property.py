"""The cluster spec as a property, against a live cluster in the real emulator.

Hypothesis draws specs for a live cluster: valid ones (pools added, scaled, dropped; GPU counts changed; within the
location's capacity or not), and invalid mutations of them (wrong types, negatives, floats, unknown and misspelt
keys, names with spaces, ``=`` or a final newline).

- every invalid spec fails naming the mutated field, in check mode and for real, and the emulator's snapshot
  (cloudspaces, notes, VMs, reservations) is identical afterwards;
- for every valid spec, the check-mode plan equals what the real run then did (cloudspace, machines created and
  deleted, slots reserved, reservations released), or both refuse it for the same reason (capacity);
- after a real run, the cluster is the spec: its machines, and each GPU machine's slots, attached.

``CAPVCO_SPEC_EXAMPLES`` sets the number of specs drawn (``make test``: 100; ``make chaos``: 1,000).  The figures are
written to tests/output/spec-property.json and printed.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import run as cluster
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.errors import InsufficientCapacity
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import poolsread
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError

from helpers import Emulator, save_figures
from properties import env_examples
from test_gpu import live

EXAMPLES = env_examples("CAPVCO_SPEC_EXAMPLES", 100)
LOC = "be-gen-1"
NAME = "pt"
KEYS = ("cloudspace_created", "created", "deleted", "reserved", "released")


def said(result):
    """What a result of the cluster module says it did, its plan's cloudspace step, its pools with their prices and
    its pools note (check mode and the run that follows must say the same)."""
    plan = result["plan"]
    return dict(
        {k: result[k] for k in KEYS},
        changed=result["changed"],
        plan=plan["cloudspace"],
        pools=plan["pools"],
        pools_note=plan["pools_note"],
    )


FIGURES = {
    "drawn": 0,
    "invalid": 0,
    "valid_applied": 0,
    "valid_refused": 0,
    "snapshot_changes": 0,
    "plan_mismatches": 0,
}

POOL_NAMES = ("gpu", "cpu", "big")
GPU_TYPES = ("NVIDIA A100", "NVIDIA L4")


@st.composite
def valid_specs(draw):
    pools = []
    for name in draw(st.lists(st.sampled_from(POOL_NAMES), unique=True, max_size=2)):
        pool = {"name": name, "replicas": draw(st.integers(0, 3)), "vcpus": 2, "memory": 1024, "image": 12}
        if draw(st.booleans()):
            gpu = {"type": draw(st.sampled_from(GPU_TYPES)), "count": draw(st.integers(1, 4))}
            if draw(st.booleans()):
                gpu["driverVersion"] = draw(st.sampled_from(["550", "550.127.05", "", 535]))
            pool["gpu"] = gpu
        pools.append(pool)
    return {
        "cluster": {"name": NAME, "location": LOC, "cloudspace": NAME + "-cs"},
        "control_plane": {"replicas": draw(st.integers(0, 2)), "vcpus": 1, "memory": 1024, "image": 12},
        "pools": pools,
        "first_boot": {"packages": draw(st.lists(st.sampled_from(["containerd", "kubelet=1.30*"]), max_size=2))},
        # a pool dropped is deleted only when the spec says so (issue 46): the names it does not list
        "remove_pools": [n for n in POOL_NAMES if n not in {p["name"] for p in pools}],
    }


BAD_VALUES = ("two", 1.5, -1, True, [], {}, "a b", "x=y", "nl\n", None, "")


@st.composite
def mutations(draw, spec):
    """A spec with one field made invalid: ``(spec, path)``, the path the error must name."""
    spec = copy.deepcopy(spec)
    targets = [("cluster", ["cluster"], k) for k in ("name", "location", "cloudspace")]
    targets += [("control_plane", ["control_plane"], k) for k in ("replicas", "vcpus", "memory")]
    for i, pool in enumerate(spec["pools"]):
        targets += [("pools[%d]" % i, ["pools", i], k) for k in ("name", "replicas", "vcpus", "memory")]
        if "gpu" in pool:
            targets += [("pools[%d].gpu" % i, ["pools", i, "gpu"], k) for k in ("type", "count", "driverVersion")]
    targets += [("first_boot", ["first_boot"], "packages")]
    prefix, where, key = draw(st.sampled_from(targets))
    node = spec
    for step in where:
        node = node[step]
    kind = draw(st.sampled_from(["value", "unknown", "misspelt"]))
    if kind == "unknown":
        node["colour"] = "blue"
        return spec, "%s.colour: unknown key" % prefix
    if kind == "misspelt":
        node[key.lower() + "s" if key != key.lower() else key[:-1] + key[-1].upper()] = node.pop(key, 1)
        return spec, "%s." % prefix
    value = draw(st.sampled_from(BAD_VALUES))
    if key == "packages":
        value = draw(st.sampled_from([["curl; id"], ["a b"], "curl", [5]]))
    elif key in ("name", "location", "cloudspace", "type", "driverVersion"):
        value = draw(st.sampled_from(["a b", "x=y", "nl\n", 5.5, [], ""] if key != "type" else [5.5, [], ""]))
        if key == "driverVersion":
            value = draw(st.sampled_from(["550; touch x", "550-server", "nl\n", 5.5, []]))
    else:
        value = draw(st.sampled_from(["two", 1.5, -1, True, [], {}, "x", 10**9]))
    if value is None or (value == "" and key in ("cloudspace",)):
        value = "a b"
    node[key] = value
    return spec, "%s.%s" % (prefix, key)


def live_cluster(emu):
    with emu.client() as client:
        cluster.converge(
            client,
            {
                "cluster": {"name": NAME, "location": LOC, "cloudspace": NAME + "-cs"},
                "control_plane": {"replicas": 1, "vcpus": 1, "memory": 1024, "image": 12},
                "pools": [
                    {
                        "name": "gpu",
                        "replicas": 2,
                        "vcpus": 2,
                        "memory": 1024,
                        "image": 12,
                        "gpu": {"type": "NVIDIA A100", "count": 1},
                    }
                ],
            },
        )


def converged(emu, spec):
    """The cluster is its spec: the machines, and every GPU machine's slots live and attached."""
    with emu.client() as client:
        spaces = [c for c in client.cloudspaces() if c["name"] == NAME + "-cs"]
        vms = sorted(v["name"] for v in client.vms(spaces[0]["cloudspace_id"]))
    wanted = ["%s-cp-%d" % (NAME, i) for i in range(spec["control_plane"]["replicas"])]
    slots = 0
    for pool in spec["pools"]:
        wanted += ["%s-%s-%d" % (NAME, pool["name"], i) for i in range(pool["replicas"])]
        slots += pool["replicas"] * pool.get("gpu", {}).get("count", 0)
    assert vms == sorted(wanted)
    held = live(emu, NAME)
    assert len(held) == slots and all(g["vm_id"] is not None for g in held), held
    # the cluster's one pools note says every pool of the spec, a pool at zero included
    noted = [
        poolsread.note_pools(n["title"], n["content"])
        for n in emu.snapshot()["notes"]
        if n["cloudspace_id"] == spaces[0]["cloudspace_id"] and poolsread.pools_note_cluster(n["title"], n["content"])
    ]
    pools = [dict(spec["control_plane"], name="cp")] + spec["pools"]
    assert [(c, tuple((*p[:6], p.disk_size) for p in ps)) for c, ps in noted] == [
        (
            NAME,
            tuple(
                (p["name"], p["replicas"], p["vcpus"], p["memory"], (p.get("gpu") or {}).get("type"),
                 (p.get("gpu") or {}).get("count", 0), p.get("diskSize") or 10)  # image 12's boot disk: 10 GiB
                for p in pools
            ),
        )
    ], noted  # fmt: skip
    # ... and what its machines are made from (issue 46: a scale of one pool makes them from it)
    assert [(p.image, p.driver_version) for p in noted[0][1]] == [
        (p["image"], str((p.get("gpu") or {}).get("driverVersion", ""))) for p in pools
    ]


def priced(plan):
    """Each pool's price is one machine of it whole (its vCPUs, memory, boot disk and vGPUs at the plan's unit
    prices) times its machines: a pool at zero costs nothing, and keeps its price per machine; the plan's whole price
    is its units'."""
    rate = {u: line["per_hour"] for u, line in plan["price"]["units"].items()}
    price = plan["price"]
    assert price["hourly_after"] == pytest.approx(sum(u["hourly_after"] for u in price["units"].values()), abs=1e-3)
    for p in plan["pools"]:
        count = (p["gpu"] or {}).get("count", 0)
        one = p["vcpus"] * rate["vcu"] + p["memory"] / 1024 * rate["mu"] + p["disk_size"] * rate["su"]
        one += count * rate["vgu"]
        assert p["per_machine_hourly"] == pytest.approx(one, abs=1e-3)
        assert p["hourly"] == pytest.approx(p["replicas"] * one, abs=1e-3)


def test_specs_drawn_against_a_live_cluster(tmp_path):
    """Specs drawn by hypothesis (valid and not) converged on one live cluster through the core: a bad one is refused
    naming its field, in check mode and for real, and changes nothing; a good one's check-mode plan is what the run
    then does, its price is what the cluster then holds, and a second run writes nothing; the only property test of
    the spec against a platform's state."""
    emu = Emulator(tmp_path / "emulator-state").start()
    try:
        live_cluster(emu)
        client = emu.client(backoff=0.01)

        @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(data=st.data())
        def check(data):
            spec = data.draw(valid_specs())
            FIGURES["drawn"] += 1
            if data.draw(st.booleans()):
                bad, path = data.draw(mutations(spec))
                FIGURES["invalid"] += 1
                before = emu.snapshot()
                for mode in (True, False):
                    try:
                        cluster.converge(client, bad, mode)
                    except InputError as exc:
                        assert path in str(exc), (path, str(exc))
                    else:
                        raise AssertionError("an invalid spec was accepted (%s): %r" % (path, bad))
                if emu.snapshot() != before:
                    FIGURES["snapshot_changes"] += 1
                    raise AssertionError("an invalid spec changed the platform (%s)" % path)
                return
            before = emu.snapshot()
            try:
                plan = cluster.converge(client, spec, True)
            except InsufficientCapacity as exc:
                try:
                    cluster.converge(client, spec)
                except InsufficientCapacity as again:
                    assert str(again) == str(exc)
                else:
                    raise AssertionError("check mode refused what the real run did") from None
                assert emu.snapshot() == before, "a refused plan changed the platform"
                FIGURES["valid_refused"] += 1
                return
            done = cluster.converge(client, spec)

            if said(plan) != said(done):
                FIGURES["plan_mismatches"] += 1
                raise AssertionError((said(plan), said(done)))
            FIGURES["valid_applied"] += 1
            converged(emu, spec)
            # the plan's price is what the run then holds: as many vGPUs as it said, reserved and released as it said
            price, held = done["plan"]["price"], live(emu, NAME)
            assert price["vgpus_after"] == len(held), (price, len(held))
            assert len(done["reserved"]) - len(done["released"]) == price["vgpus_after"] - price["vgpus_before"]
            priced(done["plan"])
            again = cluster.converge(client, spec, True)
            assert not again["changed"] and again["plan"]["pools_note"]["write"] is None, "an idle run writes nothing"

        try:
            check()
        except BaseException as exc:  # kept in the figures: a failure is seen whole, also from a loaded CI run
            FIGURES["failure"] = "%s: %s" % (type(exc).__name__, str(exc)[:4000])
            raise
    finally:
        client.close() if "client" in locals() else None
        emu.stop()
        save_figures("spec-property.json", FIGURES, "spec property")
    assert FIGURES["invalid"] and FIGURES["valid_applied"], FIGURES
