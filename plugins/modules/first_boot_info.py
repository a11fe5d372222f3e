#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: first_boot_info
short_description: What a machine's first boot reports, read through the platform (no SSH)
version_added: 0.1.0
description:
  - Reads the first boot's status file (C(/var/lib/capvco/first-boot.status), JSON with C(state), C(step),
    C(reason), C(gpu_driver_version) and C(log_tail)) from the VM through the platform's guest agent (the
    C(readFile) operation), so that a controller that cannot reach the machine still sees it.
  - With O(gpu), also returns the C(GPUDriverReady) condition of a GPU machine, the one the controller records on
    its VCOMachine.
  - A file that is not there yet, or an agent that does not answer yet, is no error; C(reported) is false and
    C(message) says why.
  - The file comes from the machine and is read as hostile; at most 64 KiB and 32 levels of nesting, with
    exactly the fields the first boot writes, each of its type, its texts scrubbed (secrets removed, control
    characters escaped, lengths bounded). A file that is anything else is reported (C(reported) and C(invalid)
    are true, C(message) says what is wrong, bounded and scrubbed) and the condition is C(InvalidStatus).
  - A VM or cloudspace that does not exist is an error (no first boot will ever report); the failure result has
    C(machine_not_found=true) and its message names the VM or the cloudspace.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  cloudspace_id:
    description: The machine's cloudspace.
    type: str
    required: true
  vm_id:
    description: The machine's VM id.
    type: int
    required: true
  path:
    description: The status file on the machine.
    type: str
    default: /var/lib/capvco/first-boot.status
  gpu:
    description: The machine has GPUs; return its C(GPUDriverReady) condition.
    type: bool
    default: false
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
attributes:
  check_mode:
    description: It only reads.
    support: full
  diff_mode:
    description: Nothing changes, so there is no diff.
    support: none
seealso:
  - module: whitesky.capvco.machine
"""

EXAMPLES = r"""
# Set-up: a GPU worker of cluster demo with one vGPU, in the cluster's cloudspace (created with it)
- name: Cluster demo's GPU worker
  whitesky.capvco.machine_pool:
    cloudspace: demo
    location: be-gen-1
    cluster: demo
    pools:
      - name: gpu
        names: [demo-gpu-0]
        vcpus: 8
        memory: 32768
        image_id: 12
        gpu: {type: NVIDIA A100, count: 1, driver_version: "550"}
  register: demo

- name: How far the worker's first boot is (reported stays false until it has written its status)
  whitesky.capvco.first_boot_info:
    cloudspace_id: "{{ demo.cloudspace_id }}"
    vm_id: "{{ demo.machines[0].vm_id }}"
    gpu: true
  register: first_boot
# first_boot.gpu_driver_ready is the GPUDriverReady condition: Unknown until the first boot has a verdict

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
reported:
  description: Whether the first boot has written its status yet.
  returned: always
  type: bool
invalid:
  description: Whether the file is there but is not a status document (C(message) says why).
  returned: always
  type: bool
status:
  description:
    - The status document (empty when not reported, or invalid), with every field the first boot writes
      (C(state), C(step), C(reason), C(gpu_driver_version), C(nvidia_smi), C(changed), C(log_tail)).
  returned: always
  type: dict
  sample: {"state": "failed", "step": "gpu-driver", "reason": "nvidia-smi sees 1 GPU(s), at least 2 expected"}
message:
  description: Why there is no status yet, or why the file is not one (empty when there is one).
  returned: always
  type: str
gpu_driver_ready:
  description:
    - The C(GPUDriverReady) condition. C(Unknown) while the first boot has no verdict, C(False) with the step and
      the reason when it failed (C(FirstBootFailed)), when it reported ready without a driver step
      (C(DriverNotVerified)) or wrote a report that is not one (C(InvalidStatus)), C(True) with the driver version
      it verified.
  returned: when gpu is true
  type: dict
  sample:
    type: GPUDriverReady
    status: "True"
    reason: DriverVerified
    message: NVIDIA driver 550.127.05, 2 GPU(s)
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import script, status


def main():
    WhiteskyModule(
        dict(
            cloudspace_id=dict(type="str", required=True),
            vm_id=dict(type="int", required=True),
            path=dict(type="str", default=script.STATUS_FILE),
            gpu=dict(type="bool", default=False),
        )
    ).run(status.info)


if __name__ == "__main__":
    main()
