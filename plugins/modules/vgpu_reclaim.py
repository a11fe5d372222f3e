#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vgpu_reclaim
short_description: Release the vGPU reservations a cluster owns, or the ones that escaped
version_added: 0.1.0
description:
  - With O(scope=cluster), releases every reservation the cluster owns, attached or not, including those of
    machines deleted with force (the platform detaches them and keeps billing).
  - With O(scope=orphans), releases owned reservations whose machine no longer exists, once they are older than
    O(grace_period), so that it never races a machine that is being created.
  - Never touches a reservation whose name does not decode as this collection's, or that another cluster owns.
  - With O(cluster), a reservation to release that is attached to a machine whose marker does not name O(cluster)
    fails the call before anything is released, naming the machine.
  - In check mode it is a report of what would be released and kept.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  location:
    description: The location (G8).
    type: str
    required: true
  scope:
    description: V(cluster) releases all the cluster owns; V(orphans) only what escaped.
    type: str
    choices: [cluster, orphans]
    required: true
  cluster:
    description:
      - The cluster. Required with O(scope=cluster); with O(scope=orphans) it limits the sweep to this cluster
        (all clusters otherwise).
    type: str
  grace_period:
    description: With O(scope=orphans), the minimum age in seconds of a reservation before it is released.
    type: int
    default: 900
  permanently:
    description: Delete permanently (a vGPU in the recycle bin is assumed to still bill).
    type: bool
    default: true
  parallel:
    description: How many VMs' reservations are released at once (32 by default, a typical pool in one round).
    type: int
    default: 32
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
attributes:
  check_mode:
    description: A report; nothing is released.
    support: full
  diff_mode:
    description: The owned reservation names before and after, a line C(vgpu <name>) each.
    support: full
seealso:
  - module: whitesky.capvco.vgpu_info
"""

EXAMPLES = r"""
- name: Teardown - release everything the cluster owns
  whitesky.capvco.vgpu_reclaim:
    location: be-gen-1
    scope: cluster
    cluster: demo

- name: Report orphans without releasing them
  whitesky.capvco.vgpu_reclaim:
    location: be-gen-1
    scope: orphans
    grace_period: 3600
  check_mode: true
"""

RETURN = r"""
released:
  description: The reservations released (in check mode, that would be).
  returned: always
  type: list
  elements: dict
kept:
  description: Owned reservations kept, each with a C(reason).
  returned: always
  type: list
  elements: dict
ignored:
  description: How many reservations of the location are not in scope (not ours, or another cluster's).
  returned: always
  type: int
saved_per_hour:
  description: What the released reservations cost per hour, in RV(currency).
  returned: always
  type: float
currency:
  description: The location's currency (when anything is released).
  returned: always
  type: str
"""

from ansible_collections.whitesky.capvco.plugins.module_utils import sweep
from ansible_collections.whitesky.capvco.plugins.module_utils.module import WhiteskyModule


def main():
    WhiteskyModule(
        dict(
            location=dict(type="str", required=True),
            scope=dict(type="str", choices=["cluster", "orphans"], required=True),
            cluster=dict(type="str"),
            grace_period=dict(type="int", default=900),
            permanently=dict(type="bool", default=True),
            parallel=dict(type="int", default=32),
        ),
        required_if=[("scope", "cluster", ("cluster",))],
    ).run(sweep.reclaim)


if __name__ == "__main__":
    main()
