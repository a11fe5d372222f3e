# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a core function is called with (pure Python)."""

from __future__ import annotations


class Request:
    """The client (None for modules without a platform connection), the module's own parameters, and check mode.

    A core function may return ``diff`` (``{"before", "after"}``); the module base drops it unless Ansible runs
    with ``--diff``.
    """

    def __init__(self, client, params, check_mode=False):
        self.client = client
        self.params = params
        self.check_mode = check_mode
