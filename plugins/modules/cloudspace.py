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
  - With O(cluster) and O(state=present), a cloudspace it creates gets a note that records the cluster as its
    creator (title C(capvco/v1), content C(creator cluster=NAME)). When another run created one of the same name
    at the same time, every run takes the earliest and the other is deleted again.
  - With O(cluster) and O(state=absent) (a cluster's teardown), the cloudspace is deleted only when its note
    records that cluster as its creator and no VM is left in it; otherwise it is kept, RV(kept) says why, and the
    task succeeds unchanged.
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
    description:
      - The cluster the cloudspace belongs to - recorded by a note when this creates it, and required of the note
        before O(state=absent) deletes it.
    type: str
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
- name: A cloudspace for cluster demo (a note on it records the cluster as its creator)
  whitesky.capvco.cloudspace:
    name: demo
    location: be-gen-1
    cluster: demo
  register: cs
# cs.cloudspace.cloudspace_id is what the machine modules take as cloudspace_id

- name: The teardown deletes it only when cluster demo made it and nothing else is left in it
  whitesky.capvco.cloudspace:
    name: demo
    location: be-gen-1
    cluster: demo
    state: absent
  register: teardown
# when it is kept, teardown.kept says why
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
created:
  description: With O(state=present), false when another run created the cloudspace first (and this one's was deleted).
  returned: when the cloudspace was missing
  type: bool
kept:
  description: With O(cluster), why the cloudspace was kept instead of deleted.
  returned: when kept
  type: str
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces


def main():
    WhiteskyModule(
        dict(
            name=dict(type="str", required=True),
            location=dict(type="str", required=True),
            private_network=dict(type="str"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            cluster=dict(type="str"),
        )
    ).run(cloudspaces.ensure)


if __name__ == "__main__":
    main()
