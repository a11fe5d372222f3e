#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: location_info
short_description: List the whitesky.cloud locations of the customer, with the GPU types each offers
version_added: 0.1.0
description:
  - Lists the customer's locations (C(GET /customers/{customer_id}/locations)), by name, with the currency, the
    monthly price per resource unit of each and its price per hour by unit, and with O(gpus), the GPU types each
    offers (one read of its GPU profiles per location, as M(whitesky.capvco.gpu_profile_info) does).
  - With O(name), a location the customer does not have is refused, naming those it has.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  name:
    description:
      - Only this location; the module fails, naming the customer's locations, when there is none of this name.
    type: str
  gpus:
    description:
      - Read the GPU types each location offers (RV(locations[].gpu_types)).
    type: bool
    default: true
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
  - whitesky.capvco.connection.info_module
seealso:
  - module: whitesky.capvco.image_info
  - module: whitesky.capvco.gpu_profile_info
"""

EXAMPLES = r"""
- name: The customer's locations, with the GPU types each offers
  whitesky.capvco.location_info:
    gpus: true
  register: locations

- name: The locations that offer an NVIDIA A100
  ansible.builtin.debug:
    msg: "{{ locations.locations | selectattr('gpu_types', 'contains', 'NVIDIA A100') | map(attribute='name') }}"

- name: One location, without its GPU types (a name the customer has no location of fails, naming those it has)
  whitesky.capvco.location_info:
    name: be-gen-1
    gpus: false
  register: be_gen_1
"""

RETURN = r"""
locations:
  description: The customer's locations, by name.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The location's name, what the other modules' C(location) takes.
      type: str
      sample: be-gen-1
    currency:
      description: The currency of its prices (none when the platform names none).
      type: str
      sample: EUR
    prices:
      description:
        - The monthly price of each resource unit as the platform lists it (what is not a number is left out).
      type: dict
      sample: {"vgu": 730.0, "vcu": 12.0, "mu": 3.5, "su": 0.1, "fsu": 0.25, "piu": 5.0}
    hourly:
      description:
        - The price per hour of each unit (its monthly price / 730), each unit named; the units a plan's price counts
          (C(vcu) a vCPU, C(mu) a GiB of memory, C(su) a GiB of boot disk, C(fsu) a GiB of flash storage, C(piu) a
          public IP address, C(vgu) a vGPU) always, and every other unit the platform lists.
        - C(per_hour) is null where the platform gives no price of the unit, or one that is not a finite number of
          0 or more (never shown as free); a plan that holds some of such a unit has no known price.
      type: dict
      sample: {"vcu": {"what": "vCPU", "per_hour": 0.016438}, "vgu": {"what": "vGPU", "per_hour": 1.0},
               "fsu": {"what": "GiB of flash storage", "per_hour": null}}
    gpu_types:
      description: The GPU types the location offers (vendor and model, what a pool's C(gpu.type) takes).
      returned: when O(gpus=true)
      type: list
      elements: str
      sample: ["NVIDIA A100", "NVIDIA L4"]
names:
  description: The returned locations' names.
  returned: always
  type: list
  elements: str
  sample: ["be-gen-1", "nl-ams-1"]
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import catalog


def main():
    WhiteskyModule(
        dict(
            name=dict(type="str"),
            gpus=dict(type="bool", default=True),
        )
    ).run(catalog.location_info)


if __name__ == "__main__":
    main()
