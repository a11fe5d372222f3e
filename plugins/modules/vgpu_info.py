#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vgpu_info
short_description: List vGPU reservations of a whitesky.cloud location, decoded into their owners
version_added: 0.1.0
description:
  - Lists the location's vGPU reservations (attached, detached and in the recycle bin, since all of them bill) with a
    single paginated listing, and decodes each name into its owner (cluster, machine, slot, creation time).
  - A reservation whose name does not decode is reported with C(owned=false); it is not this collection's.
  - An I(orphan) is owned, but no VM of its machine exists in the location any more.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  location:
    description: The location (G8).
    type: str
    required: true
  cluster:
    description: Only the reservations this cluster owns.
    type: str
  machine:
    description: Only the reservations this machine (VM name) owns; needs O(cluster).
    type: str
  orphans_only:
    description: Only owned reservations whose machine no longer exists.
    type: bool
    default: false
  with_cost:
    description:
      - Add the accrued vGPU-seconds and cost of each reservation, from the platform's consumption report and the
        location's C(vgu) price.
    type: bool
    default: false
  max_rows:
    description:
      - Return rows for the first this many reservations (in reservation order, oldest first) and count the rest in
        RV(truncated). RV(summary), the totals and the costs always cover all of them.
      - Without it every reservation is a row; a scan of a large location is faster with a bound (each row is
        returned through Ansible).
    type: int
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
  - whitesky.capvco.connection.info_module
seealso:
  - module: whitesky.capvco.vgpu
  - module: whitesky.capvco.vgpu_reclaim
"""

EXAMPLES = r"""
# Set-up: two GPU workers of cluster demo, each with an NVIDIA A100 vGPU, in the cluster's cloudspace
- name: Cluster demo's GPU workers
  whitesky.capvco.machine_pool:
    cloudspace: demo
    location: be-gen-1
    cluster: demo
    pools:
      - {name: gpu, names: [demo-gpu-0, demo-gpu-1], vcpus: 8, memory: 32768, image_id: 12, gpu: {type: NVIDIA A100}}
  register: demo

- name: Every reservation of a cluster
  whitesky.capvco.vgpu_info:
    location: be-gen-1
    cluster: demo
  register: demo_vgpus

- name: What escaped, and what it cost so far (totals over all, rows for the 20 oldest)
  whitesky.capvco.vgpu_info:
    location: be-gen-1
    orphans_only: true
    with_cost: true
    max_rows: 20
  register: orphans

# Clean-up: the cluster's machines (their vGPUs released first), every reservation it still owns, its cloudspace
- name: Tear cluster demo down
  whitesky.capvco.machine_pool:
    cloudspace_id: "{{ demo.cloudspace_id }}"
    location: be-gen-1
    cluster: demo
    exclusive: true
    sweep: true
    state: absent

- name: Delete its cloudspace
  whitesky.capvco.cloudspace:
    name: demo
    location: be-gen-1
    cluster: demo
    state: absent
"""

RETURN = r"""
reservations:
  description: The reservations.
  returned: always
  type: list
  elements: dict
  contains:
    vgpu_id:
      description: The reservation's id.
      type: str
    vgpu_name:
      description: Its name.
      type: str
    gpu_id:
      description: The GPU profile.
      type: str
    status:
      description: C(ATTACHED), C(RESERVED) (detached) or C(DELETED) (recycle bin).
      type: str
    vm_id:
      description: The VM it is attached to, if any.
      type: int
    vm_name:
      description: The name of that VM.
      type: str
    owned:
      description: Whether the name decodes as this collection's.
      type: bool
    cluster:
      description: Owning cluster (owned reservations only).
      type: str
    machine:
      description: Owning machine (owned reservations only).
      type: str
    slot:
      description: Slot index (owned reservations only).
      type: int
    created:
      description: When it was reserved, in epoch seconds, from its name.
      type: int
    age:
      description: Seconds since it was reserved.
      type: int
    orphan:
      description: Owned, and its machine no longer exists (when O(cluster) or O(orphans_only) is set).
      type: bool
    vgpu_seconds:
      description: Billed vGPU-seconds so far (with O(with_cost)).
      type: float
    cost:
      description: Cost so far, in RV(currency) (with O(with_cost)).
      type: float
summary:
  description: Counts over every reservation listed (not only the rows returned).
  returned: always
  type: dict
  contains:
    count:
      description: Reservations listed.
      type: int
    owned:
      description: Of those, owned by this collection.
      type: int
    orphans:
      description: Of those, orphans (when O(cluster) or O(orphans_only) is set).
      type: int
    attached:
      description: Of those, attached to a VM.
      type: int
    in_recycle_bin:
      description: Of those, in the recycle bin (they still bill).
      type: int
    by_cluster:
      description: Per owning cluster, C(count), and C(cost) so far with O(with_cost).
      type: dict
truncated:
  description: How many reservations were listed but not returned as rows (see O(max_rows)).
  returned: always
  type: int
report:
  description: The reservations as a plain-text table, with a summary line (and cost, with O(with_cost)).
  returned: always
  type: list
  elements: str
currency:
  description: The currency of the costs.
  returned: with O(with_cost)
  type: str
cost_per_hour:
  description: What the listed reservations cost per hour together.
  returned: with O(with_cost)
  type: float
total_cost:
  description: What the listed reservations have cost so far.
  returned: with O(with_cost)
  type: float
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import report


def main():
    WhiteskyModule(
        dict(
            location=dict(type="str", required=True),
            cluster=dict(type="str"),
            machine=dict(type="str"),
            orphans_only=dict(type="bool", default=False),
            with_cost=dict(type="bool", default=False),
            max_rows=dict(type="int"),
        )
    ).run(report.info)


if __name__ == "__main__":
    main()
