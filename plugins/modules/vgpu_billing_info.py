#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vgpu_billing_info
short_description: What vGPUs were billed in a location over a time window
version_added: 0.1.0
description:
  - Reads the platform's consumption report (C(vgu)) from O(since) until now and prices it with the location's
    C(vgu) price (monthly per unit; an hour is 1/730 of it).
author:
  - whitesky.capvco contributors (@whitesky)
options:
  location:
    description: The location.
    type: str
    required: true
  since:
    description: Start of the window, in epoch seconds (default, 24 hours ago).
    type: int
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
  - whitesky.capvco.connection.info_module
"""

EXAMPLES = r"""
- name: Note when the run starts (epoch seconds)
  ansible.builtin.set_fact:
    run_started: "{{ now().timestamp() | int }}"

# ... the run's tasks ...

- name: vGPU billing of the run
  whitesky.capvco.vgpu_billing_info:
    location: be-gen-1
    since: "{{ run_started }}"
  register: billed

- name: What it cost
  ansible.builtin.debug:
    msg: "{{ billed.vgpu_seconds }} vGPU-seconds, {{ billed.cost }} {{ billed.currency }}"
"""

RETURN = r"""
vgpu_seconds:
  description: vGPU-seconds billed in the window.
  returned: always
  type: float
cost:
  description: Their cost, in RV(currency).
  returned: always
  type: float
currency:
  description: The location's currency.
  returned: always
  type: str
start:
  description: Start of the window (epoch seconds).
  returned: always
  type: int
end:
  description: End of the window (epoch seconds).
  returned: always
  type: int
unassigned_vgpus:
  description: How many vGPUs were billed while attached to no VM in the window.
  returned: always
  type: int
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing


def main():
    WhiteskyModule(
        dict(
            location=dict(type="str", required=True),
            since=dict(type="int"),
        )
    ).run(billing.billing)


if __name__ == "__main__":
    main()
