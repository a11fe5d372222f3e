#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: image_info
short_description: List the VM images a whitesky.cloud location offers
version_added: 0.1.0
description:
  - Lists the images of a location (C(GET /customers/{customer_id}/locations/{location}/vm-images)), the public ones
    and the customer's own, by id. A machine boots one of them, named by its id, which is required to create a
    machine (O(whitesky.capvco.machine#module:image_id), O(whitesky.capvco.machine_pool#module:image_id), C(image)
    in a cluster spec).
  - The platform has no machine sizes (flavors) to list; a machine is created with any number of vCPUs and any memory
    (in MiB) within the bounds the cluster spec states (1 to 256 vCPUs, 512 MiB to 4 TiB of memory). An image's
    RV(images[].memory) and RV(images[].boot_disk_size) are the platform's figures for it.
  - A location the customer does not have is refused, naming those it has (M(whitesky.capvco.location_info) lists
    them).
author:
  - whitesky.capvco contributors (@whitesky)
options:
  location:
    description:
      - The location (G8) name, for example C(be-gen-1).
    type: str
    required: true
  name:
    description:
      - Only images whose name contains this text, without regard to case (C(ubuntu)).
    type: str
  image_id:
    description:
      - Only the image of this id (none when the location has no such image).
    type: int
extends_documentation_fragment:
  - whitesky.capvco.connection
  - whitesky.capvco.connection.actiongroups
  - whitesky.capvco.connection.info_module
seealso:
  - module: whitesky.capvco.location_info
  - module: whitesky.capvco.machine_pool
"""

EXAMPLES = r"""
- name: The images of location be-gen-1
  whitesky.capvco.image_info:
    location: be-gen-1
  register: images

- name: The Ubuntu images
  whitesky.capvco.image_info:
    location: be-gen-1
    name: ubuntu
  register: ubuntu

- name: Their ids and names, to put in a cluster spec's image
  ansible.builtin.debug:
    msg: "{{ ubuntu.images | items2dict(key_name='image_id', value_name='name') }}"

- name: Whether the location has image 12
  whitesky.capvco.image_info:
    location: be-gen-1
    image_id: 12
  register: image_12
  failed_when: image_12.images | length != 1
"""

RETURN = r"""
images:
  description: The location's images, by id.
  returned: always
  type: list
  elements: dict
  contains:
    image_id:
      description: The image's id, what a machine's C(image_id) (a cluster spec's C(image)) names.
      type: int
      sample: 12
    name:
      description: The image's name.
      type: str
      sample: Ubuntu 22.04 LTS (cloud-init)
    description:
      description: The platform's description of the image.
      type: str
    status:
      description: The image's status on the platform.
      type: str
      sample: CREATED
    os_type:
      description: The operating system's family.
      type: str
      sample: Linux
    size:
      description: The image's size, as the platform gives it.
      type: int
      sample: 10
    boot_disk_size:
      description: The boot disk size the platform gives for the image.
      type: int
      sample: 10
    memory:
      description: The memory the platform gives for the image, in MiB.
      type: int
      sample: 512
    public:
      description: Whether the image is a public one (else the customer's own).
      type: bool
      sample: true
image_ids:
  description: The returned images' ids.
  returned: always
  type: list
  elements: int
  sample: [12, 14]
"""

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.module import WhiteskyModule
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import catalog


def main():
    WhiteskyModule(
        dict(
            location=dict(type="str", required=True),
            name=dict(type="str"),
            image_id=dict(type="int"),
        )
    ).run(catalog.image_info)


if __name__ == "__main__":
    main()
