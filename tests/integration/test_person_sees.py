"""What a person sees when something is wrong or costs money (issue 39), through the real playbooks and the default
callback, against the emulator."""

from __future__ import annotations

import os
import subprocess
import sys

from capvco_lab.emulator import COLLECTIONS
from capvco_lab.specs import cluster_spec

from helpers import ROOT


def default_callback(emulator, playbook, extra, *flags):
    """ansible-playbook PLAYBOOK by its name, as a person runs it: the default callback, default verbosity."""
    import json

    env = dict(os.environ, **emulator.env(), ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), playbook, "-e", json.dumps(extra)]
    # as a terminal shows them: standard output and error in the order they came (progress and warnings go to error)
    proc = subprocess.run(
        argv + list(flags), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, timeout=600
    )
    return proc.returncode, proc.stdout


def test_a_wrong_location_names_the_locations_there_are(emulator):
    spec = cluster_spec("wl", "wl-cs", location="be-gen-9")
    before = emulator.snapshot()
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", spec)
    assert rc != 0
    assert "location 'be-gen-9' does not exist for customer 'capvco-demo'; its locations: be-gen-1, nl-ams-1" in out
    assert emulator.snapshot() == before, "nothing was made"


def test_the_plan_and_its_price_show_at_default_verbosity_and_deletes_say_what_they_leave_billed(emulator):
    spec = cluster_spec("pw", "pw-cs", gpu_replicas=2, count=1)
    before = emulator.snapshot()
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", spec, "--check", "--diff")
    assert rc == 0, out[-3000:]
    line = "plan: create cloudspace pw-cs, create 3 machines (pw-cp-0, pw-gpu-0, pw-gpu-1), reserve 2 x NVIDIA A100"
    # the whole price (issue 46, point 10): 10 vCPUs, 18 GiB, 3 x 10 GiB of disk, the cloudspace's address and 2 vGPUs
    # at be-gen-1's prices (12, 3.5, 0.1, 5 and 730 EUR a month), 2.26 EUR an hour, and by unit
    whole = ": +2.26 EUR/h, 2.26 EUR/h after (vcu 0.16, mu 0.09, su 0.00, piu 0.01, vgu 2.00)"
    assert line in out and whole in out, out[-3000:]
    assert "+price 2.26 EUR/h" in out and "-price 0.00 EUR/h" in out  # --diff carries the price
    assert "+price vcu 10 vCPU 0.16 EUR/h" in out and "+price vgu 2 vGPU 2.00 EUR/h" in out
    assert emulator.snapshot() == before, "check mode bought nothing"

    rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", spec)
    assert rc == 0, out[-3000:]
    assert "done: create cloudspace pw-cs, create 3 machines" in out and "2.26 EUR/h after" in out
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", spec)
    assert rc == 0 and "done: no change: 2 vGPUs, 2.26 EUR/h (vcu 0.16" in out, out[-3000:]

    # a pool scaled to zero says what a machine costs when it comes back
    zero = cluster_spec("pw", "pw-cs", gpu_replicas=0, count=1)
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", zero, "--check")
    at_zero = (
        "pool gpu at 0 machines: nothing billed; 1.11 EUR/h a machine of 4 vCPUs, 8192 MiB, 10 GiB disk, 1 x NVIDIA"
    )
    assert rc == 0 and at_zero in out, out[-3000:]

    # a machine deleted by force: a warning names the vGPU it leaves billed, and its price
    rc, out = default_callback(emulator, "whitesky.capvco.machine_delete", dict(spec, machine="pw-gpu-1", force=True))
    assert rc == 0, out[-3000:]
    warning = "machine pw-gpu-1 was deleted by force with 1 vGPU attached: still reserved and billed (1.00 EUR/h)"
    assert warning in " ".join(out.split()), out[-3000:]
    # a machine that does not exist: said, not silent
    rc, out = default_callback(emulator, "whitesky.capvco.machine_delete", dict(spec, machine="pw-gpu-9"))
    assert rc == 0 and "machine 'pw-gpu-9' is in no cloudspace 'pw-cs' of cluster 'pw': nothing to delete" in " ".join(
        out.split()
    )
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_delete", spec)
    assert rc == 0 and "done: delete 2 machines (pw-cp-0, pw-gpu-0), release 2 vGPUs" in out, out[-3000:]
    assert emulator.ledger()["accruing"] == 0
