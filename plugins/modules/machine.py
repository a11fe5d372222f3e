#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: machine
short_description: A cluster machine (a VM in a whitesky.cloud cloudspace), created with a retried first boot
version_added: 0.1.0
description:
  - With O(state=present), creates the VM when no VM of that name exists in the cloudspace. Its user data is the
    collection's first-boot script, which waits for the apt/dpkg lock, retries transient failures with backoff,
    runs O(bootstrap_data), and fails loudly (a failure marker with the log tail, and a status file the lifecycle
    playbooks read).
  - A graceful O(state=absent) releases the machine's vGPUs (the reservations its cluster owns for it) first, then
    deletes the VM.
  - O(force=true) deletes the VM with C(detach_gpu=true) and releases nothing; the platform keeps billing those
    vGPUs until the cluster teardown or the orphan sweep releases them.
  - With O(cluster), the machine is that cluster's only when its description carries the cluster's marker
    (C(capvco/v1 cluster=NAME ...)), written when this module creates it. A VM of the same name without it (another
    cluster's, or one made by hand) is never adopted, changed or deleted; the module fails and names it.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  cloudspace_id:
    description: The cloudspace.
    type: str
    required: true
  name:
    description: The VM name (the machine, and later the Kubernetes node name).
    type: str
    required: true
  state:
    description: Whether the machine exists.
    type: str
    choices: [present, absent]
    default: present
  force:
    description: With O(state=absent), delete the VM with its vGPUs still attached and release nothing.
    type: bool
    default: false
  cluster:
    description:
      - The owning cluster. A machine created with it carries the cluster's marker in its description; an existing
        machine must carry it to be kept or deleted. A graceful delete releases the vGPUs the cluster owns for it.
      - With it, O(name) must start with the cluster's name and C(-) (C(demo-gpu-0) for cluster C(demo)), since the
        cluster's reads describe only VMs of such names, so that they cost one call per machine of the cluster,
        not one per VM of the cloudspace. The name is a filter; the marker stays the proof.
    type: str
  pool:
    description: With O(cluster), the machine pool, recorded in the marker.
    type: str
  location:
    description: The location, for a graceful delete's vGPU release, and to check O(image_id) against the location's
      images before a machine is created.
    type: str
  description:
    description: The VM's description (without O(cluster); with it, the description is the cluster's marker).
    type: str
  provider_id:
    description:
      - A Cluster API providerID (C(whitesky://LOCATION/CLOUDSPACE/NAME)). The first boot hands it to the kubelet
        (C(--provider-id) in C(/etc/default/kubelet)) before the bootstrap data runs, so that the Node carries it.
    type: str
    version_added: 0.1.0
  user_data:
    description: Raw user data instead of the first-boot script (not recommended; nothing then fails loudly).
    type: str
extends_documentation_fragment:
  - whitesky.capvco.machine
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
attributes:
  check_mode:
    description: Reports whether the VM would be created or deleted (and which vGPUs released).
    support: full
  diff_mode:
    description: The machine before and after.
    support: full
seealso:
  - module: whitesky.capvco.machine_info
  - module: whitesky.capvco.vgpu
"""

EXAMPLES = r"""
# Set-up: cluster demo's cloudspace
- name: Cluster demo's cloudspace
  whitesky.capvco.cloudspace:
    name: demo
    location: be-gen-1
    cluster: demo
  register: cs

- name: Two GPU workers
  whitesky.capvco.machine:
    cloudspace_id: "{{ cs.cloudspace.cloudspace_id }}"
    name: "{{ item }}"
    cluster: demo
    pool: gpu
    vcpus: 8
    memory: 32768
    image_id: 12
    first_boot:
      packages: [containerd, kubelet]
  loop: [demo-gpu-0, demo-gpu-1]

- name: An NVIDIA A100 vGPU on each
  whitesky.capvco.vgpu:
    location: be-gen-1
    cloudspace_id: "{{ cs.cloudspace.cloudspace_id }}"
    cluster: demo
    machines: [demo-gpu-0, demo-gpu-1]
    type: NVIDIA A100

- name: Delete one gracefully (its vGPUs are released first)
  whitesky.capvco.machine:
    cloudspace_id: "{{ cs.cloudspace.cloudspace_id }}"
    name: demo-gpu-0
    cluster: demo
    location: be-gen-1
    state: absent

- name: Delete the other by force (its vGPUs stay reserved, and billed, until a sweep releases them)
  whitesky.capvco.machine:
    cloudspace_id: "{{ cs.cloudspace.cloudspace_id }}"
    name: demo-gpu-1
    cluster: demo
    state: absent
    force: true

- name: The sweep - release every vGPU reservation cluster demo still owns
  whitesky.capvco.vgpu_reclaim:
    location: be-gen-1
    scope: cluster
    cluster: demo

# Clean-up
- name: Delete the cloudspace
  whitesky.capvco.cloudspace:
    name: demo
    location: be-gen-1
    cluster: demo
    state: absent
"""

RETURN = r"""
machine:
  description: The machine (before a delete, after a create).
  returned: always
  type: dict
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
released_vgpus:
  description: With a graceful delete, the names of the reservations released.
  returned: when state is absent and force is false
  type: list
  elements: str
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import machine


def main():
    WhiteskyModule(
        dict(
            cloudspace_id=dict(type="str", required=True),
            name=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            force=dict(type="bool", default=False),
            cluster=dict(type="str"),
            pool=dict(type="str"),
            location=dict(type="str"),
            **machine.SIZE_OPTIONS,
            description=dict(type="str"),
            first_boot=render.OPTIONS,
            bootstrap_data=dict(type="str", no_log=True),
            provider_id=dict(type="str"),
            user_data=dict(type="str", no_log=True),
        )
    ).run(machine.ensure)


if __name__ == "__main__":
    main()
