"""The price before buying is the whole bill (issue 46, points 10 and 17), against the emulator: a plan's price
counts every unit the platform bills of what the cluster holds (its machines' vCPUs ``vcu``, memory ``mu`` and boot
disks ``su``, its cloudspace's public address ``piu``, its vGPUs ``vgu``), from the location's price list;
``max_hourly_cost`` caps the whole; and every place that shows a price says the same figure: the plan, the summary
line, the diff, check mode, the inventory's cost variables and ``location_info``'s prices per hour.  A unit the
location has no price for is absent from the emulator's answer, as the platform may answer it, and the cap refuses
a plan that holds some of it (its price unknown, never 0) before anything is made."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from test_inventory import inventory

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import run as cluster
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import catalog
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError

from helpers import ROOT, run_playbook, task_results

LOC = "be-gen-1"
HOURS = 730.0
CONVERGE = "Converge the cluster to its spec (cloudspace, every pool's machines and GPUs by type)"


def no_gpu(name="wp"):
    """The issue's plan: 3 machines, 20 vCPUs and 72 GiB together, no GPU (boot disks: the image's 10 GiB)."""
    return {
        "cluster": {"name": name, "location": LOC, "cloudspace": name + "-cs"},
        "control_plane": {"replicas": 1, "vcpus": 4, "memory": 8192, "image": 12},
        "pools": [{"name": "w", "replicas": 2, "vcpus": 8, "memory": 32768, "image": 12}],
    }


def with_gpu(name="wg", replicas=2):
    s = no_gpu(name)
    s["pools"] = [
        {
            "name": "gpu",
            "replicas": replicas,
            "vcpus": 8,
            "memory": 16384,
            "image": 12,
            "diskSize": 40,
            "gpu": {"type": "NVIDIA A100", "count": 1, "driverVersion": "550", "profile": "full"},
        }
    ]
    return s


ABSENT = object()


def hold_prices(emu, location=LOC, **units):
    """The location's price list as the emulator's store holds it, each unit given set (``ABSENT``: removed): what
    a platform without a price for it answers."""
    import sqlite3

    db = sqlite3.connect(os.path.join(emu.state_dir, "state.db"), timeout=30)
    try:
        (text,) = db.execute("SELECT prices FROM locations WHERE name=?", (location,)).fetchone()
        prices = json.loads(text)
        for unit, value in units.items():
            if value is ABSENT:
                prices.pop(unit, None)
            else:
                prices[unit] = value
        db.execute("UPDATE locations SET prices=? WHERE name=?", (json.dumps(prices), location))
        db.commit()
    finally:
        db.close()


def converge(emu, s, check=False, **kw):
    with emu.client(backoff=0.01) as client:
        return cluster.converge(client, s, check, **kw)


def hourly(emu):
    """The location's hourly price of each unit, as the emulator's price list says it (monthly / 730)."""
    with emu.client() as client:
        resources = client.prices(LOC)["resources"]
    return {unit: resources[unit] / HOURS for unit in ("vcu", "mu", "su", "fsu", "piu", "vgu")}


def held(emu, cluster_name):
    """What the cluster holds on the platform now, by unit, as its listings say it: its VMs' vCPUs, memory (GiB)
    and boot disks (``storage``, GiB), one public address per cloudspace of its name, its live reservations."""
    with emu.client() as client:
        spaces = [c["cloudspace_id"] for c in client.cloudspaces() if c["name"] == cluster_name + "-cs"]
        vms = [v for cs in spaces for v in client.vms(cs)]
        reservations = [i for i in client.vgpus(LOC) if ".%s." % cluster_name in i["vgpu_name"]]
    return {
        "vcu": sum(v["vcpus"] for v in vms),
        "mu": sum(v["memory"] for v in vms) / 1024,
        "su": sum(v["storage"] for v in vms),
        "fsu": 0,
        "piu": len(spaces),
        "vgu": len(reservations),
    }


def costs(amounts, rates):
    return sum(amounts[u] * rates[u] for u in amounts)


def test_a_plan_without_gpus_prices_its_vcpus_memory_disks_and_address_and_the_cap_refuses_it(emulator):
    """The issue's case: 3 machines of 20 vCPUs and 72 GiB without GPUs showed +0.00 EUR/h, and
    max_hourly_cost=0.01 let it through.  Now the plan prices every unit, the cap refuses it before anything is
    made, and once applied the platform holds what the plan priced."""
    rates = hourly(emulator)
    plan = converge(emulator, no_gpu(), check=True)["plan"]
    price = plan["price"]
    after = {"vcu": 20, "mu": 72, "su": 30, "fsu": 0, "piu": 1, "vgu": 0}
    assert {u: line["after"] for u, line in price["units"].items()} == after
    assert price["hourly_after"] == pytest.approx(costs(after, rates), abs=1e-3) and price["hourly_after"] > 0.6
    assert price["hourly_added"] == price["hourly_after"] and price["hourly_before"] == 0.0
    assert price["units"]["vcu"]["hourly_after"] == pytest.approx(20 * 12.0 / HOURS, abs=1e-4)
    assert price["units"]["mu"]["size"] == "GiB of memory" and price["units"]["su"]["size"] == "GiB of boot disk"
    # each pool's price is one machine whole, and the plan's is the pools' and the cloudspace's address
    cp, w = plan["pools"]
    assert cp["per_machine_hourly"] == pytest.approx(4 * rates["vcu"] + 8 * rates["mu"] + 10 * rates["su"], abs=1e-4)
    assert w["hourly"] == pytest.approx(2 * (8 * rates["vcu"] + 32 * rates["mu"] + 10 * rates["su"]), abs=1e-3)
    assert cp["hourly"] + w["hourly"] + rates["piu"] == pytest.approx(price["hourly_after"], abs=1e-3)

    before = emulator.snapshot()
    with pytest.raises(InputError) as refused:
        converge(emulator, no_gpu(), max_hourly_cost=0.01)
    assert emulator.snapshot() == before, "a plan over its budget made something"
    msg = str(refused.value)
    assert msg.startswith("the plan costs %.4f EUR per hour once applied (vcu 20 vCPU: " % price["hourly_after"])
    assert "mu 72 GiB of memory: 0.3452" in msg and "over max_hourly_cost 0.01; nothing was changed" in msg

    done = converge(emulator, no_gpu(), max_hourly_cost=1.0)
    assert done["created"] == ["wp-cp-0", "wp-w-0", "wp-w-1"]
    assert held(emulator, "wp") == after, "the platform holds what the plan priced"
    idle = converge(emulator, no_gpu())
    assert not idle["changed"] and idle["plan"]["price"]["hourly_before"] == price["hourly_after"]
    assert (
        idle["summary"][0]
        == "done: no change: 0 vGPUs, %.2f EUR/h (vcu 0.33, mu 0.35, su 0.00, piu 0.01)" % (price["hourly_after"])
    )


def test_a_scale_down_prices_what_it_deletes_and_releases_and_the_summary_and_diff_say_the_same(emulator):
    """A plan that deletes a GPU machine: what it removes is the machine whole (its vCPUs, memory, 40 GiB disk and
    its vGPU), and the summary line and the diff of check mode give the plan's figures, by unit."""
    rates = hourly(emulator)
    converge(emulator, with_gpu(replicas=2))
    rc, out, data = run_playbook(
        os.path.join(ROOT, "playbooks", "cluster_create.yml"),
        emulator,
        extra_vars=with_gpu(replicas=1),
        check=True,
        diff=True,
    )
    assert rc == 0, out[-3000:]
    (result,) = task_results(data, CONVERGE)
    price = result["plan"]["price"]
    one = {"vcu": 8, "mu": 16, "su": 40, "vgu": 1}
    assert {u: price["units"][u]["removed"] for u in one} == one
    assert price["hourly_removed"] == pytest.approx(sum(one[u] * rates[u] for u in one), abs=1e-3)
    assert price["hourly_after"] == pytest.approx(price["hourly_before"] - price["hourly_removed"], abs=1e-3)
    line = result["summary"][0]
    assert line.startswith(
        "plan: delete 1 machine (wg-gpu-1), release 1 vGPU: -%.2f EUR/h, %.2f EUR/h after"
        % (price["hourly_removed"], price["hourly_after"])
    ), line
    assert "vgu 1.00" in line and "su 0.01" in line
    after = result["diff"]["after"].splitlines()
    assert "price %.2f EUR/h" % price["hourly_after"] in after
    assert "price vgu 1 vGPU 1.00 EUR/h" in after and "price su 50 GiB of boot disk 0.01 EUR/h" in after
    assert "price vgu 2 vGPU 2.00 EUR/h" in result["diff"]["before"].splitlines()


