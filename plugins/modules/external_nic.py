#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: external_nic
short_description: Attach or detach a NIC on an external network to a whitesky.cloud VM
version_added: 0.1.0
description:
  - Ensures that a VM has a NIC on an external network (V(present)), or has none there (V(absent)).
  - The platform's attach call answers only C(success), so the new NIC is found by listing the VM's NICs before
    and after the call and taking the difference. A lost answer is resolved the same way, so a NIC is never
    attached twice.
  - The address comes from the network's range, assigned by the platform unless O(ip_address) asks for one.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  location:
    description: The location (G8) of the cloudspace and the network.
    type: str
    required: true
  cloudspace_id:
    description: The cloudspace of the VM.
    type: str
    required: true
  machine:
    description: The VM, by name or id.
    type: str
    required: true
  network:
    description: The external network, by name or id.
    type: str
    required: true
  ip_address:
    description:
      - With V(present), ask for this address; with V(absent), detach only the NIC with this address.
      - With V(present), the new NIC is the VM's NIC at this address, whatever else is on the network.
        An address another NIC holds (or the network's own, broadcast or gateway address) fails naming it.
      - Without it, V(present) is satisfied by any NIC on the network and V(absent) detaches all of them.
    type: str
  model:
    description: The NIC model. The spec has no SR-IOV model value, so this is a setting.
    type: str
    choices: [virtio, e1000, rtl8139, ne2k_pci, i82551, i82557b, i82559er, pcnet]
    default: virtio
  state:
    description: Whether the NIC is attached.
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
attributes:
  check_mode:
    description: Reports whether a NIC would be attached or detached, and changes nothing.
    support: full
  diff_mode:
    description: The VM's addresses on the network before and after, a line C(nic <address>) each.
    support: full
seealso:
  - module: whitesky.capvco.external_network_info
"""

EXAMPLES = r"""
# Set-up: a worker of cluster demo, in the cluster's cloudspace (created with it)
- name: Cluster demo's worker
  whitesky.capvco.machine_pool:
    cloudspace: demo
    location: be-gen-1
    cluster: demo
    pool: worker
    names: [demo-worker-0]
    vcpus: 4
    memory: 8192
    image_id: 12
  register: demo

- name: Give the worker a NIC on the SR-IOV network
  whitesky.capvco.external_nic:
    location: be-gen-1
    cloudspace_id: "{{ demo.cloudspace_id }}"
    machine: demo-worker-0
    network: sriov-ext
  register: nic

- name: Detach it again
  whitesky.capvco.external_nic:
    location: be-gen-1
    cloudspace_id: "{{ demo.cloudspace_id }}"
    machine: demo-worker-0
    network: sriov-ext
    ip_address: "{{ nic.nic.ip_address }}"
    state: absent

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
nic:
  description: The NIC on the network (with V(present)).
  returned: when state is present and not in check mode with a new NIC
  type: dict
  contains:
    mac_address:
      description: Its MAC address.
      type: str
      sample: "52:54:00:00:00:07"
    ip_address:
      description: The address the platform assigned.
      type: str
      sample: 198.51.100.2
    network_id:
      description: The external network's id.
      type: int
    device_name:
      description: The platform's device name.
      type: str
detached:
  description: The NICs detached (with V(absent)).
  returned: when state is absent
  type: list
  elements: dict
vm_id:
  description: The VM's id.
  returned: always
  type: int
network_id:
  description: The external network's id.
  returned: always
  type: int
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import nics


def main():
    WhiteskyModule(
        dict(
            location=dict(type="str", required=True),
            cloudspace_id=dict(type="str", required=True),
            machine=dict(type="str", required=True),
            network=dict(type="str", required=True),
            ip_address=dict(type="str"),
            model=dict(
                type="str",
                default="virtio",
                choices=["virtio", "e1000", "rtl8139", "ne2k_pci", "i82551", "i82557b", "i82559er", "pcnet"],
            ),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        )
    ).run(nics.ensure)


if __name__ == "__main__":
    main()
