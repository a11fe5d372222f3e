#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_profile_info
short_description: List the GPU profiles that a whitesky.cloud location offers
version_added: 0.1.0
description:
  - Lists the per-card GPU profiles of a location (C(GET /customers/{customer_id}/locations/{location}/gpus)),
    with how many instances of each are still available.
  - A GPU I(type) is the profile's vendor and model, for example C(NVIDIA A100). One type may be offered by
    several per-card profiles.
author:
  - whitesky.capvco contributors (@whitesky)
options:
  location:
    description:
      - The location (G8) name, for example C(be-gen-1).
    type: str
    required: true
  type:
    description:
      - Only return profiles of this GPU type (vendor and model, compared without regard to case or spacing).
    type: str
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
  - whitesky.capvco.connection.info_module
"""

EXAMPLES = r"""
- name: List the GPU profiles of a location
  whitesky.capvco.gpu_profile_info:
    location: be-gen-1
  register: gpus

# The connection comes from WHITESKY_API_URL, WHITESKY_API_TOKEN and WHITESKY_CUSTOMER_ID, or from the options,
# set once for every module of the collection with module_defaults (on a play, a block or a task)
- name: Only the NVIDIA A100 profiles, with the connection given in module_defaults
  module_defaults:
    group/whitesky.capvco.all:
      api_url: "{{ lookup('ansible.builtin.env', 'WHITESKY_API_URL') }}"
      api_token: "{{ lookup('ansible.builtin.env', 'WHITESKY_API_TOKEN') }}"
      customer_id: "{{ lookup('ansible.builtin.env', 'WHITESKY_CUSTOMER_ID') }}"
      timeout: 60
  whitesky.capvco.gpu_profile_info:
    location: be-gen-1
    type: NVIDIA A100
  register: a100
"""

RETURN = r"""
profiles:
  description: The location's GPU profiles.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: The profile id (C(gpu_id) in the API).
      type: str
      sample: nvidia-a100-40c
    vendor:
      description: GPU vendor.
      type: str
      sample: NVIDIA
    model:
      description: GPU model.
      type: str
      sample: A100
    type:
      description: Vendor and model, the value a machine pool asks for.
      type: str
      sample: NVIDIA A100
    description:
      description: The platform's description of the profile.
      type: str
      sample: NVIDIA A100 40GB, full card (A100-40C)
    available_instances:
      description: How many more vGPUs of this profile can be reserved.
      type: int
      sample: 6
types:
  description: The distinct GPU types among the returned profiles.
  returned: always
  type: list
  elements: str
  sample: ["NVIDIA A100", "NVIDIA L4"]
lines:
  description:
    - One line a person reads per returned profile (its id, type, description and free instances), with every
      control character the platform's strings carry escaped, as the collection's messages are.
  returned: always
  type: list
  elements: str
  sample: ["nvidia-a100-40c: NVIDIA A100 (NVIDIA A100 40GB, full card (A100-40C)), 6 available"]
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import profiles as gpu_profiles


def main():
    WhiteskyModule(
        dict(
            location=dict(type="str", required=True),
            type=dict(type="str"),
        )
    ).run(gpu_profiles.profile_info, adapt=lambda params: {"location": params["location"], "gpu_type": params["type"]})


if __name__ == "__main__":
    main()
