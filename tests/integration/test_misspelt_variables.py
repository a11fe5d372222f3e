"""Every playbook refuses a misspelt variable before any change (issue 46, point 13), through ansible-playbook
against the emulator: ``-e max_hourly_cots=0.5`` was ignored without a word (the plan ran with no cap), while a
misspelt spec key got "did you mean".  Now a variable whose name is close to one the playbook reads (and that is
none the collection's playbooks read or set) is refused, by the spec's own check (``schema.misspelt``)."""

from __future__ import annotations

import pytest
from test_person_sees import default_callback

from capvco_lab.specs import cluster_spec

SPEC = cluster_spec("mv", "mv-cs", gpu_replicas=1, count=1)
CLUSTER = {"cluster": SPEC["cluster"]}


def flat(out):
    return " ".join(out.split())


@pytest.mark.parametrize(
    "playbook, extra, typo, meant",
    [
        ("cluster_create", dict(SPEC, max_hourly_cots=0.5), "max_hourly_cots", "max_hourly_cost"),
        ("cluster_create", dict(SPEC, capvco_first_boot_wiat=True), "capvco_first_boot_wiat", "capvco_first_boot_wait"),
        ("pool_scale", dict(CLUSTER, pool_name="gpu", replicas=0, replica=2), "replica", "replicas"),
        ("machine_delete", dict(CLUSTER, machine="mv-gpu-0", Force=True), "Force", "force"),
        ("cluster_delete", dict(CLUSTER, confirm_cluster=True), "confirm_cluster", "confirm_cluster_name"),
        ("gpu_orphans", {"location": "be-gen-1", "grace_periode": 0, "reclaim": True}, "grace_periode", "grace_period"),
        ("gpu_profiles", {"location": "be-gen-1", "locaton": "nl-ams-1"}, "locaton", "location"),
        ("site", {"capvco_demo_pod_nics": True}, "capvco_demo_pod_nics", "capvco_demo_pod_nic"),
    ],
)
def test_a_misspelt_variable_is_refused_before_any_change(emulator, playbook, extra, typo, meant):
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", SPEC)
    assert rc == 0, out[-3000:]
    before = emulator.snapshot()
    rc, out = default_callback(emulator, "whitesky.capvco." + playbook, extra)
    assert rc != 0, out[-3000:]
    assert "%s: unknown variable(s) %s (did you mean %s?): the playbook does not read it. Nothing was changed." % (
        playbook,
        typo,
        meant,
    ) in flat(out), out[-3000:]
    assert emulator.snapshot() == before, "refused before any change"


def test_the_same_run_spelt_right_goes_on_and_names_of_other_playbooks_are_not_refused(emulator):
    # max_hourly_cost spelt right caps the plan; a variable another playbook reads (grace_period) is no typo here
    rc, out = default_callback(
        emulator, "whitesky.capvco.cluster_create", dict(SPEC, max_hourly_cost=0.5, grace_period=0), "--check"
    )
    assert rc != 0 and "over max_hourly_cost 0.5; nothing was changed" in flat(out), out[-3000:]
    assert "unknown variable" not in flat(out)
