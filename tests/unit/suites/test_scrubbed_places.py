"""Each place of the core that writes a platform string for a person runs it through the one scrubber (issue 46,
point 7), without a server: a diff's lines, the plan's summary lines and warnings, the orphan report, a currency,
the GPU profiles' lines and the inventory's host names and variables.  tests/integration/test_hostile_strings.py
walks the same places through the playbooks and a terminal's view of them."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import summary
from ansible_collections.whitesky.capvco.plugins.module_utils.faces import diff, inventory_hosts
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing, profiles
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub_lines
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import report
from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import diff_lines

HOSTILE = "\x1b[5m\u009b2J\u202e"
RAW = ("\x1b", "\u009b", "\u202e")


def raw(value):
    text = repr(value) if not isinstance(value, str) else value
    return [c for c in RAW if c in text]


def test_a_diffs_lines_each_scrubbed_and_a_text_sides_line_breaks_kept():
    side = diff.text(diff_lines("price", ["2.00 EUR" + HOSTILE + "/h", "vgu 2 vGPU"]))
    assert not raw(side) and side == "price 2.00 EUR\\x1b[5m\\x9b2J\\u202e/h\nprice vgu 2 vGPU\n"
    assert scrub_lines("a\x1b\nb\u009b\n") == "a\\x1b\nb\\x9b\n"


def test_the_currency_is_scrubbed_where_it_is_read_and_so_is_every_price_line():
    currency = billing.currency_of({"currency": "EUR" + HOSTILE})
    assert currency == "EUR\\x1b[5m\\x9b2J\\u202e"
    price = {"currency": "EUR" + HOSTILE, "hourly_added": 1.0, "hourly_removed": 0.0, "hourly_after": 1.0}
    view = {
        "cloudspace": {"name": "cs", "create": False},
        "create": [{"name": "m-0", "pool": "p"}],
        "delete": [],
        "reserve": [{"machine": "m-0", "slot": 0, "type": "NVIDIA A100", "profile": "p" + HOSTILE}],
        "release": ["r"],
        "attach": [],
        "price": price,
        "pools": [{"name": "p", "replicas": 0, "gpu": {"type": "T" + HOSTILE, "count": 1, "profile": "full"}}],
        "cloudspaces": [{"name": "cs" + HOSTILE, "delete": True}],
    }
    for line in summary.converge_lines(view, True) + summary.teardown_lines(dict(view, delete=["m-0"]), True):
        assert not raw(line), line
    assert not raw(summary.left_billed("m-0", 1, 1.0, "EUR" + HOSTILE, "loc"))


def test_the_orphan_reports_lines_are_scrubbed_whole():
    rows = [{"vgpu_name": "capvco.c.m.00.x", "cluster": "c", "machine": "m", "slot": 0, "age": 5,
             "vm_name": "evil" + HOSTILE, "cost": 1.5}]  # fmt: skip
    lines = report.report_lines(rows, {"cost_per_hour": 1.0, "total_cost": 1.5, "currency": "EUR" + HOSTILE})
    assert not raw(lines) and "evil\\x1b[5m" in lines[1] and lines[1].endswith("1.5")


def test_the_gpu_profiles_lines_are_scrubbed():
    class Client:
        def gpu_profiles(self, location):
            return [{"id": "p-1", "vendor": "NVIDIA", "model": "L4", "description": "L4" + HOSTILE,
                     "available_instances": 2}]  # fmt: skip

    got = profiles.profile_info(Client(), location="loc")
    assert got["lines"] == ["p-1: NVIDIA L4 (L4\\x1b[5m\\x9b2J\\u202e), 2 available"]


def test_the_inventorys_host_names_and_variables_are_scrubbed():
    host = {
        "vm_id": 1,
        "name": "evil" + HOSTILE,
        "cloudspace_id": "cs-1",
        "cloudspace": "shop" + HOSTILE,
        "location": "loc",
        "status": "RUNNING" + HOSTILE,
        "vcpus": 1,
        "memory": 1024,
        "storage": 10,
        "private_ips": [],
        "external_ips": [],
        "cluster": None,
        "pool": None,
        "vgpus": [
            {
                "vgpu_id": "v",
                "name": "n" + HOSTILE,
                "owner": None,
                "profile": "p",
                "type": None,
                "status": "ATTACHED",
                "cost_per_hour": 1.0,
            }
        ],  # fmt: skip
        "cost_per_hour": 1.0,
        "cost_by_unit": {"vgu": 1.0},
        "currency": "EUR" + HOSTILE,
    }
    assert inventory_hosts.hostname(host) == "evil\\x1b[5m\\x9b2J\\u202e"
    assert not raw(inventory_hosts.host_vars(host)) and inventory_hosts.host_vars(host)["whitesky_vcpus"] == 1
    pool = {
        "cluster": "web",
        "name": "gpu",
        "cloudspace_id": "cs-1",
        "cloudspace": "shop" + HOSTILE,
        "location": "loc",
        "replicas": 0,
        "vcpus": 1,
        "memory": 1024,
        "disk": 10,
        "gpu": {"type": "T" + HOSTILE, "count": 1},
        "per_machine_hourly": 1.0,
        "currency": "EUR" + HOSTILE,
    }
    assert not raw(inventory_hosts.pool_vars(pool)) and not raw(inventory_hosts.cluster_vars([pool]))
