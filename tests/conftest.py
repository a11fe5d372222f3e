"""pytest wiring: a fresh emulator per test that wants one, a fake Kubernetes API server that serves the CAPVCO
kinds (``kube``), the collection link, and the skip rules.

``helpers.require(ok, why)`` is how a suite that needs root, network namespaces or
podman says what it lacks: a skip on a developer's machine, but a failure
when ``CAPVCO_REQUIRE_ALL=1`` (``make e2e``, ``make containers`` and ``make
molecule`` set it, after installing those prerequisites), so a suite that
skipped everything can never count as green.
"""

from __future__ import annotations

import pytest

from capvco_lab.controller import kube_with_crds

import properties
from helpers import SPEC_ABSENT, Emulator, ensure_collection_link

ensure_collection_link()
PROFILE = properties.load()  # the gate's derandomized draws, or make explore's random ones (tests/properties.py)


@pytest.fixture
def emulator(tmp_path):
    emu = Emulator(tmp_path / "emulator-state").start()
    yield emu
    emu.stop()


@pytest.fixture
def kube(tmp_path):
    fake = kube_with_crds(tmp_path)
    yield fake
    fake.stop()


def pytest_report_header(config):
    return "hypothesis profile: %s (tests/properties.py)" % PROFILE


def pytest_terminal_summary(terminalreporter):
    """Say in one line when the contract tests did not run, so a clone without the spec shows it ran fewer."""
    skipped = terminalreporter.stats.get("skipped", [])
    absent = sum(1 for rep in skipped if SPEC_ABSENT in str(rep.longrepr))
    if absent:
        terminalreporter.write_line(
            "NOTE: %d contract test(s) skipped: %s, so the client and the emulator were not "
            "checked against the platform's spec" % (absent, SPEC_ABSENT)
        )
