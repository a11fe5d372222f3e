"""Progress on long converges (issue 39): a line per machine created and per vGPU reserved, under the converge task,
at default verbosity, through the default callback (the cluster action plugin shows the module's progress file)."""

from __future__ import annotations

from test_person_sees import default_callback

from capvco_lab.specs import cluster_spec

TASK = "TASK [Converge the cluster to its spec"


def converge_output(out):
    """What is shown under the converge task, up to its result line."""
    under = out.split(TASK, 1)[1].split("\n", 1)[1]
    return under.split("\nTASK [", 1)[0]


def test_each_machine_and_vgpu_is_shown_as_it_is_made(emulator):
    spec = cluster_spec("pg", "pg-cs", gpu_replicas=2, count=1)
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", spec, "--check")
    assert rc == 0, out[-3000:]
    assert "[localhost] machine " not in out, "check mode makes nothing, so shows no progress"

    rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", spec)
    assert rc == 0, out[-3000:]
    under = converge_output(out)
    lines = [line.strip() for line in under.splitlines() if line.startswith("  [localhost] ")]
    for name in ("pg-cp-0", "pg-gpu-0", "pg-gpu-1"):
        assert any(line.startswith("[localhost] machine %s: created (VM " % name) for line in lines), under
    for name in ("pg-gpu-0", "pg-gpu-1"):
        assert "[localhost] machine %s: vGPU slot 0 reserved" % name in under, under
    # the lines come while the task runs: before its result
    result = under.index("changed: [localhost]")
    assert all(under.index(line) < result for line in lines)

    rc, out = default_callback(emulator, "whitesky.capvco.cluster_delete", dict(spec, confirm_cluster_name="pg"))
    assert rc == 0, out[-3000:]
    for name in ("pg-cp-0", "pg-gpu-0", "pg-gpu-1"):
        assert "[localhost] machine %s: deleted" % name in out, out[-3000:]
    assert ": released" in out, out[-3000:]
