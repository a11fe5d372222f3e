"""What the inventory's tests and its benchmark share: an ``ansible-inventory`` run's environment against the
emulator, the calls the emulator counted, the calls a read of the inventory makes by its rule (from the emulator's
snapshot), and VMs made by hand in parallel."""

from __future__ import annotations

import math
import os
import sys
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import vm_inventory
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import notes
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.paging import PAGE_LIMIT
from capvco_lab.emulator import COLLECTIONS

#: The folder of this Python's tools (``ansible-inventory``).
BIN = os.path.dirname(sys.executable)


def inventory_env(emu, env=None):
    """The environment of an ``ansible-inventory`` run against ``emu``: nothing of the caller's Ansible or
    whitesky settings; an inventory source that fails to parse fails the run."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "WHITESKY_"))}
    base.update(
        ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_INVENTORY_UNPARSED_FAILED="1",
    )
    if emu is not None:
        base.update(emu.env())
    base.update(env or {})
    return base


def calls(emu):
    return {op: v["count"] for op, v in emu.stats()["operations"].items() if v["count"]}


def selected(snapshot, locations=(), cloudspaces=()):
    return [
        cs
        for cs in snapshot["cloudspaces"]
        if cs["deleted_at"] is None
        and (not locations or cs["location"] in locations)
        and (not cloudspaces or cs["name"] in cloudspaces)
    ]


def noted_clusters(snapshot, cs_id):
    return notes.clusters_in(n for n in snapshot["notes"] if n["cloudspace_id"] == cs_id)


def live_vms(snapshot, cs_id):
    return [vm for vm in snapshot["vms"] if vm["cloudspace_id"] == cs_id and vm["deleted_at"] is None]


def expected_calls(snapshot, locations=(), cloudspaces=()):
    """The calls of a read of the inventory, from the emulator's snapshot: the cloudspaces' listing; per cloudspace
    its VM listing and its notes; per location the reservations' pages, the profiles and the prices; and one
    marker per VM whose name may be a machine of a cluster its cloudspace's notes name."""
    spaces = selected(snapshot, locations, cloudspaces)
    markers = sum(
        1
        for cs in spaces
        for vm in live_vms(snapshot, cs["cloudspace_id"])
        if vm_inventory.may_be_owned(noted_clusters(snapshot, cs["cloudspace_id"]), vm["name"])
    )
    where = {cs["location"] for cs in spaces}
    pages = sum(
        max(
            1,
            math.ceil(
                sum(1 for r in snapshot["vgpus"] if r["location"] == loc and r["deleted_at"] is None) / PAGE_LIMIT
            ),
        )
        for loc in where
    )
    out = {
        "listCloudspaces": 1,
        "listCloudspaceVirtualMachines": len(spaces),
        "getCloudspaceNotes": len(spaces),
        "getVirtualMachineInfo": markers,
        "listCustomerVGPUS": pages,
        "listAvailableGPUProfiles": len(where),
        "getCustomerLocationPricing": len(where),
    }
    return {op: n for op, n in out.items() if n}


def create_vms(client, vms, threads=16):
    """Create ``[(cloudspace_id, name, description)]`` in parallel (small, as made by hand)."""
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda v: client.create_vm(v[0], name=v[1], description=v[2], vcpus=1, memory=512), vms))
