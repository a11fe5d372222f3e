#!/usr/bin/env python3
"""The chaos suite: the lifecycle playbooks under random faults and kills, checked against the emulator's ledger.

Each loop picks random faults (latency, 5xx and 429 rates, responses dropped
after commit, and VM-lock conflicts from a "noisy neighbour" that keeps
attaching and detaching NICs on the cluster's VMs), then runs create, scale
down, force delete and delete, each by two actors at once (the second a random
moment after the first). In some runs the playbook is killed (SIGKILL)
at a random moment and run again to convergence. After each loop, against the
emulator's own ledger:

- zero reservations owned by the cluster;
- zero double reservations ever made, counted by slot: live reservations per
  decoded (cluster, machine, slot), not only equal names;
- zero unowned reservations touched;
- zero vGPU-seconds accruing after teardown.

A playbook is re-run after a kill, or after a failure; every re-run is counted
by its cause and every failure is printed.  A re-run that neither a kill nor
injected errors (5xx, 429, lost answers) explain fails the suite: the VM locks
of the noisy neighbour are not an excuse, the collection waits them out.

    .venv/bin/python tests/chaos/chaos.py --loops 50 [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from capvco_lab.emulator import COLLECTIONS, ROOT, Emulator
from capvco_lab.runs import kill_all
from capvco_lab.specs import cluster_spec

PLAYS = os.path.join(ROOT, "playbooks")
BIN = os.path.dirname(sys.executable)


def spec(name, gpu_replicas):
    return cluster_spec(name, name + "-cs", gpu_replicas, count=2)


class Chaos:
    def __init__(self, emu, rng, kill_rate):
        self.emu = emu
        self.rng = rng
        self.kill_rate = kill_rate
        self.runs = self.kills = self.reruns = 0
        self.reruns_after = {"kill": 0, "fault": 0, "unexpected": 0}
        self.failures = []  # (playbook, why) of each failed run that was not killed
        self.faulted = False  # whether the current loop injects errors or lost answers

    def playbook(self, name, extra):
        """Run a playbook to convergence: re-run after a failure or a kill."""
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1", **self.emu.env())
        cmd = [os.path.join(BIN, "ansible-playbook"), os.path.join(PLAYS, name), "-e", json.dumps(extra)]
        for attempt in range(12):
            self.runs += 1
            env["CAPVCO_RUN"] = "chaos-%d-%d" % (os.getpid(), self.runs)
            proc = subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
            )
            if attempt == 0 and self.rng.random() < self.kill_rate:
                try:
                    proc.wait(self.rng.uniform(1.5, 6.0))
                except subprocess.TimeoutExpired:
                    kill_all(env["CAPVCO_RUN"])  # the run and every process it started
                    proc.wait()
                    self.kills += 1
                    self.emu.quiesce()  # what was already sent lands before the re-run, as for an operator
                    self.reruns += 1
                    self.reruns_after["kill"] += 1
                    continue
            out, _ = proc.communicate()
            if proc.returncode == 0:
                return
            self.reruns += 1
            self.reruns_after["fault" if self.faulted else "unexpected"] += 1
            why = [line.strip() for line in out.splitlines() if '"msg"' in line or "fatal:" in line or "FAILED" in line]
            self.failures.append((name, (why or ["rc %d" % proc.returncode])[-1][:300]))
        raise RuntimeError("%s did not converge:\n%s" % (name, out[-3000:]))

    def both(self, name, extra):
        """Two actors run the same playbook on the same cluster at once (an AWX schedule and a person, the
        controller and a playbook), each to convergence; the second starts a random moment after the first."""
        errors = []

        def actor(delay):
            time.sleep(delay)  # the drawn start offset, not a wait for a condition
            try:
                self.playbook(name, extra)
            except RuntimeError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=actor, args=(d,)) for d in (0, self.rng.uniform(0, 1.5))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def random_faults(self):
        cfg = {
            "latency_ms": self.rng.choice([0, 5, 20, 50]),
            "error_rates": {
                "503": self.rng.choice([0, 0.05, 0.15]),
                "502": self.rng.choice([0, 0.03]),
                "429": self.rng.choice([0, 0.05, 0.1]),
            },
            "retry_after": 0.05,
            "drop_rate": self.rng.choice([0, 0.05, 0.1]),
            "vm_op_seconds": self.rng.choice([0, 0.05, 0.2]),
            "seed": self.rng.randrange(1 << 30),
        }
        self.emu.faults(**cfg)
        self.faulted = bool(cfg["drop_rate"] or any(cfg["error_rates"].values()))
        return cfg


def noisy_neighbour(emu, cluster_cs, stop, rng):
    """Hold the cluster's VMs' locks now and then (NIC attach + detach), so that the playbooks meet real 409s."""
    client = emu.client(timeout=10, max_attempts=1)
    while not stop.wait(rng.uniform(0.05, 0.3)):
        try:
            cs = [c for c in client.cloudspaces() if c["name"] == cluster_cs]
            vms = client.vms(cs[0]["cloudspace_id"]) if cs else []
            if not vms:
                continue
            vm = rng.choice(vms)
            client.attach_nic(cs[0]["cloudspace_id"], vm["vm_id"], 101)
            for nic in client.nics(cs[0]["cloudspace_id"], vm["vm_id"]):
                client.detach_nic(cs[0]["cloudspace_id"], vm["vm_id"], nic["ip_address"], 101)
        except Exception:  # the neighbour's own failures do not matter
            continue


def doubles_by_slot(reservations):
    """Live reservations beyond one per (cluster, machine, slot), decoded from the names (a slot bought again
    carries a new creation time in its name, so equal names alone miss it)."""
    per_slot = {}
    for r in reservations:
        owner = naming.decode(r["vgpu_name"])
        if owner is not None and r["deleted_at"] is None:
            key = (owner.cluster, owner.machine, owner.slot)
            per_slot[key] = per_slot.get(key, 0) + 1
    return sum(n - 1 for n in per_slot.values() if n > 1)


def check(emu, cluster):
    ledger = emu.ledger()
    owned = [r for r in ledger["reservations"] if naming.owned_by(naming.decode(r["vgpu_name"]), cluster)]
    left = [r for r in owned if r["deleted_at"] is None]
    accruing_before = sum(r["vgpu_seconds"] for r in owned)
    time.sleep(0.3)
    accruing_after = sum(
        r["vgpu_seconds"]
        for r in emu.ledger()["reservations"]
        if naming.owned_by(naming.decode(r["vgpu_name"]), cluster)
    )
    unowned_touched = sum(r["touched"] for r in ledger["reservations"] if r["vgpu_name"].startswith("ops-"))
    return {
        "left": len(left),
        "double": ledger["double_reservations"] + doubles_by_slot(ledger["reservations"]),
        "unowned_touched": unowned_touched,
        "accruing": round(accruing_after - accruing_before, 6),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loops", type=int, default=50)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--kill-rate", type=float, default=0.3)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        emu = Emulator(os.path.join(tmp, "state")).start()
        try:
            seeded = [("nvidia-l4-24q", "ops-hand-made-%d" % i) for i in range(2)]
            for gpu_id, name in seeded:
                emu.admin("POST", "/seed-vgpu", {"location": "be-gen-1", "gpu_id": gpu_id, "vgpu_name": name})
            chaos = Chaos(emu, rng, args.kill_rate)
            leaks = 0
            faults_total = 0
            for loop in range(args.loops):
                name = "chaos%d" % loop
                cfg = chaos.random_faults()
                stop = threading.Event()
                neighbour = threading.Thread(target=noisy_neighbour, args=(emu, name + "-cs", stop, rng), daemon=True)
                neighbour.start()
                try:
                    chaos.both("cluster_create.yml", spec(name, 2))
                    chaos.both("cluster_create.yml", spec(name, 1))  # scale down
                    chaos.both("cluster_create.yml", spec(name, 2))  # and up again
                    chaos.both("machine_delete.yml", dict(spec(name, 2), machine=name + "-gpu-0", force=True))
                    chaos.both("cluster_delete.yml", spec(name, 2))
                finally:
                    stop.set()
                    neighbour.join()
                stats = emu.stats()
                faults_total = sum(stats["faults"].values())
                emu.faults()
                result = check(emu, name)
                bad = result["left"] or result["double"] or result["unowned_touched"] or result["accruing"]
                leaks += result["left"]
                print(
                    "loop %3d: faults %s -> %s%s"
                    % (loop, {k: v for k, v in cfg.items() if k != "seed" and v}, result, "  <-- FAIL" if bad else ""),
                    flush=True,
                )
                if bad:
                    break
            stats = emu.stats()
            lock_conflicts = stats["vm_lock_conflicts"]
        finally:
            emu.stop()
    for playbook, why in chaos.failures:
        print("failed run of %s: %s" % (playbook, why))
    unexpected = chaos.reruns_after["unexpected"]
    print(
        "chaos: %d loop(s), seed %d: runs %d (re-runs %d: %d after a kill, %d after injected errors, %d unexpected), "
        "faults injected %d, VM-lock conflicts %d, kills %d, leaks %d, double reservations %d, unowned touched %d"
        % (
            loop + 1,
            args.seed,
            chaos.runs,
            chaos.reruns,
            chaos.reruns_after["kill"],
            chaos.reruns_after["fault"],
            unexpected,
            faults_total,
            lock_conflicts,
            chaos.kills,
            leaks,
            result["double"],
            result["unowned_touched"],
        )
    )
    if unexpected:
        print("FAIL: %d run(s) without a kill or injected errors needed a re-run" % unexpected)
    return 1 if bad or unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
