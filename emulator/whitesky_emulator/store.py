"""The emulator's persisted state: one SQLite file under --state-dir.

Everything the platform would remember lives here, so the state survives a
restart.  Transient things (faults, VM locks, request statistics) do not.
"""

from __future__ import annotations

import ipaddress
import json
import sqlite3
import time
import uuid

SCHEMA = """
CREATE TABLE IF NOT EXISTS customers (customer_id TEXT PRIMARY KEY, name TEXT);
CREATE TABLE IF NOT EXISTS locations (name TEXT PRIMARY KEY, currency TEXT, prices TEXT);
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

#: Seconds of one vGU in the consumption report: consumption is in unit-hours.
VGU_SECONDS = 3600.0


class Store:
    """Thin data access over SQLite.  All methods run on the server's event loop thread."""

    def __init__(self, path):
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")  # durable across process restarts, which is what tests need
        self.db.executescript(SCHEMA)
        self._vgpus_version = 0  # bumped by every write to vgpus: the listing positions below are valid for one
        self._positions = {}  # (customer, location, flags) -> (version, [rowid, ...]) of a vGPU listing

    def empty(self):
        return self.db.execute("SELECT COUNT(*) FROM customers").fetchone()[0] == 0

    def q(self, sql, *args):
        return self.db.execute(sql, args).fetchall()

    def one(self, sql, *args):
        return self.db.execute(sql, args).fetchone()

    def x(self, sql, *args):
        if sql.startswith(("INSERT INTO vgpus", "UPDATE vgpus", "DELETE FROM vgpus")):
            self._vgpus_version += 1
        return self.db.execute(sql, args)

    # -- seeding -----------------------------------------------------------
    def seed(self, world):
        with self.db:
            self.x("BEGIN")
            for cust in world["customers"]:
                self.x(
                    "INSERT INTO customers VALUES (?, ?)", cust["customer_id"], cust.get("name", cust["customer_id"])
                )
            for loc in world["locations"]:
                self.x(
                    "INSERT INTO locations VALUES (?, ?, ?)",
                    loc["name"],
                    loc.get("currency", "EUR"),
                    json.dumps(loc.get("prices", {})),
                )
                for gpu in loc.get("gpus", []):
                    self.x(
                        "INSERT INTO gpu_profiles VALUES (?, ?, ?, ?, ?, ?)",
                        gpu["id"],
                        loc["name"],
                        gpu["vendor"],
                        gpu["model"],
                        gpu.get("description", ""),
                        int(gpu["available_instances"]),
                    )
                for net in loc.get("external_networks", []):
                    self.x(
                        "INSERT INTO external_networks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        int(net["external_network_id"]),
                        loc["name"],
                        net["name"],
                        net["network"],
                        net["gateway"],
                        net["subnet_mask"],
                        int(net.get("dhcp", False)),
                        int(net.get("public", False)),
                    )
                for cs in loc.get("cloudspaces", []):
                    self.x(
                        "INSERT INTO cloudspaces VALUES (?, ?, ?, ?, ?, 'DEPLOYED', ?, NULL)",
                        cs["cloudspace_id"],
                        cs["customer_id"],
                        cs["name"],
                        loc["name"],
                        cs.get("private_network", "192.168.103.0/24"),
                        time.time(),
                    )
            self.x("COMMIT")

    # -- vGPUs -------------------------------------------------------------
    def new_vgpu(self, customer_id, location, gpu_id, name, vm_id=None):
        now = time.time()
        vgpu_id = "vgpu-" + uuid.uuid4().hex[:16]
        live = self.one(
            "SELECT COUNT(*) FROM vgpus WHERE customer_id=? AND vgpu_name=? AND deleted_at IS NULL", customer_id, name
        )[0]
        self.x("UPDATE gpu_profiles SET available_instances = available_instances - 1 WHERE id=?", gpu_id)
        self.x(
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
        if vm_id is not None:
            self.x("INSERT INTO vgpu_attachments VALUES (?, ?, ?, NULL)", vgpu_id, vm_id, now)
        return vgpu_id

    def attach_vgpu(self, vgpu_id, vm_id):
        self.x("UPDATE vgpus SET vm_id=?, touched=touched+1 WHERE vgpu_id=?", vm_id, vgpu_id)
        self.x("INSERT INTO vgpu_attachments VALUES (?, ?, ?, NULL)", vgpu_id, vm_id, time.time())

    def detach_vgpu(self, vgpu_id):
        self.x("UPDATE vgpus SET vm_id=NULL, touched=touched+1 WHERE vgpu_id=?", vgpu_id)
        self.x("UPDATE vgpu_attachments SET end=? WHERE vgpu_id=? AND end IS NULL", time.time(), vgpu_id)

    def delete_vgpu(self, row, permanently):
        now = time.time()
        if permanently:
            self.x("UPDATE vgpus SET deleted_at=?, touched=touched+1 WHERE vgpu_id=?", now, row["vgpu_id"])
            self.x("UPDATE gpu_profiles SET available_instances = available_instances + 1 WHERE id=?", row["gpu_id"])
        else:
            self.x("UPDATE vgpus SET soft_deleted_at=?, touched=touched+1 WHERE vgpu_id=?", now, row["vgpu_id"])

    def vgpu_seconds(self, row, start=None, end=None):
        """Billed seconds of one reservation within [start, end]."""
        now = time.time()
        lo = max(row["reserved_at"], start if start is not None else row["reserved_at"])
        hi = min(row["deleted_at"] or now, end if end is not None else now)
        return max(0.0, hi - lo)

    def attached_seconds(self, customer_id, location, start, end):
        """Seconds of [start, end] during which each of the location's vGPUs was attached, per VM:
        ``{vgpu_id: {vm_id: seconds}}``, in one query (the report covers every reservation)."""
        now = time.time()
        out = {}
        rows = self.q(
            "SELECT a.vgpu_id, a.vm_id, a.start, a.end FROM vgpu_attachments a JOIN vgpus g ON g.vgpu_id = a.vgpu_id"
            " WHERE g.customer_id=? AND g.location=?",
            customer_id,
            location,
        )
        for att in rows:
            lo, hi = max(att["start"], start), min(att["end"] or now, end)
            if hi > lo:
                per_vm = out.setdefault(att["vgpu_id"], {})
                per_vm[att["vm_id"]] = per_vm.get(att["vm_id"], 0.0) + hi - lo
        return out

    # -- NICs --------------------------------------------------------------
    def _taken(self, net):
        used = {
            r[0]
            for r in self.q(
                "SELECT ip_address FROM nics WHERE network_id=? AND detached_at IS NULL", net["external_network_id"]
            )
        }
        used.add(net["gateway"])
        return used

    @staticmethod
    def _hosts(net):
        return ipaddress.ip_network("%s/%s" % (net["network"], net["subnet_mask"]), strict=False).hosts()

    def free_ips(self, net):
        """Every address of the network a NIC could take now: its hosts (not the network or broadcast address),
        less the gateway and the addresses of attached NICs."""
        used = self._taken(net)
        return [str(h) for h in self._hosts(net) if str(h) not in used]

    def free_ip(self, net, wanted=None):
        used = self._taken(net)
        if wanted:
            network = ipaddress.ip_network("%s/%s" % (net["network"], net["subnet_mask"]), strict=False)
            host = ipaddress.ip_address(wanted)
            if host not in network or str(host) in used or host in (network.network_address, network.broadcast_address):
                return None
            return str(host)
        for host in self._hosts(net):
            if str(host) not in used:
                return str(host)
        return None

    def new_nic(self, vm_id, net, ip_address, model):
        cur = self.x(
            "INSERT INTO nics (vm_id, network_id, ip_address, mac_address, device_name, model, attached_at)"
            " VALUES (?, ?, ?, '', '', ?, ?)",
            vm_id,
            net["external_network_id"],
            ip_address,
            model,
            time.time(),
        )
        nic_id = cur.lastrowid
        mac = "52:54:%02x:%02x:%02x:%02x" % (
            (nic_id >> 24) & 0xFF,
            (nic_id >> 16) & 0xFF,
            (nic_id >> 8) & 0xFF,
            nic_id & 0xFF,
        )
        count = self.one("SELECT COUNT(*) FROM nics WHERE vm_id=?", vm_id)[0]
        self.x("UPDATE nics SET mac_address=?, device_name=? WHERE nic_id=?", mac, "eth%d" % count, nic_id)
        return self.one("SELECT * FROM nics WHERE nic_id=?", nic_id)

    # -- lookups (rows or None) --------------------------------------------
    def first_customer(self):
        return self.one("SELECT customer_id FROM customers ORDER BY rowid")[0]

    def customer(self, customer_id):
        return self.one("SELECT * FROM customers WHERE customer_id=?", customer_id)

    def location(self, name):
        return self.one("SELECT * FROM locations WHERE name=?", name)

    def locations(self):
        return self.q("SELECT * FROM locations ORDER BY name")

    def cloudspace(self, customer_id, cloudspace_id):
        return self.one(
            "SELECT * FROM cloudspaces WHERE cloudspace_id=? AND customer_id=? AND deleted_at IS NULL",
            cloudspace_id,
            customer_id,
        )

    def vm(self, cloudspace_id, vm_id):
        return self.one(
            "SELECT * FROM vms WHERE vm_id=? AND cloudspace_id=? AND deleted_at IS NULL", vm_id, cloudspace_id
        )

    def vm_brief(self, vm_id):
        return self.one(
            "SELECT vms.vm_id, vms.name, vms.cloudspace_id, cloudspaces.name AS cs_name FROM vms"
            " JOIN cloudspaces USING (cloudspace_id) WHERE vm_id=?",
            vm_id,
        )

    def vgpu(self, customer_id, vgpu_id):
        """A reservation that is not permanently deleted (it may be in the recycle bin)."""
        return self.one(
            "SELECT * FROM vgpus WHERE vgpu_id=? AND customer_id=? AND deleted_at IS NULL", vgpu_id, customer_id
        )

    def profile(self, gpu_id, location=None):
        if location is None:
            return self.one("SELECT * FROM gpu_profiles WHERE id=?", gpu_id)
        return self.one("SELECT * FROM gpu_profiles WHERE id=? AND location=?", gpu_id, location)

    def profiles(self, location):
        return self.q("SELECT * FROM gpu_profiles WHERE location=? ORDER BY id", location)

    # -- vGPU listings -------------------------------------------------------
    @staticmethod
    def _vgpu_filter(only_deleted, include_deleted):
        where = "customer_id=? AND location=? AND deleted_at IS NULL"
        if only_deleted:
            return where + " AND soft_deleted_at IS NOT NULL"
        if not include_deleted:
            return where + " AND soft_deleted_at IS NULL"
        return where

    def _listing(self, customer_id, location, only_deleted, include_deleted):
        """The rowids of a vGPU listing in order, read once per change to vgpus: a page is then a slice, so
        reading a whole listing page by page costs O(listing), not O(listing x pages) as OFFSET would."""
        key = (customer_id, location, bool(only_deleted), bool(include_deleted))
        cached = self._positions.get(key)
        if cached is None or cached[0] != self._vgpus_version:
            where = self._vgpu_filter(only_deleted, include_deleted)
            rowids = [r[0] for r in self.q("SELECT rowid FROM vgpus WHERE " + where + " ORDER BY rowid", *key[:2])]
            if len(self._positions) > 64:
                self._positions.clear()
            cached = self._positions[key] = (self._vgpus_version, rowids)
        return cached[1]

    def count_vgpus(self, customer_id, location, only_deleted=False, include_deleted=False):
        return len(self._listing(customer_id, location, only_deleted, include_deleted))

    def page_vgpus(self, customer_id, location, limit, start, only_deleted=False, include_deleted=False):
        """``limit`` reservations after the first ``start`` (in reservation order); ``limit`` None: all."""
        rowids = self._listing(customer_id, location, only_deleted, include_deleted)
        ids = rowids[start:] if limit is None else rowids[start : start + limit]
        if not ids:
            return []
        where = self._vgpu_filter(only_deleted, include_deleted)
        # NOT INDEXED: the rowid range, O(page); SQLite would otherwise pick the customer's index and sort, O(listing)
        return self.q(
            "SELECT * FROM vgpus NOT INDEXED WHERE rowid BETWEEN ? AND ? AND " + where + " ORDER BY rowid",
            ids[0],
            ids[-1],
            customer_id,
            location,
        )

    def vgpus_of_vm(self, vm_id):
        return self.q("SELECT * FROM vgpus WHERE vm_id=? AND deleted_at IS NULL", vm_id)

    def vgpus_in(self, customer_id, location):
        """Every reservation the location ever had (billing looks at all of them)."""
        return self.q("SELECT * FROM vgpus WHERE customer_id=? AND location=?", customer_id, location)

    def all_vgpus(self):
        return self.q("SELECT * FROM vgpus ORDER BY rowid")

    def restore_vgpu(self, vgpu_id):
        self.x("UPDATE vgpus SET soft_deleted_at=NULL, touched=touched+1 WHERE vgpu_id=?", vgpu_id)

    # -- cloudspaces ---------------------------------------------------------
    def cloudspaces(self, customer_id, include_deleted=False, only_deleted=False, location=None, every=False):
        """Live cloudspaces; with ``include_deleted`` (or ``only_deleted``) those in the recycle bin too.

        One deleted permanently is in no listing, except for billing (``every``).
        """
        where = "customer_id=?" if every else "customer_id=? AND status != 'DESTROYED'"
        if every:
            pass
        elif only_deleted:
            where += " AND deleted_at IS NOT NULL"
        elif not include_deleted:
            where += " AND deleted_at IS NULL"
        args = [customer_id]
        if location is not None:
            where += " AND location=?"
            args.append(location)
        return self.q("SELECT * FROM cloudspaces WHERE " + where + " ORDER BY created", *args)

    def new_cloudspace(self, cloudspace_id, customer_id, name, location, private_network):
        self.x(
            "INSERT INTO cloudspaces VALUES (?, ?, ?, ?, ?, 'DEPLOYED', ?, NULL)",
            cloudspace_id,
            customer_id,
            name,
            location,
            private_network,
            time.time(),
        )

    def has_live_vms(self, cloudspace_id):
        return self.one("SELECT 1 FROM vms WHERE cloudspace_id=? AND deleted_at IS NULL", cloudspace_id) is not None

    def delete_cloudspace(self, cloudspace_id, permanently):
        """Soft: DELETED, in the recycle bin (its notes kept); permanently: gone from every listing, notes too."""
        now = time.time()
        if permanently:
            self.x("UPDATE cloudspaces SET deleted_at=?, status='DESTROYED' WHERE cloudspace_id=?", now, cloudspace_id)
            self.x("DELETE FROM notes WHERE cloudspace_id=?", cloudspace_id)  # in the recycle bin, they stay
        else:
            self.x("UPDATE cloudspaces SET deleted_at=?, status='DELETED' WHERE cloudspace_id=?", now, cloudspace_id)

    # -- cloudspace notes ------------------------------------------------------
    def notes(self, cloudspace_id):
        """A cloudspace's notes, oldest first (``created`` is float seconds; the id breaks a tie)."""
        return self.q("SELECT * FROM notes WHERE cloudspace_id=? ORDER BY created, note_id", cloudspace_id)

    def note(self, cloudspace_id, note_id):
        return self.one("SELECT * FROM notes WHERE cloudspace_id=? AND note_id=?", cloudspace_id, note_id)

    def new_note(self, cloudspace_id, title, content, author):
        now = time.time()
        note_id = uuid.uuid4().hex
        self.x(
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

    def update_note(self, note_id, title, content, author):
        self.x(
            "UPDATE notes SET title=?, content=?, updated=?, modified_by=? WHERE note_id=?",
            title,
            content,
            time.time(),
            author,
            note_id,
        )

    def delete_note(self, note_id):
        self.x("DELETE FROM notes WHERE note_id=?", note_id)

    # -- VMs -------------------------------------------------------------------
    def vms(self, cloudspace_id, include_deleted=False, only_deleted=False):
        where = "cloudspace_id=?"
        if only_deleted:
            where += " AND deleted_at IS NOT NULL"
        elif not include_deleted:
            where += " AND deleted_at IS NULL"
        return self.q("SELECT * FROM vms WHERE " + where + " ORDER BY vm_id", cloudspace_id)

    def vm_named(self, cloudspace_id, name):
        return self.one(
            "SELECT * FROM vms WHERE cloudspace_id=? AND name=? AND deleted_at IS NULL", cloudspace_id, name
        )

    def new_vm(self, cloudspace_id, name, description, vcpus, memory, image_id, disk_size, user_data):
        now = time.time()
        cur = self.x(
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
        return cur.lastrowid

    def delete_vm(self, vm_id):
        """Detach what the VM holds and delete it; returns the NICs that were detached."""
        for g in self.vgpus_of_vm(vm_id):
            self.detach_vgpu(g["vgpu_id"])
        nics = self.nics_of_vm(vm_id)
        now = time.time()
        self.x("UPDATE nics SET detached_at=? WHERE vm_id=? AND detached_at IS NULL", now, vm_id)
        self.x("UPDATE vms SET deleted_at=?, status='DELETED' WHERE vm_id=?", now, vm_id)
        self.x("DELETE FROM vm_files WHERE vm_id=?", vm_id)
        return nics

    # -- the guest agent's files -------------------------------------------------
    def write_vm_file(self, vm_id, path, content):
        """What the guest wrote (the admin API stands in for the machine: a VM here runs no operating system)."""
        self.x("INSERT OR REPLACE INTO vm_files VALUES (?, ?, ?)", vm_id, path, content)

    def vm_file(self, vm_id, path):
        row = self.one("SELECT content FROM vm_files WHERE vm_id=? AND path=?", vm_id, path)
        return None if row is None else row[0]

    # -- networks and NICs -------------------------------------------------------
    def external_networks(self, location):
        return self.q("SELECT * FROM external_networks WHERE location=? ORDER BY external_network_id", location)

    def external_network(self, location, network_id):
        return self.one(
            "SELECT * FROM external_networks WHERE location=? AND external_network_id=?", location, network_id
        )

    def nics_of_vm(self, vm_id):
        return self.q("SELECT * FROM nics WHERE vm_id=? AND detached_at IS NULL ORDER BY nic_id", vm_id)

    def nic_at(self, vm_id, ip_address, network_id=None):
        if network_id is None:
            return self.one(
                "SELECT * FROM nics WHERE vm_id=? AND ip_address=? AND detached_at IS NULL", vm_id, ip_address
            )
        return self.one(
            "SELECT * FROM nics WHERE vm_id=? AND ip_address=? AND network_id=? AND detached_at IS NULL",
            vm_id,
            ip_address,
            network_id,
        )

    def detach_nic(self, nic_id):
        self.x("UPDATE nics SET detached_at=? WHERE nic_id=?", time.time(), nic_id)
