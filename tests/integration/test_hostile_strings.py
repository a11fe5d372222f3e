"""Every platform string that reaches a person goes through the one scrubber (issue 46, point 7), against the
emulator: a location whose currency is ``"EUR\\x1b[5m"`` (and a C1 CSI, a bidirectional override), a VM named with
the same, walked through every place a person reads - the plan's summary line and ``--diff`` price lines, the
budget's refusal, the warning of a machine deleted by force, the progress lines, the orphan report, and the
inventory's host names and variables (``--graph --vars`` prints them as they are) - as a terminal shows them: not
one control character arrives raw, and each place shows the escaped text."""

from __future__ import annotations

import json
import os
import sqlite3

import yaml
from test_inventory import inventory
from test_person_sees import default_callback

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from capvco_lab.specs import cluster_spec

LOC = "be-gen-1"
#: A blinking escape, a C1 CSI that clears the screen (a terminal may take U+009B as ESC [), a right-to-left
#: override: what a hostile platform answer could carry.
HOSTILE = "\x1b[5m\u009b2J\u202e"
CURRENCY = "EUR" + HOSTILE
SHOWN = "EUR\\x1b[5m\\x9b2J\\u202e"  # the scrubber's text of it
RAW = ("\x1b", "\u009b", "\u202e")


def hostile_currency(emu):
    """The location's currency, and a GPU profile's description, as a hostile platform might answer them (the
    emulator's store, written directly)."""
    db = sqlite3.connect(os.path.join(emu.state_dir, "state.db"), timeout=30)
    try:
        db.execute("UPDATE locations SET currency=? WHERE name=?", (CURRENCY, LOC))
        db.execute("UPDATE gpu_profiles SET description=? WHERE id=?", ("L4" + HOSTILE, "nvidia-l4-24q"))
        db.commit()
    finally:
        db.close()


def shows(out, text):
    """Whether ``out`` shows ``text``: as it is (a diff, a warning), or as the callback writes a result's string in
    JSON (a backslash doubled)."""
    return text in out or json.dumps(text)[1:-1] in out


def clean(out, where):
    found = [repr(c) for c in RAW if c in out]
    assert not found, "%s: %s arrives raw in:\n%s" % (where, ", ".join(found), out[-3000:])


def test_a_hostile_currency_and_vm_name_reach_no_terminal_raw(emulator, tmp_path):
    hostile_currency(emulator)
    spec = cluster_spec("hs", "hs-cs", gpu_replicas=2, count=1)

    # the plan: its summary line and its --diff price lines (where the currency arrived raw)
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", spec, "--check", "--diff")
    assert rc == 0, out[-3000:]
    clean(out, "cluster_create --check --diff")
    assert "+price 2.26 %s/h" % SHOWN in out, out[-3000:]
    assert shows(out, "2.26 %s/h after" % SHOWN), out[-3000:]

    # the budget's refusal names the price and its currency
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", dict(spec, max_hourly_cost=0.01))
    assert rc != 0 and "over max_hourly_cost 0.01" in out, out[-3000:]
    clean(out, "the budget's refusal")
    assert "per hour once applied" in out and shows(out, SHOWN), out[-3000:]

    # the real run: its progress lines, its summary line
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", spec)
    assert rc == 0, out[-3000:]
    clean(out, "cluster_create")
    assert "vGPU slot 0 reserved" in out and shows(out, "%s/h after" % SHOWN), out[-3000:]

    # a machine deleted by force: the warning of what it leaves billed, and its price
    rc, out = default_callback(emulator, "whitesky.capvco.machine_delete", dict(spec, machine="hs-gpu-1", force=True))
    assert rc == 0, out[-3000:]
    clean(out, "machine_delete force")
    assert shows(" ".join(out.split()), "still reserved and billed (1.00 %s/h)" % SHOWN), out[-3000:]

    # a VM whose name is hostile holds a reservation of a machine that is gone: the orphan report names both
    with emulator.client() as client:
        (cs,) = [c["cloudspace_id"] for c in client.cloudspaces() if c["name"] == "hs-cs"]
        vm = client.create_vm(cs, name="evil" + HOSTILE, description="made by hand", vcpus=1, memory=1024)
        client.reserve_attach_vgpu(cs, vm, "nvidia-a100-40c", naming.encode("hs", "hs-gone-0", 0, created=1))
    rc, out = default_callback(emulator, "whitesky.capvco.gpu_orphans", {"location": LOC, "grace_period": 0})
    assert rc != 0 and "hs-gone-0" in out, out[-3000:]
    clean(out, "gpu_orphans")
    assert shows(out, "evil\\x1b[5m") and shows(out, SHOWN), out[-3000:]
    rc, out = default_callback(
        emulator, "whitesky.capvco.gpu_orphans", {"location": LOC, "grace_period": 0, "reclaim": True}
    )
    clean(out, "gpu_orphans -e reclaim=true")  # the two orphans: the one deleted by force left, and the hostile VM's
    assert shows(out, "released now: 2 (saving 2.0 %s per hour)" % SHOWN), out[-3000:]

    # a location's GPU profiles as the playbook lists them
    rc, out = default_callback(emulator, "whitesky.capvco.gpu_profiles", {"location": LOC})
    assert rc == 0, out[-3000:]
    clean(out, "gpu_profiles")
    assert shows(out, "nvidia-l4-24q: NVIDIA L4 (L4\\x1b[5m"), out[-3000:]

    # the inventory: the hostile VM's host name and every host's variables, as --graph --vars and --list show them
    src = tmp_path / "hostile.whitesky.yml"
    src.write_text(yaml.safe_dump({"plugin": "whitesky.capvco.vms", "locations": [LOC], "cloudspaces": ["hs-cs"]}))
    for args in (("--graph", "--vars"), ("--list",), ("--host", "hs-cp-0")):
        proc = inventory(emulator, src, *args)
        assert proc.returncode == 0, proc.stderr[-3000:]
        clean(proc.stdout + proc.stderr, "ansible-inventory " + " ".join(args))
    graph = inventory(emulator, src, "--graph", "--vars").stdout
    assert "evil\\x1b[5m" in graph and SHOWN in graph, graph[-3000:]
    listed = json.loads(inventory(emulator, src, "--list").stdout, object_hook=plain)
    hosts = listed["_meta"]["hostvars"]
    assert "evil" + SHOWN[3:] in hosts and hosts["hs-cp-0"]["whitesky_currency"] == SHOWN


def plain(obj):
    return obj["__ansible_unsafe"] if set(obj) == {"__ansible_unsafe"} else obj
