#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: machine_info
short_description: List the machines (VMs) of a whitesky.cloud cloudspace
version_added: 0.1.0
description:
  - Lists a cloudspace's VMs with their vGPUs and external NICs, optionally one by name, those whose name starts
    with a prefix, or a cluster's machines.
  - A cluster's machines are named C(<cluster>-<rest>) and carry its marker in their description; only the VMs of
    such names are read (one call each, in parallel), so the calls grow with the cluster, not with the cloudspace.
  - Ownership is the marker in the description (written by M(whitesky.capvco.machine) with
    O(whitesky.capvco.machine#module:cluster)); the marker is compared whole, so cluster C(web) never lists
    C(web-gpu)'s machines or a hand-made C(web-db). A name prefix is only a filter, never proof of ownership.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  cloudspace_id:
    description: The cloudspace.
    type: str
    required: true
  name:
    description: Only the VM of this name.
    type: str
  name_prefix:
    description: Only VMs whose name starts with this (a filter, not ownership; see O(cluster)).
    type: str
  cluster:
    description:
      - Only the machines this cluster owns, by the marker in their description (read with one call per VM, in
        parallel).
    type: str
  vm_id:
    description:
      - Only the VM of this id, read with one call (its info, with its owner); none when it is gone, or when it
        does not match O(name), O(name_prefix) or O(cluster). The controller's idle reconcile reads its machine
        this way.
    type: int
  parallel:
    description: With O(cluster), how many VMs' descriptions are read at once.
    type: int
    default: 32
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
  - whitesky.capvco.connection.info_module
"""

EXAMPLES = r"""
# Set-up: two workers of cluster demo, in the cluster's cloudspace (created with them)
- name: Cluster demo's workers
  whitesky.capvco.machine_pool:
    cloudspace: demo
    location: be-gen-1
    cluster: demo
    pool: worker
    names: [demo-worker-0, demo-worker-1]
    vcpus: 4
    memory: 8192
    image_id: 12
  register: demo

- name: The cluster's machines
  whitesky.capvco.machine_info:
    cloudspace_id: "{{ demo.cloudspace_id }}"
    cluster: demo
  register: demo_machines

- name: One machine by its id, with its owner (one call)
  whitesky.capvco.machine_info:
    cloudspace_id: "{{ demo.cloudspace_id }}"
    vm_id: "{{ demo_machines.machines[0].vm_id }}"
    cluster: demo
  register: recorded

# Clean-up: the cluster's machines, then its cloudspace
- name: Delete cluster demo's machines
  whitesky.capvco.machine_pool:
    cloudspace_id: "{{ demo.cloudspace_id }}"
    location: be-gen-1
    cluster: demo
    exclusive: true
    state: absent

- name: Delete its cloudspace
  whitesky.capvco.cloudspace:
    name: demo
    location: be-gen-1
    cluster: demo
    state: absent
"""

RETURN = r"""
machines:
  description: The machines.
  returned: always
  type: list
  elements: dict
  contains:
    vm_id:
      description: The VM id.
      type: int
    name:
      description: The VM name.
      type: str
    status:
      description: The platform's status.
      type: str
    vgpus:
      description: The vGPU ids attached.
      type: list
      elements: str
    nics:
      description: The external NICs.
      type: list
      elements: dict
    owner:
      description: The cluster the marker names.
      type: str
      returned: with O(cluster) or O(vm_id)
    pool:
      description: The machine pool the marker names (null when it names none).
      type: str
      returned: with O(cluster) or O(vm_id)
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import machine


def main():
    WhiteskyModule(
        dict(
            cloudspace_id=dict(type="str", required=True),
            name=dict(type="str"),
            name_prefix=dict(type="str"),
            cluster=dict(type="str"),
            vm_id=dict(type="int"),
            parallel=dict(type="int", default=32),
        )
    ).run(machine.info)


if __name__ == "__main__":
    main()
