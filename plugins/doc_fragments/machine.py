# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """What a machine is created with, shared by ``machine`` and ``machine_pool``."""

    DOCUMENTATION = r"""
options:
  vcpus:
    description: Virtual CPUs of each machine created (required to create).
    type: int
  memory:
    description: Memory in MiB of each machine created (required to create).
    type: int
  image_id:
    description:
      - The id of the image each machine created boots (required to create; M(whitesky.capvco.image_info) lists a
        location's images). Without it, or with an id below 1, nothing is created.
      - With O(location), an id the location has no image of is refused before anything is created, naming the
        images it has.
    type: int
  disk_size:
    description: Boot disk size in GiB.
    type: int
  first_boot:
    description: The first boot's package installs.
    type: dict
    suboptions:
      packages:
        description: Packages to install on first boot.
        type: list
        elements: str
        default: []
      attempts:
        description: Attempts for each apt step.
        type: int
        default: 5
      delay:
        description: Seconds before the second attempt, doubled each time.
        type: int
        default: 5
      lock_timeout:
        description: Seconds to wait for the apt/dpkg lock.
        type: int
        default: 600
      gpu_driver:
        description:
          - The C(gpu-driver) step of a GPU machine's first boot, after the packages and before the bootstrap
            data, the same fragment C(whitesky.capvco.gpu_driver) runs (C(docs/gpu-driver.md)). With
            O(first_boot.gpu_driver.version), nouveau is blacklisted and the branch's packages are installed,
            pinned, retried and held; in any case C(nvidia-smi) must then list at least
            O(first_boot.gpu_driver.count) GPUs, with a driver matching the pin, or the first boot fails there
            (C(first-boot.status) says C(step=gpu-driver) and why) and the bootstrap never runs.
          - M(whitesky.capvco.machine_pool) sets it for each pool with a C(gpu).
        type: dict
        suboptions:
          version:
            description: The driver branch or version (C(550), C(550.127.05)); empty verifies a driver the image has.
            type: str
            default: ""
          count:
            description: The least number of GPUs C(nvidia-smi) must list.
            type: int
            default: 1
          wait:
            description: Seconds to wait for the GPUs (vGPUs are attached to the running machine).
            type: int
            default: 900
  bootstrap_data:
    description:
      - Bootstrap data run by the first boot after its packages (a script), or sent beside it (C(#cloud-config)),
        for example a Cluster API bootstrap Secret's value.
    type: str
"""