def test_the_inventory_and_location_info_say_what_the_plan_says(emulator, tmp_path):
    """The inventory's cost variables are the machines' whole prices, at the same units and prices as the plan's:
    a GPU machine's ``whitesky_cost_per_hour`` is its pool's ``per_machine_hourly``, and so is the pool group's
    ``capvco_pool_per_machine_hourly``; ``location_info`` gives each unit's price per hour, named."""
    done = converge(emulator, with_gpu(replicas=1))
    pools = {p["name"]: p for p in done["plan"]["pools"]}
    src = tmp_path / "price.whitesky.yml"
    src.write_text(yaml.safe_dump({"plugin": "whitesky.capvco.vms", "locations": [LOC], "cloudspaces": ["wg-cs"]}))
    proc = inventory(emulator, src, "--list", "--export")
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout, object_hook=lambda o: o.get("__ansible_unsafe", o) if len(o) == 1 else o)
    hostvars = data["_meta"]["hostvars"]
    gpu, cp = hostvars["wg-gpu-0"], hostvars["wg-cp-0"]
    assert gpu["whitesky_cost_per_hour"] == pytest.approx(pools["gpu"]["per_machine_hourly"], abs=1e-4)
    assert cp["whitesky_cost_per_hour"] == pytest.approx(pools["cp"]["per_machine_hourly"], abs=1e-4)
    assert set(gpu["whitesky_cost_by_unit"]) == {"vcu", "mu", "su", "vgu"} and gpu["whitesky_storage"] == 40
    group = data["pool_gpu"]["vars"]
    assert group["capvco_pool_per_machine_hourly"] == pytest.approx(pools["gpu"]["per_machine_hourly"], abs=1e-4)
    assert group["capvco_pool_disk"] == 40

    with emulator.client() as client:
        (where,) = catalog.location_info(client, name=LOC, gpus=False)["locations"]
    rates = hourly(emulator)
    for unit in ("vcu", "mu", "su", "fsu", "piu", "vgu"):
        assert where["hourly"][unit]["per_hour"] == pytest.approx(rates[unit], abs=1e-6), unit
    assert where["hourly"]["vcu"]["what"] == "vCPU" and where["hourly"]["piu"]["what"] == "public IP address"
    assert where["hourly"]["wu"]["what"].startswith("Windows licence")


