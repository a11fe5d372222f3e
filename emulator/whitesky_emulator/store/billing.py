"""What billing reads: every reservation a location ever had and every attachment of them (the sums are
``metering``'s)."""

from __future__ import annotations

from dataclasses import dataclass

from .db import Database, typed
from .vgpus import Vgpu


@dataclass(frozen=True, slots=True)
class Attachment:
    """A span during which a vGPU was attached to a VM (``end`` None: it still is)."""

    vgpu_id: str
    vm_id: int
    start: float
    end: float | None


class BillingStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def reservations(self, customer_id: str, location: str) -> list[Vgpu]:
        """Every reservation the location ever had, deleted ones included."""
        return [
            typed(Vgpu, r)
            for r in self.db.rows("SELECT * FROM vgpus WHERE customer_id=? AND location=?", customer_id, location)
        ]

    def attachments(self, customer_id: str, location: str) -> list[Attachment]:
        """Every attachment of the location's reservations, in one query (the report covers them all)."""
        return [
            typed(Attachment, r)
            for r in self.db.rows(
                "SELECT a.vgpu_id, a.vm_id, a.start, a.end FROM vgpu_attachments a"
                " JOIN vgpus g ON g.vgpu_id = a.vgpu_id WHERE g.customer_id=? AND g.location=?",
                customer_id,
                location,
            )
        ]

    def ledger(self) -> list[Vgpu]:
        """Every reservation ever made, in the order they were made (the admin API's ledger)."""
        return [typed(Vgpu, r) for r in self.db.rows("SELECT * FROM vgpus ORDER BY rowid")]
