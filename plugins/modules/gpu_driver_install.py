#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_driver_install
short_description: Install a pinned NVIDIA driver branch on a node, retried and held, failing loudly
version_added: 0.1.0
description:
  - Runs the install of the collection's GPU driver fragment on the node, the same shell the first boot of a GPU
    machine embeds (one implementation, see C(docs/gpu-driver.md)).
  - Blacklists nouveau, installs the branch's packages (C(nvidia-headless-BRANCH-server),
    C(nvidia-utils-BRANCH-server), pinned to O(version) when it is a full version) and the running kernel's
    headers, waiting up to O(lock_timeout) seconds for the apt/dpkg lock and retrying a failed attempt with backoff
    (O(attempts), O(delay) doubled each time), then holds the packages.
  - A failure fails loudly with the step (C(gpu-driver)), the reason with apt's own lines, and the last lines of
    the log (C(log_tail)); the status is also left in C(gpu-driver.status) under O(state_dir).
  - It does not verify; M(whitesky.capvco.gpu_driver_verify) does, after a reboot when this changed something (the
    role C(whitesky.capvco.gpu_driver) runs both).
author:
  - whitesky.capvco contributors (@whitesky)
options:
  version:
    description:
      - The driver branch or version, for example C(550) or C(550.127.05). Empty installs nothing (an image with the
        driver baked in).
    type: str
    required: true
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
- name: The 550 branch on a GPU node
  whitesky.capvco.gpu_driver_install:
    version: "550"
  register: driver

- name: Reboot into it when it changed something
  when: driver is changed
  ansible.builtin.reboot:
"""

RETURN = r"""
status_file:
  description: The install's status file (JSON, as the first boot's), with its log beside it.
  returned: success
  type: str
  sample: /var/lib/capvco/gpu-driver.status
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import nvidia, render


def main():
    WhiteskyModule(
        dict(
            version=dict(type="str", required=True),
            **render.RETRY_OPTIONS,
            state_dir=dict(type="path", default="/var/lib/capvco"),
        ),
        connection=False,
    ).run(nvidia.install)


if __name__ == "__main__":
    main()
