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
    proc = subprocess.run(argv + list(flags), env=env, capture_output=True, text=True, cwd=ROOT, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


def test_a_wrong_location_names_the_locations_there_are(emulator):
    spec = cluster_spec("wl", "wl-cs", location="be-gen-9")
    before = emulator.snapshot()
    rc, out = default_callback(emulator, "whitesky.capvco.cluster_create", spec)
    assert rc != 0
    assert "location 'be-gen-9' does not exist for customer 'capvco-demo'; its locations: be-gen-1, nl-ams-1" in out
    assert emulator.snapshot() == before, "nothing was made"
