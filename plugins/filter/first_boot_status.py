# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``first_boot_status`` filter: a status file's text, read from the machine, parsed as hostile (a thin face
of the core's ``firstboot.status.parse``)."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot.errors import InvalidStatus
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot.status import parse


def first_boot_status(text: object) -> dict[str, object]:
    """The status as a dict of the typed record's fields, its texts scrubbed; an invalid document is the state
    ``invalid``, with why in ``reason`` (bounded, scrubbed)."""
    try:
        return parse(text).as_dict()
    except InvalidStatus as exc:
        return {"state": "invalid", "step": "", "reason": str(exc), "log_tail": ""}


class FilterModule:
    def filters(self) -> dict[str, object]:
        return {"first_boot_status": first_boot_status}