def test_the_awx_budget_question_asks_for_the_whole_price():
    """The AWX survey asks for a budget of the whole price, as the plan caps it (not the vGPUs alone)."""
    with open(os.path.join(ROOT, "awx", "job_templates.yml"), encoding="utf-8") as fh:
        templates = yaml.safe_load(fh)["awx_job_templates"]
    (question,) = [q for q in templates[0]["survey"] if q["variable"] == "max_hourly_cost"]
    assert "whole" in question["question_name"] and "vCPUs" in question["question_name"]
    assert "vGPUs cost more" not in question["question_name"]


@pytest.mark.parametrize(
    ("unit", "make"),
    [("vgu", lambda: with_gpu("mv")), ("mu", lambda: no_gpu("mm")), ("su", lambda: no_gpu("ms"))],
    ids=["vgu of a GPU cluster", "mu", "su"],
)
def test_a_unit_the_location_has_no_price_for_is_absent_and_the_cap_refuses_a_plan_that_holds_it(emulator, unit, make):
    """Issue 46, point 17: the emulator filled a unit it had no price for with 0.0, so a location without a vGPU
    price looked free and the cluster module with max_hourly_cost 0.5 reserved 2 vGPUs and made 3 VMs.  It serves
    the price list as it holds it: the unit is absent; the plan's price is unknown (never 0), the capped run is
    refused naming the unit, and nothing is created, through the module and through the playbook."""
    hold_prices(emulator, **{unit: ABSENT})
    with emulator.client() as client:
        assert unit not in client.prices(LOC)["resources"], "absent, not 0.0"
        (listed,) = [i for i in client.locations()[0] if i["location"] == LOC]
        assert unit not in listed["resources"]
    spec = make()
    plan = converge(emulator, spec, check=True)
    price = plan["plan"]["price"]
    assert price["hourly_after"] is None and price["hourly_added"] is None
    assert price["units"][unit]["per_hour"] is None and price["units"][unit]["hourly_after"] is None
    assert "unknown price" in plan["summary"][0]
    before = emulator.snapshot()
    with pytest.raises(InputError) as refused:
        converge(emulator, spec, max_hourly_cost=0.5)
    assert "max_hourly_cost 0.5 cannot be checked: the platform's price list has no %s price" % unit in str(
        refused.value
    )
    assert "nothing was changed" in str(refused.value)
    assert emulator.snapshot() == before, "a plan whose price is unknown made something"
    rc, out, _data = run_playbook(
        os.path.join(ROOT, "playbooks", "cluster_create.yml"), emulator, extra_vars=dict(spec, max_hourly_cost=0.5)
    )
    assert rc != 0 and "cannot be checked" in out, out[-3000:]
    assert emulator.snapshot() == before
    assert emulator.op_count("createVirtualMachine") == 0 and emulator.op_count("createCloudspace") == 0


def test_a_unit_the_cluster_holds_none_of_costs_nothing_whatever_its_price(emulator):
    """A location without a vGPU price prices a cluster without GPUs: it holds no vGPU, so that price is not
    needed; the cap checks the rest."""
    hold_prices(emulator, vgu=ABSENT, fsu=ABSENT)
    plan = converge(emulator, no_gpu("nv"), check=True)["plan"]
    assert plan["price"]["hourly_after"] is not None and plan["price"]["units"]["vgu"]["per_hour"] is None
    done = converge(emulator, no_gpu("nv"), max_hourly_cost=1.0)
    assert done["created"] == ["nv-cp-0", "nv-w-0", "nv-w-1"]
