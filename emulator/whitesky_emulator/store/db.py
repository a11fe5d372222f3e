"""The SQLite file under --state-dir: its schema, the connection, and the three ways to run SQL.

Everything the platform would remember lives there, so the state survives a restart.  Tests read (and a few
write) the file directly: the schema is part of the emulator's contract with them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

SCHEMA = """
CREATE TABLE IF NOT EXISTS customers (customer_id TEXT PRIMARY KEY, name TEXT);
CREATE TABLE IF NOT EXISTS credentials (
  digest TEXT PRIMARY KEY, customers TEXT, created REAL, revoked_at REAL);
CREATE TABLE IF NOT EXISTS locations (name TEXT PRIMARY KEY, currency TEXT, prices TEXT);
CREATE TABLE IF NOT EXISTS images (
  location TEXT, image_id INTEGER, name TEXT, description TEXT, os_type TEXT, status TEXT, size INTEGER,
  boot_disk_size INTEGER, memory INTEGER, public INTEGER, PRIMARY KEY (location, image_id));
CREATE TABLE IF NOT EXISTS gpu_profiles (
  id TEXT PRIMARY KEY, location TEXT, vendor TEXT, model TEXT, description TEXT, available_instances INTEGER);
CREATE TABLE IF NOT EXISTS vgpus (
  vgpu_id TEXT PRIMARY KEY, customer_id TEXT, location TEXT, gpu_id TEXT, vgpu_name TEXT,
  vm_id INTEGER, reserved_at REAL, soft_deleted_at REAL, deleted_at REAL, touched INTEGER DEFAULT 0,
  duplicate INTEGER DEFAULT 0);
CREATE TABLE IF NOT EXISTS vgpu_attachments (vgpu_id TEXT, vm_id INTEGER, start REAL, end REAL);
CREATE TABLE IF NOT EXISTS cloudspaces (
  cloudspace_id TEXT PRIMARY KEY, customer_id TEXT, name TEXT, location TEXT, private_network TEXT,
  status TEXT, created REAL, deleted_at REAL);
CREATE TABLE IF NOT EXISTS vms (
  vm_id INTEGER PRIMARY KEY AUTOINCREMENT, cloudspace_id TEXT, name TEXT, description TEXT, vcpus INTEGER,
  memory INTEGER, image_id INTEGER, disk_size INTEGER, user_data TEXT, status TEXT, created REAL,
  updated REAL, deleted_at REAL);
CREATE TABLE IF NOT EXISTS vm_files (vm_id INTEGER, path TEXT, content TEXT, PRIMARY KEY (vm_id, path));
CREATE TABLE IF NOT EXISTS external_networks (
  external_network_id INTEGER PRIMARY KEY, location TEXT, name TEXT, network TEXT, gateway TEXT,
  subnet_mask TEXT, dhcp INTEGER, public INTEGER);
CREATE TABLE IF NOT EXISTS nics (
  nic_id INTEGER PRIMARY KEY AUTOINCREMENT, vm_id INTEGER, network_id INTEGER, ip_address TEXT,
  mac_address TEXT, device_name TEXT, model TEXT, attached_at REAL, detached_at REAL);
CREATE TABLE IF NOT EXISTS notes (
  note_id TEXT PRIMARY KEY, cloudspace_id TEXT, title TEXT, content TEXT, created REAL, updated REAL,
  created_by TEXT, modified_by TEXT);
CREATE INDEX IF NOT EXISTS vgpus_by_name ON vgpus (customer_id, vgpu_name);
CREATE INDEX IF NOT EXISTS vgpus_by_vm ON vgpus (vm_id);
CREATE INDEX IF NOT EXISTS attachments_by_vgpu ON vgpu_attachments (vgpu_id);
CREATE INDEX IF NOT EXISTS nics_by_vm ON nics (vm_id);
CREATE INDEX IF NOT EXISTS notes_by_cloudspace ON notes (cloudspace_id, created);
"""

T = TypeVar("T")


def typed(make: Callable[..., T], row: sqlite3.Row) -> T:
    """A row as its typed record: ``make`` (a row class) called with the row's columns by name."""
    return make(**{key: row[key] for key in row.keys()})  # noqa: SIM118 (a Row is not a mapping)


def typed_or_none(make: Callable[..., T], row: sqlite3.Row | None) -> T | None:
    return None if row is None else typed(make, row)


class Database:
    """One connection, in autocommit mode (a statement is its own transaction unless :meth:`transaction` groups
    several).  Every method runs on the server's event loop thread."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")  # durable across process restarts, which is what tests need
        self.conn.executescript(SCHEMA)

    def rows(self, sql: str, *args: object) -> list[sqlite3.Row]:
        return self.conn.execute(sql, args).fetchall()

    def row(self, sql: str, *args: object) -> sqlite3.Row | None:
        found: sqlite3.Row | None = self.conn.execute(sql, args).fetchone()
        return found

    def scalar(self, sql: str, *args: object) -> object:
        """The first column of the first row (the statement must return one)."""
        found = self.row(sql, *args)
        if found is None:
            raise LookupError("no row: %s" % sql)
        value: object = found[0]
        return value

    def count(self, sql: str, *args: object) -> int:
        """A ``SELECT COUNT(*)``'s answer."""
        value = self.scalar(sql, *args)
        if not isinstance(value, int):
            raise TypeError("not a count: %r (%s)" % (value, sql))
        return value

    def run(self, sql: str, *args: object) -> sqlite3.Cursor:
        return self.conn.execute(sql, args)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The statements of the block as one transaction: committed at its end, rolled back if it raises."""
        self.conn.execute("BEGIN")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
