#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cloudspace_info
short_description: List whitesky.cloud cloudspaces
version_added: 0.1.0
description:
  - Lists the customer's cloudspaces, optionally by name and location.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  name:
    description: Only cloudspaces of this name.
    type: str
  location:
    description: Only cloudspaces in this location.
    type: str
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
  - whitesky.capvco.connection.info_module
"""

EXAMPLES = r"""
# Set-up: the cloudspace to find
- name: Cluster demo's cloudspace
  whitesky.capvco.cloudspace:
    name: demo
    location: be-gen-1
    cluster: demo

- name: Find the cluster's cloudspace
  whitesky.capvco.cloudspace_info:
    name: demo
    location: be-gen-1
  register: found

- name: Its id
  ansible.builtin.debug:
    msg: "{{ found.cloudspaces | map(attribute='cloudspace_id') | first }}"

# Clean-up
- name: Delete the cloudspace again
  whitesky.capvco.cloudspace:
    name: demo
    location: be-gen-1
    cluster: demo
    state: absent
"""

RETURN = r"""
cloudspaces:
  description: The cloudspaces.
  returned: always
  type: list
  elements: dict
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
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import cloudspaces


def main():
    WhiteskyModule(
        dict(
            name=dict(type="str"),
            location=dict(type="str"),
        )
    ).run(cloudspaces.info)


if __name__ == "__main__":
    main()
