"""VM images: what a location offers a new VM to boot (``listCustomerImages``), and the check that a VM's
``image_id`` names one of its location's."""

from __future__ import annotations

from dataclasses import dataclass

from .db import Database, typed, typed_or_none


@dataclass(frozen=True, slots=True)
class Image:
    location: str
    image_id: int
    name: str
    description: str
    os_type: str  # one of the platform's OS types: Linux, Windows, ...
    status: str  # CREATED
    size: int  # GiB
    boot_disk_size: int  # GiB: the least boot disk a VM of it gets
    memory: int  # MiB: the least memory a VM of it gets
    public: int  # 0 or 1: a public image, or the customer's own


class ImageStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, image: Image) -> None:
        self.db.run(
            "INSERT INTO images VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            image.location,
            image.image_id,
            image.name,
            image.description,
            image.os_type,
            image.status,
            image.size,
            image.boot_disk_size,
            image.memory,
            image.public,
        )

    def empty(self) -> bool:
        """Whether no image was seeded (a state file written before the emulator had images)."""
        return self.db.count("SELECT COUNT(*) FROM images") == 0

    def listing(self, location: str) -> list[Image]:
        """The location's images, by id."""
        return [
            typed(Image, r) for r in self.db.rows("SELECT * FROM images WHERE location=? ORDER BY image_id", location)
        ]

    def get(self, location: str, image_id: int) -> Image | None:
        return typed_or_none(
            Image, self.db.row("SELECT * FROM images WHERE location=? AND image_id=?", location, image_id)
        )
