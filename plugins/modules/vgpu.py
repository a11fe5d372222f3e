#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vgpu
short_description: Ensure a machine holds exactly N vGPUs of a GPU type on whitesky.cloud
version_added: 0.1.0
description:
  - Makes one machine (or every machine of a pool) hold exactly O(count) vGPUs of a GPU O(type), by type and
    never by a location's profile id. The type is resolved against the location's per-card profiles; a profile with
    enough available instances is picked, among those O(profile) allows.
  - Each reservation is named after its owner (cluster, machine, slot, see the collection's docs on naming), so
    the name is the record. Reservations are looked up by name before anything is reserved, which makes the
    module idempotent and makes a lost response safe; it never reserves a slot twice.
  - Missing slots are reserved and attached in a single call. Owned reservations that are detached (or in the
    recycle bin) are attached (restored) again; slots above O(count) are released.
  - With O(state=absent) every reservation of the machine is detached and deleted (permanently by default,
    because a vGPU is billed until it is deleted permanently).
  - Every machine must carry O(cluster)'s marker in its description (as M(whitesky.capvco.machine) writes it with
    C(cluster)); a machine that another cluster owns, or that no cluster owns, is refused in the words of
    M(whitesky.capvco.machine).
  - Unknown types and profiles, a count above the location's capacity, a negative count, unknown machines and
    machines the cluster does not own fail before anything changes.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  location:
    description: The location (G8) of the cloudspace.
    type: str
    required: true
  cloudspace_id:
    description: The cloudspace that holds the machine(s).
    type: str
    required: true
  cluster:
    description:
      - The cluster that owns the reservations; it is encoded in each reservation's name.
      - Letters, digits and C(-).
    type: str
    required: true
  machine:
    description:
      - The machine, by VM name or VM id.
      - One of O(machine) and O(machines) is required.
    type: str
  machines:
    description:
      - Several machines (names or ids) of one pool, served with a single listing of the location's reservations
        and converged in parallel.
    type: list
    elements: str
  type:
    description:
      - The GPU type, vendor and model as the location's profiles give them, for example C(NVIDIA A100).
      - Compared without regard to case or spacing. Required with O(state=present).
    type: str
  count:
    description: How many vGPUs each machine holds.
    type: int
    default: 1
  profile:
    description:
      - Which of the type's profiles the vGPUs come from. V(full) is the profile with the most GPU memory, a whole
        card (its memory as the NVIDIA vGPU type in the profile's id or description says it - C(A100-40C) has 40 GB;
        a type with a profile whose memory neither says is refused for V(full), naming them). Anything else but
        V(any) is a profile id, for example C(nvidia-a100-40c) (M(whitesky.capvco.gpu_profile_info) lists them),
        case aside.
      - Unset, V(full) - whole cards. V(any) is any of the type's profiles, whichever has room (a partial card
        included); a partial card is otherwise taken only by its profile id.
      - A held reservation of another profile of the type is released and replaced by one of this profile.
      - A profile the type does not have at the location fails before anything changes, naming the type's
        profiles there (with their GPU memory).
    type: str
  state:
    description: Whether the machine holds O(count) vGPUs (V(present)) or none (V(absent)).
    type: str
    choices: [present, absent]
    default: present
  permanently:
    description:
      - Delete released reservations permanently. A vGPU in the recycle bin is assumed to still bill, so only turn
        this off when the platform is known not to bill it.
    type: bool
    default: true
  parallel:
    description:
      - How many machines are converged at once (one machine's operations always run in turn).
      - The default converges a pool of up to 32 machines in one round; a larger pool goes in rounds of this size.
    type: int
    default: 32
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
attributes:
  check_mode:
    description: Reports what would be reserved, attached and released, and changes nothing.
    support: full
  diff_mode:
    description: Shows each machine's slots before and after.
    support: full
notes:
  - A reserve whose response is lost (a timeout or a dropped connection) is resolved by looking its name up before
    any retry. A VM locked by another operation (HTTP 409) is waited for.
seealso:
  - module: whitesky.capvco.vgpu_info
  - module: whitesky.capvco.vgpu_reclaim
"""

EXAMPLES = r"""
# Set-up: cluster demo's GPU pool, three workers without vGPUs yet, in the cluster's cloudspace (created with them)
- name: Cluster demo's GPU workers
  whitesky.capvco.machine_pool:
    cloudspace: demo
    location: be-gen-1
    cluster: demo
    pool: gpu
    names: [demo-gpu-0, demo-gpu-1, demo-gpu-2]
    vcpus: 8
    memory: 32768
    image_id: 12
  register: demo

- name: Give a machine two NVIDIA A100 vGPUs
  whitesky.capvco.vgpu:
    location: be-gen-1
    cloudspace_id: "{{ demo.cloudspace_id }}"
    cluster: demo
    machine: demo-gpu-0
    type: NVIDIA A100
    count: 2

- name: A whole card for demo-gpu-2 (the A100 profile with the most GPU memory)
  whitesky.capvco.vgpu:
    location: be-gen-1
    cloudspace_id: "{{ demo.cloudspace_id }}"
    cluster: demo
    machine: demo-gpu-2
    type: NVIDIA A100
    profile: full

- name: A whole pool with one listing, one vGPU each (demo-gpu-0's second one is released)
  whitesky.capvco.vgpu:
    location: be-gen-1
    cloudspace_id: "{{ demo.cloudspace_id }}"
    cluster: demo
    machines: [demo-gpu-0, demo-gpu-1, demo-gpu-2]
    type: NVIDIA A100
    count: 1

- name: Release every vGPU of a machine before deleting it
  whitesky.capvco.vgpu:
    location: be-gen-1
    cloudspace_id: "{{ demo.cloudspace_id }}"
    cluster: demo
    machine: demo-gpu-0
    state: absent

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
  description: The machines' reservations after the run (in check mode, the ones kept).
  returned: always
  type: list
  elements: dict
  contains:
    vgpu_id:
      description: The reservation's id.
      type: str
    vgpu_name:
      description: The reservation's name, which encodes its owner.
      type: str
      sample: capvco.demo.demo-gpu-0.00.0t3k2a1
    gpu_id:
      description: The GPU profile it was reserved from.
      type: str
      sample: nvidia-a100-40c
    status:
      description: The platform's status of the reservation.
      type: str
      sample: ATTACHED
    vm_id:
      description: The VM it is attached to.
      type: int
    cluster:
      description: The owning cluster, as encoded.
      type: str
    machine:
      description: The owning machine, as encoded.
      type: str
    slot:
      description: The slot index on the machine.
      type: int
planned:
  description: In check mode, per machine, how many slots would be reserved, released and fixed.
  returned: in check mode
  type: dict
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus


def _arguments(params):
    """The core's arguments: ``type`` is ``gpu_type``, and one ``machine`` is a list of one."""
    args = {k: v for k, v in params.items() if k not in ("type", "machine")}
    args.update(gpu_type=params["type"], machines=params["machines"] or [params["machine"]])
    return args


def main():
    WhiteskyModule(
        dict(
            location=dict(type="str", required=True),
            cloudspace_id=dict(type="str", required=True),
            cluster=dict(type="str", required=True),
            machine=dict(type="str"),
            machines=dict(type="list", elements="str"),
            type=dict(type="str"),
            count=dict(type="int", default=1),
            profile=dict(type="str"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            permanently=dict(type="bool", default=True),
            parallel=dict(type="int", default=32),
        ),
        required_one_of=[("machine", "machines")],
        mutually_exclusive=[("machine", "machines")],
        required_if=[("state", "present", ("type",))],
    ).run(vgpus.ensure, adapt=_arguments)


if __name__ == "__main__":
    main()
