"""The driver fragment's verification (the shell the first boot and the modules run), on real nvidia-smi output."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import nvidia
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render as firstboot
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError

from properties import examples

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
STUB = """#!/bin/sh
cat %s
exit %d
"""


def sample(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as fh:
        return fh.read()


def verify(tmp_path, output, pin, count, rc=0):
    """Run the fragment's verification against an nvidia-smi that prints ``output``; its status document."""
    out = tmp_path / "smi.out"
    out.write_text(output)
    smi = tmp_path / "nvidia-smi"
    smi.write_text(STUB % (out, rc))
    smi.chmod(0o755)
    state = tmp_path / "state"
    script = firstboot.render_gpu_driver(pin, count, install=False, wait=0, nvidia_smi=str(smi), state_dir=str(state))
    subprocess.run(["/bin/sh", "-s"], input=script, text=True, capture_output=True, check=False)
    with open(state / "gpu-driver.status", encoding="utf-8") as fh:
        return json.load(fh)


def test_parse_real_samples():
    assert (
        nvidia.parse_query(sample("nvidia-smi-a100x2.csv"))
        == [{"driver_version": "550.127.05", "name": "NVIDIA A100-SXM4-40GB"}] * 2
    )
    assert nvidia.parse_query(sample("nvidia-smi-t4.csv")) == [{"driver_version": "535.183.01", "name": "Tesla T4"}]
    assert len(nvidia.parse_query(sample("nvidia-smi-h200x8.csv"))) == 8
    assert nvidia.parse_query("No devices were found\n") == []


def test_the_fragment_passes_real_output_that_matches(tmp_path):
    status = verify(tmp_path, sample("nvidia-smi-a100x2.csv"), "550", 2)
    assert (status["state"], status["gpu_driver_version"]) == ("ready", "550.127.05")
    assert len(nvidia.parse_query(status["nvidia_smi"])) == 2
    status = verify(tmp_path, sample("nvidia-smi-h200x8.csv"), "", 8)  # an image's own driver: any version
    assert status["state"] == "ready"


def test_the_fragment_names_what_is_wrong(tmp_path):
    status = verify(tmp_path, sample("nvidia-smi-t4.csv"), "550", 1)
    assert status["state"] == "failed" and status["step"] == "gpu-driver"
    assert status["reason"].startswith("driver version 535.183.01 does not match the pin 550; nvidia-smi printed:")
    status = verify(tmp_path, sample("nvidia-smi-t4.csv"), "535", 2)
    assert "nvidia-smi sees 1 GPU(s), at least 2 expected" in status["reason"]
    status = verify(tmp_path, "No devices were found\n", "", 1, rc=6)
    assert status["reason"].startswith("nvidia-smi exited 6 after 0s: No devices were found")


VERSION = st.lists(st.integers(0, 999), min_size=1, max_size=3).map(lambda xs: ".".join(map(str, xs)))


@settings(max_examples=examples(40), deadline=None)
@given(reported=VERSION, pin=VERSION)
def test_a_pin_matches_its_versions_and_no_other(tmp_path_factory, reported, pin):
    """The documented rule: the pin 550 or 550.127 accepts 550.127.05; 55 and 5501 do not."""
    status = verify(tmp_path_factory.mktemp("v"), "%s, NVIDIA A100\n" % reported, pin, 1)
    expected = reported == pin or reported.startswith(pin + ".")
    assert (status["state"] == "ready") is expected, (reported, pin, status["reason"])


@pytest.mark.parametrize("bad", ["r550", "550.", "550;reboot", " 5 5", "latest"])
def test_a_bad_version_is_refused_naming_it(bad):
    with pytest.raises(InputError, match="invalid GPU driver version"):
        firstboot.render_gpu_driver(bad, 1)
    with pytest.raises(InputError, match="invalid GPU driver version"):
        firstboot.render([], None, gpu_driver={"version": bad, "count": 1})
