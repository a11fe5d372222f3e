# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the platform offers a new machine: the customer's locations (with their GPU types) and a location's VM
images (plain Python, no Ansible); the cores of ``location_info`` and ``image_info``, and the check that the image a
machine is created from is one its location has (:func:`check_images`, pure, and :func:`require_images`, its one
read).

The platform has no machine sizes (flavors) to list: a machine is created with any number of vCPUs and any memory
in MiB, within the bounds the cluster spec states (``spec.clusterspec.machine_fields``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.profiles import display_type
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.caller import no_such_location
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import run_parallel

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import Pool

#: Where a user finds an image's id, for every message that asks for one.
IMAGE_HINT = "whitesky.capvco.image_info lists a location's images"
#: What a module shows of an image (the platform's fields, as ``answers`` checked them; never its logo).
IMAGE_FIELDS = ("image_id", "name", "description", "status", "os_type", "size", "boot_disk_size", "memory", "public")
#: The most images a message names.
NAMED = 20


def image_view(image: Mapping[str, Any]) -> dict[str, Any]:
    """An image as ``image_info`` returns it."""
    return {key: image.get(key) for key in IMAGE_FIELDS}


def image_info(
    client: WhiteskyClient, *, location: str, name: str | None = None, image_id: int | None = None
) -> dict[str, Any]:
    """Core of ``image_info``: the location's images (the public ones and the customer's own), by id; ``name``
    keeps those whose name holds it (case aside), ``image_id`` the one of that id."""
    images = [image_view(i) for i in client.images(location)]
    if image_id is not None:
        images = [i for i in images if i["image_id"] == image_id]
    if name:
        images = [i for i in images if name.casefold() in str(i["name"]).casefold()]
    images.sort(key=lambda i: i["image_id"])
    return {"images": images, "image_ids": [i["image_id"] for i in images]}


def _named(images: Sequence[Mapping[str, Any]]) -> str:
    """The images a message names: ``12 'Ubuntu 22.04', 14 '...'``, at most :data:`NAMED` of them."""
    shown = ["%s %r" % (i["image_id"], i.get("name") or "") for i in images[:NAMED]]
    if len(images) > NAMED:
        shown.append("and %d more" % (len(images) - NAMED))
    return ", ".join(shown) or "none"


def check_images(images: Sequence[Mapping[str, Any]], wanted: Mapping[int, Iterable[str]], location: str) -> None:
    """Refuse an image that ``location``'s ``images`` (its listing, as :meth:`WhiteskyClient.images` returns it) do
    not have, naming the machines that would boot it and the images there are (pure). ``wanted``: ``{image id:
    the names of the machines to create from it}``."""
    there = {i["image_id"] for i in images}
    missing = sorted(image for image in wanted if image not in there)
    if missing:
        asked = "; ".join(
            "image %s (for machine(s) %s)" % (image, ", ".join(repr(n) for n in sorted(wanted[image])))
            for image in missing
        )
        raise InputError(
            "%s: location %r has no such image; its images: %s (%s); nothing was created"
            % (asked, location, _named(sorted(images, key=lambda i: i["image_id"])), IMAGE_HINT)
        )


def require_images(client: WhiteskyClient, location: str, wanted: Mapping[int, Iterable[str]]) -> None:
    """:func:`check_images` on one read of the location's images; no read when no machine is to be created."""
    if wanted:
        check_images(client.images(location), wanted, location)


def images_of(pools: Iterable[Pool]) -> dict[int, list[str]]:
    """``{image id: machine names}`` of the machines to create (the pools with only the names to create)."""
    out: dict[int, list[str]] = {}
    for pool in pools:
        if pool.image is not None and pool.names:
            out.setdefault(int(pool.image), []).extend(pool.names)
    return out


def _prices(resources: object) -> dict[str, float]:
    """A location's monthly prices per resource unit, as numbers (what is not one is left out)."""
    if not isinstance(resources, Mapping):
        return {}
    return {
        str(unit): float(price)
        for unit, price in resources.items()
        if isinstance(unit, str) and len(unit) <= 16 and isinstance(price, (int, float)) and not isinstance(price, bool)
    }


#: A unit's key in a price list as the spec names them (``vcu``, ``fsu``): what ``hourly`` repeats of another unit.
_UNIT_KEY = re.compile(r"[a-z]{1,16}")


def hourly(resources: object) -> dict[str, dict[str, Any]]:
    """A location's price per hour of each unit, named: every unit a price counts (``billing.UNITS_PRICED``) and
    every other the platform lists, ``{unit: {"what": one of it, "per_hour": its monthly price / 730}}``;
    ``per_hour`` is None where the price is missing or not a finite number of 0 or more (never 0)."""
    listed = {"resources": resources if isinstance(resources, Mapping) else {}}
    others = (u for u in _prices(resources) if u not in billing.UNITS_PRICED and _UNIT_KEY.fullmatch(u))
    units = list(billing.UNITS_PRICED) + sorted(others)
    out: dict[str, dict[str, Any]] = {}
    for unit in units:
        per_hour = billing.unit_per_hour(listed, unit)
        out[unit] = {
            "what": billing.UNIT_NAMES.get(unit, "unit %s" % unit),
            "per_hour": None if per_hour is None else round(per_hour, 6),
        }
    return out


def location_info(
    client: WhiteskyClient, *, name: str | None = None, gpus: bool = True, parallel: int = 8
) -> dict[str, Any]:
    """Core of ``location_info``: the customer's locations, by name, with their currency, their monthly prices and,
    with ``gpus``, the GPU types each offers (one read of its GPU profiles each, ``parallel`` at a time); ``name``
    keeps that location, and a name the customer has no location of is refused, naming those it has."""
    listed, currency = client.locations()
    names = sorted(str(i["location"]) for i in listed)
    if name is not None and name not in names:
        raise no_such_location(name, client.customer_id, names)
    chosen = sorted((i for i in listed if name is None or i["location"] == name), key=lambda i: str(i["location"]))
    types: dict[str, list[str]] = {}
    if gpus:
        jobs = {str(i["location"]): partial(client.gpu_profiles, str(i["location"])) for i in chosen}
        found, errors = run_parallel(jobs, parallel)
        for where in sorted(errors):
            raise errors[where]
        types = {where: sorted({display_type(p) for p in profiles}) for where, profiles in found.items()}
    locations = []
    for item in chosen:
        view: dict[str, Any] = {
            "name": item["location"],
            "currency": currency,
            "prices": _prices(item.get("resources")),
            "hourly": hourly(item.get("resources")),
        }
        if gpus:
            view["gpu_types"] = types.get(str(item["location"]), [])
        locations.append(view)
    return {"locations": locations, "names": [v["name"] for v in locations]}
