"""Virtual machines, and the files their guest agent serves (``readFile``)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from .db import Database, typed, typed_or_none


@dataclass(frozen=True, slots=True)
class Vm:
    vm_id: int
    cloudspace_id: str
    name: str
    description: str
    vcpus: int
    memory: int
    image_id: int | None
    disk_size: int | None
    user_data: str | None
    status: str  # RUNNING; DELETED
    created: float
    updated: float
    deleted_at: float | None


@dataclass(frozen=True, slots=True)
class VmBrief:
    """What a vGPU's listing entry says of its VM."""

    vm_id: int
    name: str
    cloudspace_id: str
    cs_name: str


class VmStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, cloudspace_id: str, vm_id: int) -> Vm | None:
        """A live VM of the cloudspace."""
        return typed_or_none(
            Vm,
            self.db.row(
                "SELECT * FROM vms WHERE vm_id=? AND cloudspace_id=? AND deleted_at IS NULL", vm_id, cloudspace_id
            ),
        )

    def live(self, vm_id: object) -> Vm | None:
        """A live VM by its id alone (the admin API's ``vm_id``, as the request gave it)."""
        return typed_or_none(Vm, self.db.row("SELECT * FROM vms WHERE vm_id=? AND deleted_at IS NULL", vm_id))

    def brief(self, vm_id: int) -> VmBrief | None:
        """Any VM, deleted ones included, with its cloudspace's name."""
        return typed_or_none(
            VmBrief,
            self.db.row(
                "SELECT vms.vm_id, vms.name, vms.cloudspace_id, cloudspaces.name AS cs_name FROM vms"
                " JOIN cloudspaces USING (cloudspace_id) WHERE vm_id=?",
                vm_id,
            ),
        )

    def named(self, cloudspace_id: str, name: str) -> Vm | None:
        return typed_or_none(
            Vm,
            self.db.row(
                "SELECT * FROM vms WHERE cloudspace_id=? AND name=? AND deleted_at IS NULL", cloudspace_id, name
            ),
        )

    def listing(self, cloudspace_id: str, include_deleted: bool = False, only_deleted: bool = False) -> list[Vm]:
        where = "cloudspace_id=?"
        if only_deleted:
            where += " AND deleted_at IS NOT NULL"
        elif not include_deleted:
            where += " AND deleted_at IS NULL"
        return [
            typed(Vm, r) for r in self.db.rows("SELECT * FROM vms WHERE " + where + " ORDER BY vm_id", cloudspace_id)
        ]

    def any_live(self, cloudspace_id: str) -> bool:
        return self.db.row("SELECT 1 FROM vms WHERE cloudspace_id=? AND deleted_at IS NULL", cloudspace_id) is not None

    def create(
        self,
        cloudspace_id: str,
        name: str,
        description: str,
        vcpus: int,
        memory: int,
        image_id: int | None,
        disk_size: int | None,
        user_data: str | None,
    ) -> int:
        now = time.time()
        cur = self.db.run(
            "INSERT INTO vms (cloudspace_id, name, description, vcpus, memory, image_id, disk_size, user_data,"
            " status, created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'RUNNING', ?, ?)",
            cloudspace_id,
            name,
            description,
            vcpus,
            memory,
            image_id,
            disk_size,
            user_data,
            now,
            now,
        )
        return int(cur.lastrowid or 0)

    def delete(self, vm_id: int, now: float) -> None:
        """The VM marked deleted, its guest's files gone (what it holds is the caller's: ``Store.delete_vm``)."""
        self.db.run("UPDATE vms SET deleted_at=?, status='DELETED' WHERE vm_id=?", now, vm_id)
        self.db.run("DELETE FROM vm_files WHERE vm_id=?", vm_id)

    # -- the guest agent's files ---------------------------------------------
    def write_file(self, vm_id: object, path: str, content: str) -> None:
        """What the guest wrote (the admin API stands in for the machine: a VM here runs no operating system)."""
        self.db.run("INSERT OR REPLACE INTO vm_files VALUES (?, ?, ?)", vm_id, path, content)

    def file(self, vm_id: int, path: str) -> str | None:
        row = self.db.row("SELECT content FROM vm_files WHERE vm_id=? AND path=?", vm_id, path)
        return None if row is None or row[0] is None else str(row[0])
