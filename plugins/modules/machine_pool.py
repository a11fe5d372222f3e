#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: machine_pool
short_description: A cluster's machines, a whole pool in one call (VMs created or deleted concurrently)
version_added: 0.1.0
description:
  - The pool form of M(whitesky.capvco.machine), for the lifecycle playbooks. One module call per pool, one listing
    of the cloudspace, and the platform calls of different machines at once (O(parallel) at a time), instead of a
    loop of single-machine calls.
  - Every VM of one of O(names) must carry O(cluster)'s marker in its description (C(capvco/v1 cluster=NAME ...)),
    checked for all of them before anything is changed; a VM of such a name without it (another cluster's, or
    one made by hand) fails the call, naming it, and nothing is created or deleted.
  - With O(state=present), the missing machines are created with the cluster's marker and the collection's
    first-boot script as user data (the same as M(whitesky.capvco.machine)). Existing ones are kept as they are
    (a size that differs is a warning, never a resize).
  - With O(state=absent), a graceful delete releases each machine's vGPUs (the reservations the cluster owns for
    it) and then deletes it; O(force=true) deletes with C(detach_gpu=true) and releases nothing, leaving those
    reservations to the cluster teardown and the orphan sweep.
  - When some machines fail, the others still converge; the module fails naming those that did not, and returns
    those that did.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  cloudspace_id:
    description: The cloudspace. Or use O(cloudspace).
    type: str
  cloudspace:
    description:
      - The cloudspace by name, in O(location), found in the same call (a lifecycle playbook's one task instead of
        two). Give O(cloudspace_id) or this.
      - With O(state=present), a missing one is created, and recorded as the cluster's by a note on it (so that the
        cluster's teardown, M(whitesky.capvco.cluster), may delete it); with O(state=absent), none
        is nothing to delete (its machines went with it), and O(sweep) still releases every reservation the cluster
        owns.
    type: str
  cluster:
    description:
      - The owning cluster, whose marker every machine of O(names) carries (or gets, when created).
      - Every machine name starts with the cluster's name and C(-) (C(demo-gpu-0) for cluster C(demo)); another
        name is refused before anything is read. The cluster's reads describe only VMs of such names, so they cost
        one call per machine of the cluster, not one per VM of the cloudspace.
    type: str
    required: true
  names:
    description: The machines' VM names (unique), for one pool (O(pool) and the size options). Or use O(pools).
    type: list
    elements: str
  pools:
    description:
      - Several pools in one call, each with its own names and size; the names are unique across them.
    type: list
    elements: dict
    suboptions:
      name:
        description: The pool, recorded in the marker of the machines created.
        type: str
      names:
        description: The pool's VM names.
        type: list
        elements: str
        required: true
      vcpus:
        description: As O(vcpus), for this pool.
        type: int
      memory:
        description: As O(memory), for this pool.
        type: int
      image_id:
        description: As O(image_id), for this pool (required to create its machines).
        type: int
      disk_size:
        description: As O(disk_size), for this pool.
        type: int
      gpu:
        description:
          - Each machine of the pool holds O(pools[].gpu.count) vGPUs of O(pools[].gpu.type), after the machines
            converge, as M(whitesky.capvco.vgpu) does it (the type resolved against the location's profiles, one
            reserve-and-attach call per vGPU under a name that encodes its owner). Needs O(location).
          - With O(state=present), every GPU pool's type and profile are checked against the location's profiles
            (one read) before any cloudspace or machine is created.
        type: dict
        suboptions:
          type:
            description: The GPU type, for example C(NVIDIA A100).
            type: str
            required: true
          count:
            description: vGPUs per machine.
            type: int
            default: 1
          profile:
            description:
              - Which of the type's profiles, as M(whitesky.capvco.vgpu)'s O(whitesky.capvco.vgpu#module:profile) -
                V(full), the profile with the most GPU memory (a whole card; what unset gets), a profile id (a
                partial card only this way) or V(any) (any of the type's, whichever has room). One the type does
                not have at the location fails, naming the type's profiles there.
            type: str
          driver_version:
            description:
              - The NVIDIA driver branch or version the pool's first boot installs, pinned, and verifies (the
                C(gpu-driver) step, see O(first_boot.gpu_driver)); empty verifies a driver the image has. A pool
                with a O(pools[].gpu.count) above 0 always gets the step.
            type: str
            default: ""
  exclusive:
    description:
      - Also delete the machines the cluster owns that no pool names (a scale-down; gracefully unless O(force)).
      - With O(state=absent), delete every machine the cluster owns in the cloudspace.
    type: bool
    default: false
  state:
    description: Whether the machines exist.
    type: str
    choices: [present, absent]
    default: present
  pool:
    description: The machine pool, recorded in the marker of the machines created.
    type: str
  force:
    description: With O(state=absent), delete the VMs with their vGPUs still attached and release nothing.
    type: bool
    default: false
  location:
    description:
      - The location, for a graceful delete's vGPU release, a pool's O(pools[].gpu) and O(sweep).
      - With it, the images of the machines to create are checked against the location's (one read) before anything
        is created.
    type: str
  sweep:
    description:
      - With O(state=absent), after the machines are deleted, release every vGPU reservation the cluster owns
        (attached before or not, those of machines deleted by force earlier included); the call fails when any is
        left. This is a cluster teardown's sweep (M(whitesky.capvco.vgpu_reclaim) with C(scope=cluster)).
    type: bool
    default: false
  parallel:
    description:
      - How many machines are created, read or deleted at once. The default converges a pool of up to 32 machines in
        one round; a larger pool goes in rounds of this size.
    type: int
    default: 32
extends_documentation_fragment:
  - whitesky.capvco.machine
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
attributes:
  check_mode:
    description: Reports which machines would be created or deleted (and which vGPUs released).
    support: full
  diff_mode:
    description: The cluster's machine names before and after, a line C(machine <name>) each.
    support: full
seealso:
  - module: whitesky.capvco.machine
  - module: whitesky.capvco.machine_info
"""

EXAMPLES = r"""
# The cloudspace is found by name, or created with a note that records it as cluster demo's
- name: The GPU pool's three workers, in cluster demo's cloudspace
  whitesky.capvco.machine_pool:
    cloudspace: demo
    location: be-gen-1
    cluster: demo
    pool: gpu
    names: [demo-gpu-0, demo-gpu-1, demo-gpu-2]
    vcpus: 8
    memory: 32768
    image_id: 12
    first_boot:
      packages: [containerd, kubelet]
  register: demo

- name: Two pools in one call, an NVIDIA A100 vGPU on each GPU worker; the cluster's other machines are deleted
  whitesky.capvco.machine_pool:
    cloudspace_id: "{{ demo.cloudspace_id }}"
    cluster: demo
    location: be-gen-1
    exclusive: true
    pools:
      - {name: cp, names: [demo-cp-0], vcpus: 2, memory: 4096, image_id: 12}
      - {name: gpu, names: [demo-gpu-0, demo-gpu-1], vcpus: 8, memory: 32768, image_id: 12, gpu: {type: NVIDIA A100}}

- name: Scale down - delete demo-gpu-1 gracefully (its vGPU is released first)
  whitesky.capvco.machine_pool:
    cloudspace_id: "{{ demo.cloudspace_id }}"
    cluster: demo
    location: be-gen-1
    names: [demo-gpu-1]
    state: absent

- name: Tear the cluster down - every machine it owns, then every reservation it owns, even when the cloudspace is gone
  whitesky.capvco.machine_pool:
    cloudspace: demo
    location: be-gen-1
    cluster: demo
    exclusive: true
    force: true
    sweep: true
    state: absent

- name: Then its cloudspace (deleted only when cluster demo made it and nothing else is left in it)
  whitesky.capvco.cloudspace:
    name: demo
    location: be-gen-1
    cluster: demo
    state: absent
"""

RETURN = r"""
cloudspace_id:
  description:
    - The cloudspace (found, or created, by name with O(cloudspace)); null when O(cloudspace) names none in a teardown,
      or in check mode when it would be created.
  returned: always
  type: str
machines:
  description: The machines of O(names) that exist (before a delete, after a create), as M(whitesky.capvco.machine)
    returns one.
  returned: always
  type: list
  elements: dict
created:
  description: The names of the machines created (or that would be, in check mode).
  returned: always
  type: list
  elements: str
deleted:
  description: The names of the machines deleted (or that would be, in check mode).
  returned: always
  type: list
  elements: str
cloudspace_made:
  description: In check mode, true when the cloudspace would be created.
  returned: in check mode, when the cloudspace is missing
  type: bool
reservations:
  description: With O(pools[].gpu), the reservations of the pools' machines, as M(whitesky.capvco.vgpu) returns them.
  returned: when a pool has gpu
  type: list
  elements: dict
released:
  description: With O(sweep), the reservations released, as M(whitesky.capvco.vgpu_reclaim) returns them.
  returned: when sweep is true
  type: list
  elements: dict
released_vgpus:
  description: With a graceful delete, the names of the reservations released.
  returned: when state is absent, force is false and a machine was there
  type: list
  elements: str
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import machine, machine_pool


def main():
    WhiteskyModule(
        dict(
            cloudspace_id=dict(type="str"),
            cloudspace=dict(type="str"),
            cluster=dict(type="str", required=True),
            names=dict(type="list", elements="str"),
            pools=dict(
                type="list",
                elements="dict",
                options=dict(
                    name=dict(type="str"),
                    names=dict(type="list", elements="str", required=True),
                    **machine.SIZE_OPTIONS,
                    gpu=dict(
                        type="dict",
                        options=dict(
                            type=dict(type="str", required=True),
                            count=dict(type="int", default=1),
                            profile=dict(type="str"),
                            driver_version=dict(type="str", default=""),
                        ),
                    ),
                ),
            ),
            exclusive=dict(type="bool", default=False),
            sweep=dict(type="bool", default=False),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            pool=dict(type="str"),
            force=dict(type="bool", default=False),
            location=dict(type="str"),
            **machine.SIZE_OPTIONS,
            first_boot=render.OPTIONS,
            bootstrap_data=dict(type="str", no_log=True),
            parallel=dict(type="int", default=32),
        ),
        mutually_exclusive=[("names", "pools"), ("cloudspace_id", "cloudspace")],
        required_one_of=[("cloudspace_id", "cloudspace")],
    ).run(machine_pool.ensure_pool)


if __name__ == "__main__":
    main()
