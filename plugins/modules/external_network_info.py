#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: external_network_info
short_description: List the external networks of a whitesky.cloud location
version_added: 0.1.0
description:
  - Lists a location's external networks, or one of them by name or id.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  location:
    description: The location (G8).
    type: str
    required: true
  name:
    description: Only this network, by name or id; an unknown one fails and lists the location's networks.
    type: str
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
  - whitesky.capvco.connection.info_module
"""

EXAMPLES = r"""
- name: The location's external networks
  whitesky.capvco.external_network_info:
    location: be-gen-1
  register: nets
"""

RETURN = r"""
networks:
  description: The networks.
  returned: always
  type: list
  elements: dict
  contains:
    external_network_id:
      description: The network's id.
      type: int
    name:
      description: Its name.
      type: str
    network:
      description: Its network address.
      type: str
      sample: 198.51.100.0
    subnet_mask:
      description: Its netmask (the prefix of the addresses it assigns).
      type: str
      sample: 255.255.255.0
    gateway:
      description: Its gateway.
      type: str
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import nics


def main():
    WhiteskyModule(
        dict(
            location=dict(type="str", required=True),
            name=dict(type="str"),
        )
    ).run(nics.network_info)


if __name__ == "__main__":
    main()
