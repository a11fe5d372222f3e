"""Cloudspaces and their notes (a note lives as long as its cloudspace: kept in the recycle bin, gone with a
permanent delete)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from .db import Database, typed, typed_or_none

#: A cloudspace's private network when its creation names none.
DEFAULT_PRIVATE_NETWORK = "192.168.103.0/24"


@dataclass(frozen=True, slots=True)
class Cloudspace:
    cloudspace_id: str
    customer_id: str
    name: str
    location: str
    private_network: str
    status: str  # DEPLOYED; DELETED in the recycle bin; DESTROYED once deleted permanently
    created: float
    deleted_at: float | None


@dataclass(frozen=True, slots=True)
class Note:
    note_id: str
    cloudspace_id: str
    title: str
    content: str
    created: float
    updated: float
    created_by: str
    modified_by: str


class CloudspaceStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, customer_id: str, cloudspace_id: str) -> Cloudspace | None:
        """A live cloudspace of the customer (not in the recycle bin)."""
        return typed_or_none(
            Cloudspace,
            self.db.row(
                "SELECT * FROM cloudspaces WHERE cloudspace_id=? AND customer_id=? AND deleted_at IS NULL",
                cloudspace_id,
                customer_id,
            ),
        )

    def listing(
        self,
        customer_id: str,
        include_deleted: bool = False,
        only_deleted: bool = False,
        location: str | None = None,
        every: bool = False,
    ) -> list[Cloudspace]:
        """Live cloudspaces, oldest first; with ``include_deleted`` (or ``only_deleted``) those in the recycle bin
        too.  One deleted permanently is in no listing, except for billing (``every``)."""
        where = "customer_id=?" if every else "customer_id=? AND status != 'DESTROYED'"
        if every:
            pass
        elif only_deleted:
            where += " AND deleted_at IS NOT NULL"
        elif not include_deleted:
            where += " AND deleted_at IS NULL"
        args: list[object] = [customer_id]
        if location is not None:
            where += " AND location=?"
            args.append(location)
        return [
            typed(Cloudspace, r)
            for r in self.db.rows("SELECT * FROM cloudspaces WHERE " + where + " ORDER BY created", *args)
        ]

    def create(self, cloudspace_id: str, customer_id: str, name: str, location: str, private_network: str) -> None:
        self.db.run(
            "INSERT INTO cloudspaces VALUES (?, ?, ?, ?, ?, 'DEPLOYED', ?, NULL)",
            cloudspace_id,
            customer_id,
            name,
            location,
            private_network,
            time.time(),
        )

    def delete(self, cloudspace_id: str, permanently: bool) -> None:
        """Soft: DELETED, in the recycle bin (its notes kept); permanently: gone from every listing, notes too."""
        now = time.time()
        if permanently:
            self.db.run(
                "UPDATE cloudspaces SET deleted_at=?, status='DESTROYED' WHERE cloudspace_id=?", now, cloudspace_id
            )
            self.db.run("DELETE FROM notes WHERE cloudspace_id=?", cloudspace_id)  # in the recycle bin, they stay
        else:
            self.db.run(
                "UPDATE cloudspaces SET deleted_at=?, status='DELETED' WHERE cloudspace_id=?", now, cloudspace_id
            )


class NoteStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def listing(self, cloudspace_id: str) -> list[Note]:
        """A cloudspace's notes, oldest first (``created`` is float seconds; the id breaks a tie)."""
        return [
            typed(Note, r)
            for r in self.db.rows("SELECT * FROM notes WHERE cloudspace_id=? ORDER BY created, note_id", cloudspace_id)
        ]

    def get(self, cloudspace_id: str, note_id: str) -> Note | None:
        return typed_or_none(
            Note, self.db.row("SELECT * FROM notes WHERE cloudspace_id=? AND note_id=?", cloudspace_id, note_id)
        )

    def create(self, cloudspace_id: str, title: str, content: str, author: str) -> str:
        now = time.time()
        note_id = uuid.uuid4().hex
        self.db.run(
            "INSERT INTO notes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            note_id,
            cloudspace_id,
            title,
            content,
            now,
            now,
            author,
            author,
        )
        return note_id

    def update(self, note_id: str, title: str, content: str, author: str) -> None:
        self.db.run(
            "UPDATE notes SET title=?, content=?, updated=?, modified_by=? WHERE note_id=?",
            title,
            content,
            time.time(),
            author,
            note_id,
        )

    def delete(self, note_id: str) -> None:
        self.db.run("DELETE FROM notes WHERE note_id=?", note_id)
