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
    description: The image to boot.
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
  bootstrap_data:
    description:
      - Bootstrap data run by the first boot after its packages (a script), or sent beside it (C(#cloud-config)),
        for example a Cluster API bootstrap Secret's value.
    type: str
"""
