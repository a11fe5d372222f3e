# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Machines (VMs in a cloudspace): finding them by name or id (pure Python)."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.module_utils.client import InputError


def resolve_machines(vms, wanted, cloudspace_id):
    """``[(vm_id, name)]`` for machine names or ids; an unknown one fails naming what exists."""
    by_name = {v["name"]: v for v in vms}
    by_id = {str(v["vm_id"]): v for v in vms}
    out = []
    for machine in wanted:
        vm = by_name.get(str(machine)) or by_id.get(str(machine))
        if vm is None:
            raise InputError("machine %r not found in cloudspace %r; it has: %s"
                             % (machine, cloudspace_id, ", ".join(sorted(by_name)) or "no VMs"))
        out.append((vm["vm_id"], vm["name"]))
    return out
