"""The netns lab fixture for the SR-IOV end-to-end tests (root and iproute2 needed)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lab import Lab, can_run  # noqa: E402


@pytest.fixture
def lab(tmp_path, request):
    if not can_run():
        pytest.skip("needs root and iproute2 (network namespaces)")
    opts = getattr(request, "param", {}) or {}
    lab = Lab(tmp_path).up(**opts)
    yield lab
    lab.down()
