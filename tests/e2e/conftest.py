"""The netns lab fixture for the SR-IOV end-to-end tests (root and iproute2 needed)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from helpers import require  # noqa: E402
from lab import Lab, missing  # noqa: E402


@pytest.fixture
def lab(tmp_path, request):
    require(not missing(), "the netns lab needs %s" % missing())
    opts = getattr(request, "param", {}) or {}
    lab = Lab(tmp_path).up(**opts)
    yield lab
    lab.down()
