"""The nvidia-smi parser and checks, on real output samples."""

from __future__ import annotations

import os

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils import nvidia

DATA = os.path.join(os.path.dirname(__file__), "data")


def sample(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as fh:
        return fh.read()


def test_parse_a100_pair():
    gpus = nvidia.parse_query(sample("nvidia-smi-a100x2.csv"))
    assert gpus == [{"driver_version": "550.127.05", "name": "NVIDIA A100-SXM4-40GB"}] * 2
    assert nvidia.check(gpus, "550", 2) == []
    assert nvidia.check(gpus, "550.127.05", 1) == []


def test_parse_t4_and_h200():
    assert nvidia.parse_query(sample("nvidia-smi-t4.csv")) == [{"driver_version": "535.183.01", "name": "Tesla T4"}]
    assert len(nvidia.parse_query(sample("nvidia-smi-h200x8.csv"))) == 8


@pytest.mark.parametrize(
    "pin,ok", [("550", True), ("550.127", True), ("550.127.05", True), ("55", False), ("5501", False), ("535", False)]
)
def test_version_pin(pin, ok):
    assert nvidia.version_matches("550.127.05", pin) is ok


def test_check_names_what_is_wrong():
    gpus = nvidia.parse_query(sample("nvidia-smi-t4.csv"))
    problems = nvidia.check(gpus, "550", 2)
    assert problems == [
        "nvidia-smi sees 1 GPU(s), at least 2 expected",
        "driver version 535.183.01 does not match the pin 550",
    ]
    assert nvidia.check(gpus, "", 1) == []  # baked-in driver: any version


@pytest.mark.parametrize(
    "text",
    [
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.",
        "No devices were found",
        "550.127.05",
        "abc, NVIDIA A100",
    ],
)
def test_not_csv_is_refused(text):
    with pytest.raises(ValueError):
        nvidia.parse_query(text)


def test_empty_output_is_zero_gpus():
    assert nvidia.parse_query("\n") == []
    assert nvidia.check([], "550", 1) == ["nvidia-smi sees 0 GPU(s), at least 1 expected"]
