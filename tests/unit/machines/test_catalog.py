"""What the platform offers a new machine (machines/catalog.py), without a server: a machine's image checked against
its location's (pure), and the refusal of a machine without one (``need_size``)."""

from __future__ import annotations

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.machines import catalog, machine
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool

IMAGES = [{"image_id": 14, "name": "Ubuntu 24.04"}, {"image_id": 12, "name": "Ubuntu 22.04"}]


@pytest.mark.parametrize("image", [None, 0, -3, True, "12"])
def test_a_machine_without_an_image_is_refused_naming_the_field_and_image_info(image):
    with pytest.raises(InputError) as caught:
        machine.need_size(Pool(None, (), 2, 2048, image), ["c1-a", "c1-b"])
    said = str(caught.value)
    assert said.startswith(
        "creating machine(s) 'c1-a', 'c1-b' needs image_id (a cluster spec's control_plane.image or pools[].image)"
    )
    assert catalog.IMAGE_HINT in said and "nothing was created" in said
    machine.need_size(Pool(None, (), 2, 2048, 12), ["c1-a"])  # an image: nothing to say


def test_an_image_the_location_does_not_have_is_refused_naming_the_ones_it_has():
    catalog.check_images(IMAGES, {12: ["c1-a"], 14: ["c1-b"]}, "be-gen-1")
    catalog.check_images(IMAGES, {}, "be-gen-1")
    with pytest.raises(InputError) as caught:
        catalog.check_images(IMAGES, {99: ["c1-b", "c1-a"], 12: ["c1-c"], 7: ["c1-d"]}, "be-gen-1")
    assert str(caught.value) == (
        "image 7 (for machine(s) 'c1-d'); image 99 (for machine(s) 'c1-a', 'c1-b'): location 'be-gen-1' has no such "
        "image; its images: 12 'Ubuntu 22.04', 14 'Ubuntu 24.04' (%s); nothing was created" % catalog.IMAGE_HINT
    )
    with pytest.raises(InputError, match="its images: none"):
        catalog.check_images([], {12: ["c1-a"]}, "x-1")


def test_a_message_names_at_most_twenty_images():
    many = [{"image_id": i, "name": "img-%d" % i} for i in range(1, 31)]
    with pytest.raises(InputError) as caught:
        catalog.check_images(many, {99: ["c1-a"]}, "be-gen-1")
    assert "20 'img-20', and 10 more (" in str(caught.value) and "'img-21'" not in str(caught.value)


def test_the_images_of_the_machines_to_create():
    pools = [
        Pool("cp", ("c1-cp-0",), image=12),
        Pool("gpu", ("c1-gpu-0", "c1-gpu-1"), image=12),
        Pool("x", (), image=14),  # nothing to create: no image to check
        Pool("y", ("c1-x-0",)),  # need_size refuses it first
    ]
    assert catalog.images_of(pools) == {12: ["c1-cp-0", "c1-gpu-0", "c1-gpu-1"]}
