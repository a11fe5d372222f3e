#!/usr/bin/env python3
"""Inventory benchmark: ``ansible-inventory --list`` of the plugin whitesky.capvco.vms over --vms VMs.

Against a fresh emulator: --cloudspaces cloudspaces over two locations, --vms VMs spread evenly over them; in each
cloudspace a cluster noted on it (a creator note) with --machines machines carrying its marker (a fifth of them
with a vGPU attached), as many VMs named like its machines without the marker, the rest made by hand; and
--detached reservations that are no one's in the first location, so that its listing takes several pages.  The VMs
are made (in parallel) before --latency-ms of latency per call is switched on.

Figures measured in this one run, each beside its goal (these machines are noisy: each time is the median of
--repeat runs, measured beside the figures it is compared with); exits 1 when a goal is missed:

1. cold (the cache flushed: everything read, then cached): wall - Ansible's start <= 2 s (the start:
   ``ansible-inventory --list`` of an empty static inventory), and the platform calls == the bound: the
   cloudspaces' listing, per cloudspace its VM listing and its notes, per location the reservations' pages, the
   profiles and the prices, and a marker per VM whose name may be a machine of a cluster its cloudspace's notes
   name (never one per VM of others);
2. warm (the same file, its cache filled): 0 calls, and wall - Ansible's own cost of the same inventory <= 0.3 s:
   ``ansible-inventory --list`` of the warm run's output served by a script (the same hosts, groups and variables
   from the cheapest source there is, a script that prints them), so that the figure is the plugin's own.  Over
   the empty inventory's start it is printed too: Ansible's own handling of 1,000 hosts with their variables
   (adding them, checking each variable, the vars plugins per host, writing the JSON) is more than 0.3 s on a
   development machine, whatever the source.

The core alone (``vm_inventory.read`` in this process, same latency) is printed beside them.

    .venv/bin/python benchmarks/inventory_bench.py [--vms 1000] [--cloudspaces 10] [--latency-ms 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import httpx
from goals import report  # beside this file: a script's own folder is on its path

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import vm_inventory
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers, naming, notes
from capvco_lab.emulator import ROOT, Emulator
from capvco_lab.inventory import BIN, calls, create_vms, expected_calls, inventory_env

LOCATIONS = ("be-gen-1", "nl-ams-1")


def gpu(loc):
    """The location's one GPU profile (a profile's id is the platform's, unique across locations)."""
    return "a100-" + loc


def world(cloudspaces):
    """The seed: two locations, ``cloudspaces`` cloudspaces spread over them."""
    return {
        "customers": [{"customer_id": "capvco-demo"}],
        "locations": [
            {
                "name": loc,
                "prices": {"vgu": 730.0},
                "gpus": [{"id": gpu(loc), "vendor": "NVIDIA", "model": "A100", "available_instances": 10**6}],
                "cloudspaces": [
                    {"cloudspace_id": "cs-%02d" % i, "customer_id": "capvco-demo", "name": "space-%02d" % i}
                    for i in range(cloudspaces)
                    if i % len(LOCATIONS) == n
                ],
            }
            for n, loc in enumerate(LOCATIONS)
        ],
    }


