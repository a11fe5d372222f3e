# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The errors of a cluster's machines and their NICs."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError


class AddressTaken(WhiteskyError):
    """The platform refused the chosen address (a 409 that is not a VM lock): another NIC holds it."""
