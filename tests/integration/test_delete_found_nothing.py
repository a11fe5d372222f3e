"""A delete that finds nothing says so (issue 46, point 12), through the real playbooks and the default callback,
against the emulator's two locations: ``cluster_delete`` with a wrong ``location`` answered "nothing to delete",
rc 0, while the cluster billed in the other one; ``machine_delete`` of a name without the cluster's prefix the
same.  Now a warning names where it looked and, when the customer has a cluster or machine of that name elsewhere,
where it is."""

from __future__ import annotations

from test_person_sees import default_callback

from capvco_lab.specs import cluster_spec

from test_gpu import live


def flat(out):
    return " ".join(out.split())


def test_a_delete_that_finds_nothing_says_where_it_looked_and_where_the_cluster_is(emulator):
    spec = cluster_spec("fn", "fn-cs", gpu_replicas=1, count=1)
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", spec)
    assert rc == 0, out[-3000:]
    before = emulator.snapshot()

    # the wrong location: nothing deleted, and the warning says where the cluster bills
    wrong = dict(spec, cluster=dict(spec["cluster"], location="nl-ams-1"))
    for flags in (["--check"], []):
        rc, out = default_callback(emulator, "whitesky.capvco.cluster_delete", wrong, *flags)
        assert rc == 0, out[-3000:]
        said = flat(out)
        assert (
            "cluster 'fn' has nothing to delete in location 'nl-ams-1', nothing was deleted (looked in location "
            "'nl-ams-1', which has no cloudspace 'fn-cs', and at that location's vGPU reservations); the customer has "
            "a cluster of that name elsewhere: cloudspace 'fn-cs' in location 'be-gen-1' (machines fn-cp-0, "
            "fn-gpu-0); 1 vGPU reservation in location 'be-gen-1', billed; give that location and cloudspace as "
            "cluster.location and cluster.cloudspace" in said
        ), out[-3000:]
    # a machine name without the cluster's prefix: the machine it may have meant
    rc, out = default_callback(emulator, "whitesky.capvco.machine_delete", dict(spec, machine="gpu-0"))
    assert rc == 0, out[-3000:]
    assert (
        "machine 'gpu-0' is in no cloudspace 'fn-cs' of cluster 'fn': nothing to delete (looked in cloudspace "
        "'fn-cs' of location 'be-gen-1'); the customer has a machine of that name elsewhere: VM 'fn-gpu-0' in "
        "cloudspace 'fn-cs' of location 'be-gen-1' (its marker names cluster 'fn'); give that machine's name with "
        "its cluster's spec" in flat(out)
    ), out[-3000:]
    # the right machine in the wrong location
    rc, out = default_callback(emulator, "whitesky.capvco.machine_delete", dict(wrong, machine="fn-gpu-0"))
    assert rc == 0 and (
        "(looked in location 'nl-ams-1', which has no cloudspace 'fn-cs'); the customer has a machine of that name "
        "elsewhere: VM 'fn-gpu-0' in cloudspace 'fn-cs' of location 'be-gen-1'" in flat(out)
    ), out[-3000:]
    assert emulator.snapshot() == before, "nothing was deleted"
    assert len(live(emulator, "fn")) == 1

    # a cluster the customer has nowhere: said too
    ghost = cluster_spec("ghost", "ghost-cs")
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_delete", ghost)
    assert rc == 0 and (
        "cluster 'ghost' has nothing to delete in location 'be-gen-1', nothing was deleted (looked in location "
        "'be-gen-1', which has no cloudspace 'ghost-cs', and at that location's vGPU reservations); the customer "
        "has no cluster of that name in its other cloudspaces and locations either" in flat(out)
    ), out[-3000:]

    rc, out = default_callback(emulator, "whitesky.capvco.cluster_delete", spec)
    assert rc == 0 and "nothing to delete in location" not in flat(out), out[-3000:]
    assert emulator.ledger()["accruing"] == 0
