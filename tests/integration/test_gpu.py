"""GPUs by type against the running emulator: modules three ways, faults, kills, sweeps, bad input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers, naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import report, sweep

from helpers import CUSTOMER, ROOT, run_playbook, task_results, wait_for

LOC, CS = "be-gen-1", "cs-demo"
MUTATING = (
    "reserveVGPU",
    "reserveAndAttachVGPUToVM",
    "attachVGPUToVM",
    "detachVGPUFromVM",
    "deleteVGPU",
    "restoreVGPU",
    "deleteVirtualMachine",
)


def ensure(emu, check=False, **params):
    base = dict(
        location=LOC,
        cloudspace_id=CS,
        cluster="c1",
        machines=None,
        gpu_type="NVIDIA A100",
        count=2,
        state="present",
        permanently=True,
        parallel=8,
    )
    base.update(params)
    if "machine" in base:  # the module's one machine
        base["machines"] = [base.pop("machine")]
    with emu.client(backoff=0.01) as client:
        return vgpus.ensure(client, check_mode=check, **base)


def reclaim(emu, check=False, **params):
    base = dict(location=LOC, scope="cluster", cluster="c1", grace_period=0, permanently=True, parallel=8)
    base.update(params)
    with emu.client(backoff=0.01) as client:
        return sweep.reclaim(client, check_mode=check, **base)


def vms(emu, *names, cluster="c1"):
    """VMs of ``cluster`` (its marker in their description), as the machine modules make them."""
    with emu.client() as client:
        marker = markers.machine_marker(cluster) if cluster else "made by hand"
        return [client.create_vm(CS, name=n, description=marker, vcpus=2, memory=2048) for n in names]


def live(emu, cluster="c1"):
    return [
        r
        for r in emu.ledger()["reservations"]
        if r["deleted_at"] is None and naming.owned_by(naming.decode(r["vgpu_name"]), cluster)
    ]


def mutations(emu):
    ops = emu.stats()["operations"]
    return sum(ops.get(o, {}).get("count", 0) for o in MUTATING)


def assert_converged(emu, machines, count, cluster="c1"):
    held = live(emu, cluster)
    assert len(held) == len(machines) * count
    slots = sorted((naming.decode(r["vgpu_name"]).machine, naming.decode(r["vgpu_name"]).slot) for r in held)
    assert slots == sorted((m, s) for m in machines for s in range(count)), "exactly one reservation per slot"
    assert all(r["vm_id"] is not None for r in held), "all attached"
    assert emu.ledger()["double_reservations"] == 0


PLAY = textwrap.dedent("""\
    - hosts: localhost
      gather_facts: false
      module_defaults:
        group/whitesky.capvco.all: {}
      tasks:
        - {name: check, whitesky.capvco.%(module)s: %(args)s, check_mode: true, register: r1}
        - {name: apply, whitesky.capvco.%(module)s: %(args)s, register: r2}
        - {name: again, whitesky.capvco.%(module)s: %(args)s, register: r3}
    """)


def three_ways(emu, tmp_path, module, args, env=None):
    play = tmp_path / ("%s.yml" % module)
    play.write_text(PLAY % {"module": module, "args": args})
    rc, out, data = run_playbook(str(play), emu, diff=True, env=env)
    assert rc == 0, out[-3000:]
    return [task_results(data, n)[0] for n in ("check", "apply", "again")]


def test_vgpu_module_three_ways_and_absent(emulator, tmp_path):
    vms(emulator, "w0", "w1")
    args = "{location: be-gen-1, cloudspace_id: cs-demo, cluster: c1, machines: [w0, w1], type: nvidia  a100, count: 2}"
    emulator.reset_stats()
    check, apply, again = three_ways(emulator, tmp_path, "vgpu", args)
    assert check["changed"] and check["planned"]["w0"]["reserve"] == 2
    assert check["diff"]["after"]["w0"][0].startswith("00 nvidia-a100")
    assert apply["changed"] and len(apply["reservations"]) == 4
    assert {r["status"] for r in apply["reservations"]} == {"ATTACHED"}
    assert not again["changed"] and sorted(r["vgpu_id"] for r in again["reservations"]) == sorted(
        r["vgpu_id"] for r in apply["reservations"]
    )
    assert emulator.op_count("reserveAndAttachVGPUToVM") == 4  # the check run reserved nothing
    assert_converged(emulator, ["w0", "w1"], 2)
    # absent, three ways
    args = "{location: be-gen-1, cloudspace_id: cs-demo, cluster: c1, machine: w0, state: absent}"
    check, apply, again = three_ways(emulator, tmp_path, "vgpu", args)
    assert check["changed"] and apply["changed"] and not again["changed"]
    assert_converged(emulator, ["w1"], 2)


def test_vgpu_reclaim_and_info_modules(emulator, tmp_path):
    vms(emulator, "w0")
    ensure(emulator, machine="w0", count=2)
    with emulator.client() as client:
        client.delete_vm(CS, client.vms(CS)[0]["vm_id"], detach_gpu=True)  # force delete: GPUs stay billed
    check, apply, again = three_ways(
        emulator, tmp_path, "vgpu_reclaim", "{location: be-gen-1, scope: orphans, cluster: c1, grace_period: 0}"
    )
    assert check["changed"] and len(check["released"]) == 2 and check["saved_per_hour"] == pytest.approx(2.0)
    assert apply["changed"] and not again["changed"] and live(emulator) == []
    play = tmp_path / "info.yml"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - name: info\n"
        "      whitesky.capvco.vgpu_info: {location: be-gen-1, with_cost: true}\n"
    )
    rc, out, data = run_playbook(str(play), emulator)
    assert rc == 0 and task_results(data, "info")[0]["reservations"] == []


def test_dropped_response_after_commit_never_double_reserves(emulator):
    vms(emulator, "w0")
    emulator.faults(drop_after_commit={"reserveAndAttachVGPUToVM": 2})
    first = ensure(emulator, machine="w0", count=3)
    assert first["changed"] and len(first["reservations"]) == 3
    emulator.faults()
    second = ensure(emulator, machine="w0", count=3)
    assert not second["changed"]
    assert emulator.op_count("reserveAndAttachVGPUToVM") == 3  # each lost answer was found by name, not re-bought
    assert emulator.stats()["faults"]["dropped"] == 2
    assert_converged(emulator, ["w0"], 3)


def test_503_and_429_storms_slow_a_run_but_it_converges(emulator):
    vms(emulator, "w0", "w1", "w2")
    emulator.faults(error_rates={"503": 0.25, "429": 0.15}, retry_after=0.05, seed=7)
    ensure(emulator, machines=["w0", "w1", "w2"], count=2)
    faults = emulator.stats()["faults"]
    emulator.faults()
    assert faults.get("503", 0) + faults.get("429", 0) > 3
    assert not ensure(emulator, machines=["w0", "w1", "w2"], count=2)["changed"]
    assert_converged(emulator, ["w0", "w1", "w2"], 2)


KILLABLE = textwrap.dedent("""\
    from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    client = WhiteskyClient(%(url)r, "capvco-demo-token", %(cust)r)
    vgpus.ensure(client, location="be-gen-1", cloudspace_id="cs-demo", cluster="c1", machines=["w0"],
        gpu_type="NVIDIA A100", count=6, parallel=1)
    """)


def test_sigkill_between_reservations_then_rerun_converges_without_leaks(emulator, tmp_path):
    """A vGPU run SIGKILLed between two reservations (the only kill of the vgpu core itself, outside Ansible): the
    re-run waits out the dead run's lease, then converges to exactly the count, the slots it had made reused, none
    leaked."""
    vms(emulator, "w0")
    # each call takes 500 ms: once two reservations exist, the four left take two seconds at least, so the kill lands
    # between reservations even when this test's polling is slow on a loaded machine (at 150 ms it once did not)
    emulator.faults(latency_ms=500)
    script = tmp_path / "run.py"
    script.write_text(KILLABLE % {"url": emulator.url, "cust": CUSTOMER})
    proc = subprocess.Popen([sys.executable, str(script)])
    assert wait_for(lambda: len(live(emulator)) >= 2, timeout=20)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    emulator.quiesce()  # a request already sent when the run died still lands (latency 500 ms) before the re-run
    assert 2 <= len(live(emulator)) < 6
    emulator.faults()
    assert ensure(emulator, machine="w0", count=6)["changed"]
    assert_converged(emulator, ["w0"], 6)


def test_force_deleted_machine_then_cluster_sweep_leaves_nothing_billing(emulator):
    ids = vms(emulator, "w0", "w1")
    ensure(emulator, machines=["w0", "w1"], count=2)
    with emulator.client() as client:
        client.delete_vm(CS, ids[0], detach_gpu=True)
    assert len(live(emulator)) == 4
    result = reclaim(emulator, scope="cluster")
    assert len(result["released"]) == 4 and result["currency"] == "EUR"
    assert live(emulator) == []
    ledger = emulator.ledger()
    assert ledger["accruing"] == 0
    time.sleep(0.3)
    assert emulator.ledger()["vgpu_seconds"] == pytest.approx(ledger["vgpu_seconds"])


def test_unowned_and_other_clusters_reservations_survive_every_sweep(emulator):
    vms(emulator, "w0")
    vms(emulator, "w9", cluster="other")
    theirs = emulator.admin(
        "POST", "/seed-vgpu", {"location": LOC, "gpu_id": "nvidia-l4-24q", "vgpu_name": "hand-made-by-ops"}
    )["vgpu_id"]
    lookalike = emulator.admin(
        "POST", "/seed-vgpu", {"location": LOC, "gpu_id": "nvidia-l4-24q", "vgpu_name": "capvco.c1.w0.00"}
    )["vgpu_id"]
    ensure(emulator, machine="w9", cluster="other", count=1)
    ensure(emulator, machine="w0", cluster="c1", count=1)
    with emulator.client() as client:
        for vm in client.vms(CS):
            client.delete_vm(CS, vm["vm_id"], detach_gpu=True)
    report = reclaim(emulator, check=True, scope="orphans", cluster=None)
    assert {r["cluster"] for r in report["released"]} == {"c1", "other"}  # orphans of every cluster, reported
    reclaim(emulator, scope="cluster", cluster="c1")
    reclaim(emulator, scope="orphans", cluster="c1")
    survivors = {r["vgpu_id"]: r for r in emulator.ledger()["reservations"] if r["deleted_at"] is None}
    assert theirs in survivors and lookalike in survivors
    assert survivors[theirs]["touched"] == 0 and survivors[lookalike]["touched"] == 0
    assert [naming.decode(r["vgpu_name"]).cluster for r in survivors.values() if naming.decode(r["vgpu_name"])] == [
        "other"
    ]


def test_orphans_honour_the_grace_period(emulator):
    vms(emulator, "w0")
    ensure(emulator, machine="w0", count=1)
    with emulator.client() as client:
        client.delete_vm(CS, client.vms(CS)[0]["vm_id"], detach_gpu=True)
    result = reclaim(emulator, scope="orphans", grace_period=3600)
    assert result["released"] == [] and "grace period" in result["kept"][0]["reason"]
    assert len(live(emulator)) == 1


@pytest.mark.parametrize(
    "params,message",
    [
        (dict(gpu_type="AMD MI300"), "offers: NVIDIA A100, NVIDIA L4"),
        (dict(count=15), "not enough NVIDIA A100: need 15 more"),
        (dict(count=-1), "count must be an integer of 0 or more, got -1"),
        (dict(machine="ghost"), "machine 'ghost' not found in cloudspace 'cs-demo'; it has: w0"),
        (dict(cluster="bad.cluster"), "invalid cluster name 'bad.cluster'"),
    ],
)
def test_bad_input_fails_clearly_and_changes_nothing(emulator, params, message):
    vms(emulator, "w0")
    emulator.reset_stats()
    with pytest.raises(WhiteskyError) as err:
        ensure(emulator, **dict(dict(machine="w0"), **params))
    assert message in str(err.value)
    assert mutations(emulator) == 0 and live(emulator) == []


def test_gpu_orphans_playbook_reports_and_fails_then_reclaims(emulator):
    vms(emulator, "w0", "w1")
    ensure(emulator, machines=["w0", "w1"], count=1)
    with emulator.client() as client:
        client.delete_vm(CS, [v for v in client.vms(CS) if v["name"] == "w0"][0]["vm_id"], detach_gpu=True)
    playbook = os.path.join(ROOT, "playbooks", "gpu_orphans.yml")
    rc, out, data = run_playbook(playbook, emulator, extra_vars={"location": LOC})
    assert rc != 0
    report = task_results(data, "Report every reservation that escaped")[0]
    assert "c1" in report["msg"][1] and "w0" in report["msg"][1]
    # check mode: it says what it would release, and releases nothing; it does not fail for what it would release
    # (issue 46: nothing would escape once it had)
    reclaim = {"location": LOC, "reclaim": True, "grace_period": 0}
    rc, out, data = run_playbook(playbook, emulator, extra_vars=reclaim, check=True)
    assert rc == 0 and len(live(emulator)) == 2, out[-2000:]
    report = task_results(data, "Report every reservation that escaped")[0]["msg"]
    assert report[-1].startswith("would release: 1 (saving ") and "nothing was released" in report[-1], report
    (verdict,) = task_results(data, "Fail while any reservation escapes")
    assert (
        verdict["msg"]
        == "No orphaned vGPU reservation would escape: 1 would be released (check mode: nothing was released)."
    )
    rc, out, data = run_playbook(playbook, emulator, extra_vars=reclaim)
    assert rc == 0, out[-2000:]
    assert len(live(emulator)) == 1  # w1's, which still exists
    rc, out, data = run_playbook("whitesky.capvco.gpu_orphans", emulator, extra_vars={"location": LOC})
    assert rc == 0, out[-2000:]


def test_the_location_playbooks_take_no_default_location_and_report_nothing_as_nothing(emulator):
    """gpu_orphans and gpu_profiles ask for the location (there is no default one, the emulator's least of all);
    an orphan check that finds nothing says so, without a cost in no currency ("0.0 None per hour")."""
    for name in ("gpu_orphans.yml", "gpu_profiles.yml"):
        emulator.reset_stats()
        rc, out, _data = run_playbook(os.path.join(ROOT, "playbooks", name), emulator)
        assert rc != 0 and "location is required" in out, out[-2000:]
        assert emulator.stats()["operations"] == {}
    rc, out, data = run_playbook(
        os.path.join(ROOT, "playbooks", "gpu_orphans.yml"), emulator, extra_vars={"location": LOC, "reclaim": True}
    )
    assert rc == 0, out[-2000:]
    report = task_results(data, "Report every reservation that escaped")[0]["msg"]
    assert report[-2:] == ["0 reservation(s)", "released now: none"], report
    rc, out, data = run_playbook(
        os.path.join(ROOT, "playbooks", "gpu_profiles.yml"), emulator, extra_vars={"location": LOC}
    )
    assert rc == 0 and "nvidia-a100" in out.lower(), out[-2000:]


def test_a_large_orphan_scan_summarises_and_names_a_bounded_sample(emulator):
    """30 orphans of two clusters and one reservation nobody owns: the playbook's failure counts all 30 and their
    cost, names the 5 oldest, and says how many more; vgpu_info's summary covers what its rows leave out."""
    now = int(time.time())
    names = [naming.encode("gone-%d" % (i % 2), "m%02d" % i, 0, created=now - 7200 + i) for i in range(30)]
    emulator.admin("POST", "/seed-vgpu", {"location": LOC, "gpu_id": "nvidia-a100-40c", "vgpu_names": names})
    emulator.admin("POST", "/seed-vgpu", {"location": LOC, "gpu_id": "nvidia-a100-40c", "vgpu_name": "someone-else"})
    params = dict(location=LOC, cluster=None, machine=None, orphans_only=True, with_cost=True, max_rows=5)
    with emulator.client() as client:
        found = report.info(client, **params)
    assert [r["vgpu_name"] for r in found["reservations"]] == names[:5] and found["truncated"] == 25
    summary = found["summary"]
    assert (summary["count"], summary["orphans"], summary["owned"]) == (30, 30, 30)
    assert {c: v["count"] for c, v in summary["by_cluster"].items()} == {
        naming.decode(names[0]).cluster: 15,
        naming.decode(names[1]).cluster: 15,
    }
    assert found["total_cost"] == pytest.approx(sum(v["cost"] for v in summary["by_cluster"].values()), abs=1e-3)
    assert found["report"][-2] == "... and 25 more" and found["report"][-1].startswith("30 reservation(s)")
    playbook = os.path.join(ROOT, "playbooks", "gpu_orphans.yml")
    rc, out, data = run_playbook(playbook, emulator, extra_vars={"location": LOC, "capvco_orphan_sample": 5})
    assert rc != 0
    (failed,) = [r for r in task_results(data, "Fail while any reservation escapes") if r.get("failed")]
    assert failed["msg"].startswith("30 orphaned vGPU reservation(s) are still billed")
    assert ", ".join(names[:5]) + " and 25 more." in failed["msg"] and names[5] not in failed["msg"]
