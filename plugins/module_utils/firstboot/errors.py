# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The errors of a machine's first boot and its NVIDIA driver: a report that is not one, a machine that is gone, a
driver that is not usable."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError


class InvalidStatus(WhiteskyError):
    """A status document that is not one (too large, too deep, not JSON, a field unknown or of another type)."""


class MachineNotFound(WhiteskyError):
    """The VM, or its cloudspace, does not exist: no first boot will ever report (``details``:
    ``machine_not_found``, ``cloudspace_id``, ``vm_id``)."""


class DriverError(WhiteskyError):
    """The driver script failed; ``details`` carries its step, reason and the tail of its log."""
