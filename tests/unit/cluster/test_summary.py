"""The lines a person reads of a plan and of a run (cluster.summary): what changes, and what it costs."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import summary


def view(**over):
    base = {
        "cloudspace": {"name": "web-cs", "create": False},
        "create": [],
        "delete": [],
        "reserve": [],
        "release": [],
        "attach": [],
        "price": {
            "currency": "EUR",
            "per_vgpu_hour": 1.0,
            "vgpus_before": 2,
            "vgpus_after": 2,
            "hourly_before": 2.0,
            "hourly_added": 0.0,
            "hourly_removed": 0.0,
            "hourly_after": 2.0,
        },
        "pools": [],
    }
    base.update(over)
    return base


def test_a_plan_says_what_it_makes_and_what_it_adds_per_hour():
    v = view(
        create=[{"name": "web-gpu-%d" % i, "pool": "gpu"} for i in range(7)],
        reserve=[{"machine": "web-gpu-0", "slot": 0, "type": "NVIDIA A100", "profile": "nvidia-a100-40c"}] * 3,
        price=dict(view()["price"], vgpus_after=5, hourly_added=3.0, hourly_after=5.0),
    )
    (line,) = summary.converge_lines(v, check_mode=True)
    assert line == (
        "plan: create 7 machines (web-gpu-0, web-gpu-1, web-gpu-2, web-gpu-3, web-gpu-4, and 2 more), "
        "reserve 3 x NVIDIA A100 (nvidia-a100-40c): +3.00 EUR/h, 5.00 EUR/h after"
    )


def test_an_unknown_price_is_never_shown_as_free():
    price = dict(view()["price"], hourly_added=None, hourly_removed=None, hourly_after=None, hourly_before=None)
    v = view(release=["capvco.web.web-gpu-0.00.0000000"], price=price)
    assert summary.converge_lines(v, check_mode=False) == ["done: release 1 vGPU: unknown price, unknown price after"]
    assert summary.money(None, "EUR") == "unknown price" and summary.money(0.0, None) == "0.00/h"


def test_an_idle_run_says_what_the_cluster_costs_now_and_a_pool_at_zero_its_price_per_machine():
    pools = [
        {"name": "burst", "replicas": 0, "gpu": {"type": "NVIDIA L4", "count": 2}, "per_machine_hourly": 2.0},
        {"name": "cp", "replicas": 1, "gpu": None, "per_machine_hourly": 0.0},
    ]
    assert summary.converge_lines(view(pools=pools), check_mode=False) == [
        "done: no change: 2 vGPUs, 2.00 EUR/h",
        "pool burst at 0 machines: nothing billed; 2.00 EUR/h a machine of 2 x NVIDIA L4 when scaled up",
    ]


def test_a_teardown_says_what_it_saves_and_a_force_delete_what_it_leaves_billed():
    v = {
        "cloudspaces": [{"name": "web-cs", "delete": True}],
        "delete": ["web-cp-0", "web-gpu-0"],
        "release": ["a", "b"],
        "price": dict(view()["price"], hourly_removed=2.0, hourly_after=0.0),
    }
    assert summary.teardown_lines(v, check_mode=True) == [
        "plan: delete 2 machines (web-cp-0, web-gpu-0), release 2 vGPUs, delete cloudspace web-cs: -2.00 EUR/h,"
        " 0.00 EUR/h after"
    ]
    assert summary.left_billed("web-gpu-1", 2, 1.0, "EUR", "be-gen-1").startswith(
        "machine web-gpu-1 was deleted by force with 2 vGPUs attached: still reserved and billed (2.00 EUR/h) until the"
        " orphan check releases them"
    )


def _units(**after):
    """A price's ``units`` with these amounts after, at 1.0 an hour each (``None``: the unit's price not known)."""
    out = {}
    for unit in ("vcu", "mu", "su", "fsu", "piu", "vgu"):
        amount, rate = after.get(unit, (0.0, 1.0))
        out[unit] = {
            "size": unit + "-size",
            "per_hour": rate,
            "before": 0.0,
            "added": amount,
            "removed": 0.0,
            "after": amount,
            "hourly_after": None if rate is None and amount else (amount * (rate or 0.0)),
        }
    return out


def test_the_line_and_the_diff_give_each_unit_held_and_an_unknown_one_as_unknown():
    """Issue 46, point 10: the summary line names what each unit held costs per hour, the diff each unit's amount
    and cost; a unit whose price is not known says so, and one held by none is left out."""
    units = _units(vcu=(20.0, 0.0164), mu=(72.0, None), vgu=(2.0, 1.0))
    price = dict(view()["price"], hourly_added=None, hourly_after=None, units=units)
    (line,) = summary.converge_lines(view(create=[{"name": "web-cp-0", "pool": "cp"}], price=price), True)
    assert line.endswith(": unknown price, unknown price after (vcu 0.33, mu unknown, vgu 2.00)"), line
    after = summary.price_lines(price, "after")
    assert after == [
        "unknown price",
        "vcu 20 vcu-size 0.33 EUR/h",
        "mu 72 mu-size unknown price",
        "vgu 2 vgu-size 2.00 EUR/h",
    ]
    assert summary.price_lines(price, "before") == ["2.00 EUR/h"]
