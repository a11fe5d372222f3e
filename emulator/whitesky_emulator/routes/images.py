"""A location's VM images: the listing (``listCustomerImages``); a VM is created from one of them (``vms``)."""

from __future__ import annotations

from ..http import Ctx, JsonObject, op
from ..store import Image


def image_info(image: Image, logo: bool = False) -> JsonObject:
    """An image as the listing shows it (the spec's ImagesModel, a closed schema)."""
    shown: JsonObject = {
        "image_id": image.image_id,
        "name": image.name,
        "description": image.description,
        "status": image.status,
        "os_type": image.os_type,
        "size": image.size,
        "boot_disk_size": image.boot_disk_size,
        "memory": image.memory,
        "public": bool(image.public),
        "tags": "",
        "categories": "",
        "docs_url": "",
    }
    if logo:
        shown["logo"] = ""  # the emulator's images have no logo
    return shown


@op("listCustomerImages")
async def list_images(ctx: Ctx) -> JsonObject:
    ctx.customer()
    loc = ctx.emu.location(ctx.path_text("location")).name
    logo = ctx.flag("include_logo")
    return {"result": [image_info(i, logo) for i in ctx.store.images.listing(loc)]}
