"""vGPU reservations (made, attached, detached, deleted, restored, listed page by page) and the GPU profiles whose
instances they take."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from .db import Database, typed, typed_or_none
from .listing import ListingCache, ListingKey


@dataclass(frozen=True, slots=True)
class GpuProfile:
    id: str
    location: str
    vendor: str
    model: str
    description: str
    available_instances: int


@dataclass(frozen=True, slots=True)
class Vgpu:
    """One reservation, as stored: it bills from ``reserved_at`` until ``deleted_at`` (a permanent delete)."""

    vgpu_id: str
    customer_id: str
    location: str
    gpu_id: str
    vgpu_name: str
    vm_id: int | None
    reserved_at: float
    soft_deleted_at: float | None  # in the recycle bin since
    deleted_at: float | None  # deleted permanently at
    touched: int  # writes since it was made (attach, detach, delete, restore)
    duplicate: int  # 1: made while another live reservation of the customer had its name


class ProfileStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, profile: GpuProfile) -> None:
        self.db.run(
            "INSERT INTO gpu_profiles VALUES (?, ?, ?, ?, ?, ?)",
            profile.id,
            profile.location,
            profile.vendor,
            profile.model,
            profile.description,
            profile.available_instances,
        )

    def get(self, gpu_id: str, location: str | None = None) -> GpuProfile | None:
        if location is None:
            return typed_or_none(GpuProfile, self.db.row("SELECT * FROM gpu_profiles WHERE id=?", gpu_id))
        return typed_or_none(
            GpuProfile, self.db.row("SELECT * FROM gpu_profiles WHERE id=? AND location=?", gpu_id, location)
        )

    def listing(self, location: str) -> list[GpuProfile]:
        return [
            typed(GpuProfile, r)
            for r in self.db.rows("SELECT * FROM gpu_profiles WHERE location=? ORDER BY id", location)
        ]

    def take(self, gpu_id: str) -> None:
        """One instance fewer available (a reservation made)."""
        self.db.run("UPDATE gpu_profiles SET available_instances = available_instances - 1 WHERE id=?", gpu_id)

    def give_back(self, gpu_id: str) -> None:
        """One instance more available (a reservation deleted permanently)."""
        self.db.run("UPDATE gpu_profiles SET available_instances = available_instances + 1 WHERE id=?", gpu_id)


def _listing_filter(only_deleted: bool, include_deleted: bool) -> str:
    where = "customer_id=? AND location=? AND deleted_at IS NULL"
    if only_deleted:
        return where + " AND soft_deleted_at IS NOT NULL"
    if not include_deleted:
        return where + " AND soft_deleted_at IS NULL"
    return where


class VgpuStore:
    """Reservations and their attachments (``vgpu_attachments``: the spans billing reads)."""

    def __init__(self, db: Database, profiles: ProfileStore) -> None:
        self.db = db
        self.profiles = profiles
        self.listings = ListingCache()

    # -- writes ----------------------------------------------------------------
    def reserve(self, customer_id: str, location: str, gpu_id: str, name: str, vm_id: int | None = None) -> str:
        """A new reservation (attached to ``vm_id`` at once, when given), taking one of the profile's instances."""
        now = time.time()
        vgpu_id = "vgpu-" + uuid.uuid4().hex[:16]
        live = self.db.count(
            "SELECT COUNT(*) FROM vgpus WHERE customer_id=? AND vgpu_name=? AND deleted_at IS NULL", customer_id, name
        )
        self.profiles.take(gpu_id)
        self.db.run(
            "INSERT INTO vgpus (vgpu_id, customer_id, location, gpu_id, vgpu_name, vm_id, reserved_at, duplicate)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            vgpu_id,
            customer_id,
            location,
            gpu_id,
            name,
            vm_id,
            now,
            int(live > 0),
        )
        self.listings.invalidate(customer_id, location)
        if vm_id is not None:
            self.db.run("INSERT INTO vgpu_attachments VALUES (?, ?, ?, NULL)", vgpu_id, vm_id, now)
        return vgpu_id

    def attach(self, vgpu_id: str, vm_id: int) -> None:
        self.db.run("UPDATE vgpus SET vm_id=?, touched=touched+1 WHERE vgpu_id=?", vm_id, vgpu_id)
        self.db.run("INSERT INTO vgpu_attachments VALUES (?, ?, ?, NULL)", vgpu_id, vm_id, time.time())

    def detach(self, vgpu_id: str) -> None:
        self.db.run("UPDATE vgpus SET vm_id=NULL, touched=touched+1 WHERE vgpu_id=?", vgpu_id)
        self.db.run("UPDATE vgpu_attachments SET end=? WHERE vgpu_id=? AND end IS NULL", time.time(), vgpu_id)

    def delete(self, vgpu: Vgpu, permanently: bool) -> None:
        """To the recycle bin, or permanently (its instance back to the profile; billing stops)."""
        now = time.time()
        if permanently:
            self.db.run("UPDATE vgpus SET deleted_at=?, touched=touched+1 WHERE vgpu_id=?", now, vgpu.vgpu_id)
            self.profiles.give_back(vgpu.gpu_id)
        else:
            self.db.run("UPDATE vgpus SET soft_deleted_at=?, touched=touched+1 WHERE vgpu_id=?", now, vgpu.vgpu_id)
        self.listings.invalidate(vgpu.customer_id, vgpu.location)

    def restore(self, vgpu: Vgpu) -> None:
        """Out of the recycle bin."""
        self.db.run("UPDATE vgpus SET soft_deleted_at=NULL, touched=touched+1 WHERE vgpu_id=?", vgpu.vgpu_id)
        self.listings.invalidate(vgpu.customer_id, vgpu.location)

    # -- reads -----------------------------------------------------------------
    def get(self, customer_id: str, vgpu_id: str) -> Vgpu | None:
        """A reservation that is not permanently deleted (it may be in the recycle bin)."""
        return typed_or_none(
            Vgpu,
            self.db.row(
                "SELECT * FROM vgpus WHERE vgpu_id=? AND customer_id=? AND deleted_at IS NULL", vgpu_id, customer_id
            ),
        )

    def of_vm(self, vm_id: int) -> list[Vgpu]:
        return [typed(Vgpu, r) for r in self.db.rows("SELECT * FROM vgpus WHERE vm_id=? AND deleted_at IS NULL", vm_id)]

    def _rowids(self, key: ListingKey) -> list[int]:
        where = _listing_filter(key.only_deleted, key.include_deleted)
        rows = self.db.rows("SELECT rowid FROM vgpus WHERE " + where + " ORDER BY rowid", key.customer_id, key.location)
        return [int(r[0]) for r in rows]

    def _listing(self, customer_id: str, location: str, only_deleted: bool, include_deleted: bool) -> list[int]:
        key = ListingKey(customer_id, location, bool(only_deleted), bool(include_deleted))
        return self.listings.rowids(key, lambda: self._rowids(key))

    def count(self, customer_id: str, location: str, only_deleted: bool = False, include_deleted: bool = False) -> int:
        return len(self._listing(customer_id, location, only_deleted, include_deleted))

    def page(
        self,
        customer_id: str,
        location: str,
        limit: int | None,
        start: int,
        only_deleted: bool = False,
        include_deleted: bool = False,
    ) -> list[Vgpu]:
        """``limit`` reservations after the first ``start`` (in reservation order); ``limit`` None: all."""
        rowids = self._listing(customer_id, location, only_deleted, include_deleted)
        ids = rowids[start:] if limit is None else rowids[start : start + limit]
        if not ids:
            return []
        where = _listing_filter(only_deleted, include_deleted)
        # NOT INDEXED: the rowid range, O(page); SQLite would otherwise pick the customer's index and sort, O(listing)
        rows = self.db.rows(
            "SELECT * FROM vgpus NOT INDEXED WHERE rowid BETWEEN ? AND ? AND " + where + " ORDER BY rowid",
            ids[0],
            ids[-1],
            customer_id,
            location,
        )
        return [typed(Vgpu, r) for r in rows]
