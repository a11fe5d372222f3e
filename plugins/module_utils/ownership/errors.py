# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The errors of a cluster's lease (``lease``): another run holds it, this run lost it, its cloudspace went."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError


class ClusterBusy(WhiteskyError):
    """Another run holds the cluster's lease and did not let go within the wait."""


class LeaseLost(WhiteskyError):
    """This run can no longer prove that it holds the cluster's lease (it was stopped past its time to live, or its
    note was taken over): it writes nothing more."""


class CloudspaceGone(WhiteskyError):
    """The cloudspace that carried the lease was deleted (a teardown ran): start again from the reads."""
