#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cloudspace
short_description: A whitesky.cloud cloudspace, by name
version_added: 0.1.0
description:
  - Ensures a cloudspace of O(name) exists in O(location) (V(present)) or not (V(absent)). A cloudspace that still
    has machines is not deleted; the error says so.
  - With O(cluster) and O(state=absent) (a cluster's teardown), the cloudspace is deleted only when the cluster
    created it (O(created_by_cluster)) and no VM is left in it; otherwise it is kept, RV(kept) and a warning say
    why, and the task succeeds unchanged.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  name:
    description: The cloudspace name.
    type: str
    required: true
  location:
    description: The location.
    type: str
    required: true
  private_network:
    description: The private network of a new cloudspace (platform default when omitted).
    type: str
  state:
    description: Whether it exists.
    type: str
    choices: [present, absent]
    default: present
  cluster:
    description: With O(state=absent), the cluster whose teardown this is (see O(created_by_cluster)).
    type: str
  created_by_cluster:
    description:
      - With O(cluster), whether that cluster created the cloudspace (its machines' markers record it, see
        M(whitesky.capvco.machine_info)). When false the cloudspace is kept.
    type: bool
    default: false
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
attributes:
  check_mode:
    description: Reports whether it would be created or deleted.
    support: full
  diff_mode:
    description: The cloudspace before and after.
    support: full
"""

EXAMPLES = r"""
- name: The cluster's cloudspace
  whitesky.capvco.cloudspace:
    name: demo
    location: be-gen-1
  register: cs

- name: The teardown deletes it only when the cluster made it and nothing else is left in it
  whitesky.capvco.cloudspace:
    name: demo
    location: be-gen-1
    cluster: demo
    created_by_cluster: true
    state: absent
"""

RETURN = r"""
cloudspace:
  description: The cloudspace (before a delete).
  returned: always
  type: dict
  contains:
    cloudspace_id:
      description: Its id.
      type: str
    name:
      description: Its name.
      type: str
    location:
      description: Its location.
      type: str
kept:
  description: With O(cluster), why the cloudspace was kept instead of deleted.
  returned: when kept
  type: str
"""

from ansible_collections.whitesky.capvco.plugins.module_utils import cloudspaces
from ansible_collections.whitesky.capvco.plugins.module_utils.module import WhiteskyModule


def main():
    WhiteskyModule(
        dict(
            name=dict(type="str", required=True),
            location=dict(type="str", required=True),
            private_network=dict(type="str"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            cluster=dict(type="str"),
            created_by_cluster=dict(type="bool", default=False),
        )
    ).run(cloudspaces.ensure)


if __name__ == "__main__":
    main()