def populate(emu, args):
    """The VMs, the clusters' notes and the reservations; how many VMs there are."""
    per_space = args.vms // args.cloudspaces
    vms, machines = [], []
    with emu.client(timeout=120) as client:
        for i in range(args.cloudspaces):
            cs, name = "cs-%02d" % i, "k%02d" % i
            client.create_cloudspace_note(cs, *notes.creator_note(name))
            marker = markers.machine_marker(name, "workers")
            own = [(cs, "%s-w-%d" % (name, j), marker) for j in range(args.machines)]
            like = [(cs, "%s-x-%d" % (name, j), "made by hand") for j in range(args.machines)]
            rest = [(cs, "app-%02d-%03d" % (i, j), "made by hand") for j in range(per_space - 2 * args.machines)]
            vms += own + like + rest
            machines += own[: max(1, args.machines // 5)]
        create_vms(client, vms, threads=16)
        ids = {(cs, vm["name"]): vm["vm_id"] for cs in {v[0] for v in machines} for vm in client.vms(cs)}
    location = {"cs-%02d" % i: LOCATIONS[i % len(LOCATIONS)] for i in range(args.cloudspaces)}
    admin = emu.admin_url + "/seed-vgpu"
    for cs, name, _marker in machines:  # a vGPU attached to a fifth of the machines
        cluster = name.split("-", 1)[0]
        body = {"location": location[cs], "gpu_id": gpu(location[cs]), "vgpu_name": naming.encode(cluster, name, 0)}
        httpx.post(admin, json=dict(body, vm_id=ids[(cs, name)]), timeout=60).raise_for_status()
    if args.detached:
        names = ["someone-else-%05d" % i for i in range(args.detached)]
        body = {"location": LOCATIONS[0], "gpu_id": gpu(LOCATIONS[0]), "vgpu_names": names}
        httpx.post(admin, json=body, timeout=120).raise_for_status()
    return len(vms)


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv, env, cpu=None):
    """Run ``argv``: (its wall time, its stdout); its CPU time (user and system) is appended to ``cpu``."""
    c0, t0 = _children_cpu(), time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.monotonic() - t0
    if cpu is not None:
        cpu.append(_children_cpu() - c0)
    if proc.returncode:
        print(proc.stdout[-2000:], proc.stderr[-4000:])
        raise SystemExit("%s exited %d" % (" ".join(argv[:3]), proc.returncode))
    return wall, proc.stdout


def measure(emu, tmp, args):
    """The medians of --repeat runs each: Ansible's start, cold, warm; and the calls of each cold and warm run."""
    empty = os.path.join(tmp, "empty.yml")
    with open(empty, "w", encoding="utf-8") as fh:
        fh.write("all:\n  hosts: {}\n")
    source = os.path.join(tmp, "bench.whitesky.yml")
    with open(source, "w", encoding="utf-8") as fh:
        json.dump(
            {
                "plugin": "whitesky.capvco.vms",
                "cache": True,
                "cache_plugin": "ansible.builtin.jsonfile",
                "cache_connection": os.path.join(tmp, "cache"),
            },
            fh,
        )
    env = inventory_env(emu)
    tool = os.path.join(BIN, "ansible-inventory")
    wall = {k: [] for k in ("start", "cold", "warm", "floor")}
    cpu = {k: [] for k in wall}
    cold_calls, warm_calls, hosts = [], [], set()
    script = os.path.join(tmp, "same-inventory.sh")
    for _ in range(args.repeat):  # side by side: each figure's runs are spread over the same stretch of time
        wall["start"].append(timed([tool, "-i", empty, "--list"], env, cpu["start"])[0])
        emu.reset_stats()
        took, out = timed([tool, "-i", source, "--list", "--flush-cache"], env, cpu["cold"])
        wall["cold"].append(took)
        cold_calls.append(calls(emu))
        hosts.add(len(json.loads(out)["_meta"]["hostvars"]))
        emu.reset_stats()
        took, out = timed([tool, "-i", source, "--list"], env, cpu["warm"])
        wall["warm"].append(took)
        warm_calls.append(calls(emu))
        hosts.add(len(json.loads(out)["_meta"]["hostvars"]))
        same_inventory(script, out)
        wall["floor"].append(timed([tool, "-i", script, "--list"], env, cpu["floor"])[0])
    return {
        **{k: statistics.median(v) for k, v in wall.items()},
        **{k + "_cpu": statistics.median(v) for k, v in cpu.items()},
        "cold_calls": cold_calls,
        "warm_calls": warm_calls,
        "hosts": hosts,
    }


def same_inventory(script, listed):
    """An inventory script that prints what ``--list`` printed (its strings as they were set)."""
    data = json.loads(listed, object_hook=lambda o: o["__ansible_unsafe"] if set(o) == {"__ansible_unsafe"} else o)
    with open(script + ".json", "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    with open(script, "w", encoding="utf-8") as fh:
        fh.write('#!/bin/sh\nexec cat "%s"\n' % (script + ".json"))
    os.chmod(script, 0o755)


def core(emu):
    """The core alone in this process: its wall time and how many hosts it read."""
    with emu.client(timeout=120) as client:
        t0 = time.monotonic()
        got = vm_inventory.read(client)
        return time.monotonic() - t0, len(got.hosts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vms", type=int, default=1000)
    ap.add_argument("--cloudspaces", type=int, default=10)
    ap.add_argument("--machines", type=int, default=10, help="each cluster's machines (and as many named like them)")
    ap.add_argument("--detached", type=int, default=1200, help="reservations of no one's in the first location")
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        seed = os.path.join(tmp, "seed.json")
        with open(seed, "w", encoding="utf-8") as fh:
            json.dump(world(args.cloudspaces), fh)
        emu = Emulator(os.path.join(tmp, "emulator"), extra_args=["--config", seed]).start()
        try:
            made = populate(emu, args)
            bound = expected_calls(emu.snapshot())
            emu.faults(latency_ms=args.latency_ms)
            m = measure(emu, tmp, args)
            core_wall, core_hosts = core(emu)
        finally:
            emu.stop()
    limit = sum(bound.values())
    print(
        "%d VMs over %d cloudspaces in %d locations (%d clusters of %d machines, as many VMs named like them), "
        "%.0f ms per call, medians of %d runs:"
        % (made, args.cloudspaces, len(LOCATIONS), args.cloudspaces, args.machines, args.latency_ms, args.repeat)
    )
    print("  hosts listed: %s" % ", ".join(str(h) for h in sorted(m["hosts"])))
    print("  Ansible's start (--list of an empty static inventory): %.2fs (cpu %.2fs)" % (m["start"], m["start_cpu"]))
    print(
        "  cold (--flush-cache): %.2fs (cpu %.2fs), %.2fs over the start; calls %s"
        % (
            m["cold"],
            m["cold_cpu"],
            m["cold"] - m["start"],
            ", ".join(str(sum(c.values())) for c in m["cold_calls"]),
        )
    )
    print("    bound %d: %s" % (limit, ", ".join("%s %d" % kv for kv in sorted(bound.items()))))
    print(
        "  warm (cache filled): %.2fs (cpu %.2fs), %.2fs over the start; calls %s"
        % (
            m["warm"],
            m["warm_cpu"],
            m["warm"] - m["start"],
            ", ".join(str(sum(c.values())) for c in m["warm_calls"]),
        )
    )
    print(
        "  Ansible's own cost of the same inventory (--list of a script that prints it): %.2fs (cpu %.2fs), %.2fs"
        " over the start; the plugin's own, warm: %.2fs (cpu %.2fs)"
        % (m["floor"], m["floor_cpu"], m["floor"] - m["start"], m["warm"] - m["floor"], m["warm_cpu"] - m["floor_cpu"])
    )
    print("  the core alone, in this process: %.2fs for %d hosts" % (core_wall, core_hosts))
    worst_cold = max(sum(c.values()) for c in m["cold_calls"])
    goals = [
        ("cold --list: seconds over Ansible's start", m["cold"] - m["start"], 2.0),
        ("cold --list: platform calls / the bound (pages + notes + markers)", worst_cold / limit, 1.0),
        (
            "cold --list: runs whose calls differ from the bound's, by operation",
            float(sum(c != bound for c in m["cold_calls"])),
            0,
        ),
        ("warm --list: seconds over Ansible's own --list of the same inventory", m["warm"] - m["floor"], 0.3),
        ("warm --list: platform calls", float(max(sum(c.values()) for c in m["warm_calls"])), 0),
        ("hosts listed: runs that did not list every VM", float(m["hosts"] != {made}), 0),
    ]
    return report(goals)


if __name__ == "__main__":
    sys.exit(main())
