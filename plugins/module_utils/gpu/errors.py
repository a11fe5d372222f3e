# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU core's errors: a location without the capacity a plan needs."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError


class InsufficientCapacity(WhiteskyError):
    """The location has too few instances of a GPU type now; capacity may free up, so a retry can help."""
