#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_driver_verify
short_description: Verify a node's NVIDIA driver with nvidia-smi, and fail loudly when it is not right
version_added: 0.1.0
description:
  - Runs the verification of the collection's GPU driver fragment on the node (the same one the first boot of a
    GPU machine runs). C(nvidia-smi --query-gpu=driver_version,name --format=csv,noheader) must exit 0, every GPU
    must report a driver version matching O(expected_version), and at least O(expected_count) GPUs must be seen,
    within O(wait) seconds.
  - Fails with the step, the reason (which says what is wrong and what nvidia-smi printed) and the last lines of
    the log (C(log_tail)); the status is also left in C(gpu-driver.status) under O(state_dir).
  - Changes nothing on the node but that status file and its log.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  expected_version:
    description:
      - The pinned driver branch or version, for example C(550) or C(550.127.05). Empty accepts any version (an
        image with the driver baked in).
    type: str
    default: ""
  expected_count:
    description: The least number of GPUs the node must see.
    type: int
    default: 1
  nvidia_smi:
    description: The nvidia-smi command.
    type: str
    default: nvidia-smi
  wait:
    description: Seconds to wait for nvidia-smi to list O(expected_count) GPUs (vGPUs attached a moment ago).
    type: int
    default: 0
  state_dir:
    description: Where the script keeps its status file and log.
    type: path
    default: /var/lib/capvco
attributes:
  check_mode:
    description: Runs in check mode too; it only reads.
    support: full
  diff_mode:
    description: Nothing changes, so there is no diff.
    support: none
notes:
  - The role C(whitesky.capvco.gpu_driver) runs this after every install and writes its ready marker only when it
    passes; M(whitesky.capvco.gpu_driver_install) installs with the same fragment.
"""

EXAMPLES = r"""
- name: The node must see two GPUs on the 550 branch
  whitesky.capvco.gpu_driver_verify:
    expected_version: "550"
    expected_count: 2
"""

RETURN = r"""
status_file:
  description: The status file the script wrote (JSON, as the first boot's).
  returned: success
  type: str
  sample: /var/lib/capvco/gpu-driver.status
gpus:
  description: The GPUs nvidia-smi reports.
  returned: success
  type: list
  elements: dict
  sample: [{"driver_version": "550.127.05", "name": "NVIDIA A100-SXM4-40GB"}]
count:
  description: How many GPUs it sees.
  returned: success
  type: int
driver_version:
  description: The driver version it reports.
  returned: success
  type: str
  sample: 550.127.05
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import nvidia


def main():
    WhiteskyModule(
        dict(
            expected_version=dict(type="str", default=""),
            expected_count=dict(type="int", default=1),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            wait=dict(type="int", default=0),
            state_dir=dict(type="path", default="/var/lib/capvco"),
        ),
        connection=False,
    ).run(nvidia.verify)


if __name__ == "__main__":
    main()
