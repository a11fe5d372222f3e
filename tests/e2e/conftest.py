"""The netns lab fixture for the SR-IOV end-to-end tests (root and iproute2 needed)."""

from __future__ import annotations

import pytest

from capvco_lab.netlab import Lab, missing

from helpers import require


@pytest.fixture
def lab(tmp_path, request):
    require(not missing(), "the netns lab needs %s" % missing())
    opts = getattr(request, "param", {}) or {}
    lab = Lab(tmp_path).up(**opts)
    yield lab
    lab.down()
