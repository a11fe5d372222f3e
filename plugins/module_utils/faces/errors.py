# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The faces' errors: a Kubernetes API call that failed (``kube``)."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError


class KubeError(WhiteskyError):
    """A Kubernetes API call failed."""

    def __init__(self, action: str, exc: BaseException) -> None:
        self.status: int | None = getattr(exc, "status", None)
        reason = getattr(exc, "reason", None) or str(exc)
        super().__init__(
            "%s failed: %s%s" % (action, "%s " % self.status if self.status else "", reason), {"status": self.status}
        )
