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
  - Runs C(nvidia-smi --query-gpu=driver_version,name --format=csv,noheader) on the node and checks that it exits
    0, that every GPU reports a driver version matching O(expected_version), and that at least O(expected_count)
    GPUs are seen.
  - Fails with a message that says what is wrong and what nvidia-smi printed; C(rc), C(stdout) and C(stderr) are
    returned with the failure.
  - Changes nothing.
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
  timeout:
    description: Seconds nvidia-smi may take.
    type: int
    default: 60
attributes:
  check_mode:
    description: Runs in check mode too; it only reads.
    support: full
  diff_mode:
    description: Nothing changes, so there is no diff.
    support: none
notes:
  - The role M(whitesky.capvco.gpu_driver) runs this after every install and writes its ready marker only when it
    passes.
"""

EXAMPLES = r"""
- name: The node must see two GPUs on the 550 branch
  whitesky.capvco.gpu_driver_verify:
    expected_version: "550"
    expected_count: 2
"""

RETURN = r"""
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

from ansible_collections.whitesky.capvco.plugins.module_utils import nvidia
from ansible_collections.whitesky.capvco.plugins.module_utils.module import WhiteskyModule


def main():
    WhiteskyModule(
        dict(
            expected_version=dict(type="str", default=""),
            expected_count=dict(type="int", default=1),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            timeout=dict(type="int", default=60),
        ),
        connection=False,
    ).run(nvidia.verify)


if __name__ == "__main__":
    main()
