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
CREATE TABLE IF NOT EXISTS external_networks (
  external_network_id INTEGER PRIMARY KEY, location TEXT, name TEXT, network TEXT, gateway TEXT,
  subnet_mask TEXT, dhcp INTEGER, public INTEGER);
CREATE TABLE IF NOT EXISTS nics (
  nic_id INTEGER PRIMARY KEY AUTOINCREMENT, vm_id INTEGER, network_id INTEGER, ip_address TEXT,
  mac_address TEXT, device_name TEXT, model TEXT, attached_at REAL, detached_at REAL);
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

    def empty(self):
        return self.db.execute("SELECT COUNT(*) FROM customers").fetchone()[0] == 0

    def q(self, sql, *args):
        return self.db.execute(sql, args).fetchall()

    def one(self, sql, *args):
        return self.db.execute(sql, args).fetchone()

    def x(self, sql, *args):
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

    def attached_seconds(self, vgpu_id, start, end):
        """Seconds of [start, end] during which the vGPU was attached, per VM."""
        now = time.time()
        per_vm = {}
        for att in self.q("SELECT vm_id, start, end FROM vgpu_attachments WHERE vgpu_id=?", vgpu_id):
            lo, hi = max(att["start"], start), min(att["end"] or now, end)
            if hi > lo:
                per_vm[att["vm_id"]] = per_vm.get(att["vm_id"], 0.0) + hi - lo
        return per_vm

    # -- NICs --------------------------------------------------------------
    def free_ip(self, net, wanted=None):
        network = ipaddress.ip_network("%s/%s" % (net["network"], net["subnet_mask"]), strict=False)
        used = {
            r[0]
            for r in self.q(
                "SELECT ip_address FROM nics WHERE network_id=? AND detached_at IS NULL", net["external_network_id"]
            )
        }
        used.add(net["gateway"])
        if wanted:
            if ipaddress.ip_address(wanted) not in network or wanted in used or wanted == str(network.network_address):
                return None
            return wanted
        for host in network.hosts():
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
