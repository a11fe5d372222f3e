"""pytest wiring: the collection on sys.path, and a fresh emulator per test that wants one."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from helpers import Emulator, ensure_collection_link  # noqa: E402

ensure_collection_link()


@pytest.fixture
def emulator(tmp_path):
    emu = Emulator(tmp_path / "emulator-state").start()
    yield emu
    emu.stop()
