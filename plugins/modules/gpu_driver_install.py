#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_driver_install
short_description: Install a pinned NVIDIA driver branch on a node, retried, held and verified
version_added: 0.1.0
description:
  - Runs the collection's GPU driver fragment on the node, the same shell the first boot of a GPU machine embeds
    (one implementation, see C(docs/gpu-driver.md)).
  - With O(version) set, blacklists nouveau, installs the branch's packages (C(nvidia-headless-BRANCH-server),
    C(nvidia-utils-BRANCH-server), pinned to O(version) when it is a full version) and the running kernel's
    headers, waiting up to O(lock_timeout) seconds for the apt/dpkg lock and retrying a failed attempt with
    backoff (O(attempts), O(delay) doubled each time), then holds the packages.
  - With O(verify), then verifies as M(whitesky.capvco.gpu_driver_verify) does.
  - A failure fails loudly with the step (C(gpu-driver)), the reason with apt's own lines, and the last lines of
    the log (C(log_tail)); the status is also left in C(gpu-driver.status) under O(state_dir).
author:
  - whitesky.capvco contributors (@whitesky)
options:
  version:
    description:
      - The driver branch or version, for example C(550) or C(550.127.05). Empty installs nothing (an image with the
        driver baked in), and only the verification runs.
    type: str
    default: ""
  expected_count:
    description: The least number of GPUs the node must see, for the verification.
    type: int
    default: 1
  verify:
    description: Verify after the install. The role turns this off to reboot in between.
    type: bool
    default: true
  attempts:
    description: Attempts at the install before failing.
    type: int
    default: 5
  delay:
    description: Seconds before the second attempt; doubled for each next one.
    type: int
    default: 5
  lock_timeout:
    description: Seconds to wait for the apt/dpkg lock.
    type: int
    default: 600
  wait:
    description: Seconds the verification waits for nvidia-smi to list O(expected_count) GPUs.
    type: int
    default: 0
  nvidia_smi:
    description: The nvidia-smi command.
    type: str
    default: nvidia-smi
  state_dir:
    description: Where the script keeps its status file and log.
    type: path
    default: /var/lib/capvco
attributes:
  check_mode:
    description: Changes nothing; says whether the install would (apt's simulation, the blacklist and the holds).
    support: full
  diff_mode:
    description: No diff is returned.
    support: none
seealso:
  - module: whitesky.capvco.gpu_driver_verify
"""

EXAMPLES = r"""
- name: The 550 branch on a GPU node, then a reboot when it changed
  whitesky.capvco.gpu_driver_install:
    version: "550"
    expected_count: 2
    verify: false
  register: driver

- name: Pin an exact version and verify it at once
  whitesky.capvco.gpu_driver_install:
    version: "550.127.05"
    expected_count: 1
"""

RETURN = r"""
driver_version:
  description: The driver version nvidia-smi reports, when the verification ran.
  returned: success
  type: str
  sample: 550.127.05
gpus:
  description: The GPUs nvidia-smi reports, when the verification ran.
  returned: success
  type: list
  elements: dict
  sample: [{"driver_version": "550.127.05", "name": "NVIDIA A100-SXM4-40GB"}]
count:
  description: How many GPUs it sees.
  returned: success
  type: int
status_file:
  description: The status file the script wrote (JSON, as the first boot's).
  returned: success
  type: str
  sample: /var/lib/capvco/gpu-driver.status
"""

from ansible_collections.whitesky.capvco.plugins.module_utils import nvidia
from ansible_collections.whitesky.capvco.plugins.module_utils.module import WhiteskyModule


def main():
    WhiteskyModule(
        dict(
            version=dict(type="str", default=""),
            expected_count=dict(type="int", default=1),
            verify=dict(type="bool", default=True),
            attempts=dict(type="int", default=5),
            delay=dict(type="int", default=5),
            lock_timeout=dict(type="int", default=600),
            wait=dict(type="int", default=0),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            state_dir=dict(type="path", default="/var/lib/capvco"),
        ),
        connection=False,
    ).run(nvidia.install)


if __name__ == "__main__":
    main()
