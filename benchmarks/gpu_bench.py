#!/usr/bin/env python3
"""GPU benchmark: the user's paths against their floors, measured in one run, each beside its goal.

Runs against a fresh emulator with --latency-ms of injected latency per request and prints figures measured in
this one run (these machines are noisy; the goals are ratios, or bounds far above the noise), and exits 1 when a
goal is missed:

1. platform calls per operation against the minimum (20 machines x 4 vGPUs: R reserve-and-attach calls plus the
   list pages plus one read of each machine's marker; teardown: the list pages plus R deletes plus the marker of
   each machine the reservations are attached to, since a reclaim refuses another cluster's machine). Goal <= 1.05x.
2. the ``vgpu`` module's core at the module's own defaults, against the critical path: the independent reads
   before a create count once (one round trip), then one VM's reserves in turn (the VM lock). Goal <= 1.5x.
3. ``cluster_create`` and ``cluster_delete`` for that pool through ``ansible-playbook`` (the user's path), against
   twice the module's own time as a user sees it (a one-task playbook of ``vgpu``, or of ``vgpu_reclaim``, for the
   same pool, in this run) plus the VMs' critical path (a listing, a create or delete, a read). Goal <= 1x.
4. the orphan scan the user runs (``vgpu_info`` with cost, rows for a bounded sample, and the ``gpu_orphans``
   playbook) over --scan reservations, then over 10 x that many, in a child process whose peak memory is read.
   The core runs alternating with a minimal client (plain httpx, reading the same pages the same way, decoding the
   JSON and counting the items): medians of 5 each. Goals: the core <= 2 s and <= 1.3x the minimal client, the
   playbook <= 3 s, 10 x the reservations <= 10 x the time, peak memory <= 100 MB.

    .venv/bin/python benchmarks/gpu_bench.py [--machines 20] [--gpus 4] [--latency-ms 100] [--scan 10000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime

from goals import report  # beside this file: a script's own folder is on its path

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import vgpus
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers, naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.paging import PAGE_LIMIT
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import sweep
from capvco_lab.emulator import COLLECTIONS, ROOT, Emulator

LOC, CS = "be-gen-1", "cs-demo"
LEASE_CALLS = 3
MEMBER_NOTE = 1
#: The vgpu module's own defaults (its argument_spec), so the core runs as the module does.
VGPU_DEFAULTS = {"state": "present", "permanently": True, "parallel": 32}
SCAN_CHILD = """
import json, resource, statistics, sys, time
from concurrent.futures import ThreadPoolExecutor
import httpx
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import report
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
url, token, customer, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
LOC = "be-gen-1"


def minimal():
    # the same pages with a plain HTTP client: the cloudspaces, the location's VM listings, the reservations (the
    # first page, then the others 32 at a time), the consumption and the prices; JSON decoded, items counted
    base = url.rstrip("/") + "/customers/" + customer
    auth = {"Authorization": "Bearer " + token}
    with httpx.Client(headers=auth, timeout=120) as http, ThreadPoolExecutor(32) as pool:
        def get(path, **query):
            return http.get(base + path, params=query).json()
        now = int(time.time())
        side = [
            pool.submit(get, "/locations/%s/consumption" % LOC, start=now - 7201, end=now + 1),
            pool.submit(get, "/locations/%s/prices" % LOC),
        ]
        spaces = pool.submit(get, "/cloudspaces").result()["result"]
        side += [
            pool.submit(get, "/cloudspaces/%s/vms" % cs["cloudspace_id"]) for cs in spaces if cs.get("location") == LOC
        ]
        page = lambda start: get("/locations/%s/vgpus" % LOC, limit=500, start_after=start, include_deleted="true")
        first = page(0)
        rest = pool.map(page, range(500, first["pagination"]["count"], 500))
        count = len(first["data"]) + sum(len(p["data"]) for p in rest)
        for f in side:
            f.result()
        return count


client = WhiteskyClient(url, token, customer, timeout=120)
params = dict(location=LOC, orphans_only=True, with_cost=True, max_rows=20)
scans, plain, count = [], [], None
for _ in range(rounds):  # side by side, alternating
    t0 = time.monotonic()
    count = report.info(client, **params)["summary"]["count"]
    scans.append(time.monotonic() - t0)
    if rounds > 1:
        t0 = time.monotonic()
        assert minimal() >= count
        plain.append(time.monotonic() - t0)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
print(json.dumps({"seconds": statistics.median(scans), "minimal": statistics.median(plain) if plain else None,
                  "count": count, "rss_mb": rss}))
"""


def stamp(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def total_calls(emu):
    return sum(op["count"] for op in emu.stats()["operations"].values())


def playbook(emu, name, extra_vars, quiet=False):
    """Run a playbook as the user does; (seconds, {task name: seconds}, rc)."""
    env = dict(
        os.environ,
        **emu.env(),
        ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
        PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    )
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), os.path.join(ROOT, "playbooks", name)]
    t0 = time.monotonic()
    proc = subprocess.run(argv + ["-e", json.dumps(extra_vars)], env=env, capture_output=True, text=True)
    took = time.monotonic() - t0
    tasks = {}
    try:
        for play in json.loads(proc.stdout)["plays"]:
            for task in play["tasks"]:
                dur = task["task"]["duration"]
                tasks[task["task"]["name"]] = stamp(dur["end"]) - stamp(dur["start"])
    except (ValueError, KeyError):
        pass
    if proc.returncode and not quiet:
        print(proc.stdout[-3000:], proc.stderr[-2000:])
    if os.environ.get("CAPVCO_BENCH_TASKS"):
        for task, seconds in tasks.items():
            print("    %6.2fs %s: %s" % (seconds, name, task))
    return took, tasks, proc.returncode


def one_task(tmp, module, module_args):
    """A playbook of one task: the module as a user runs it by itself."""
    path = os.path.join(tmp, module + ".yml")
    with open(path, "w", encoding="utf-8") as fh:
        play = {"hosts": "localhost", "gather_facts": False, "tasks": [{"whitesky.capvco." + module: module_args}]}
        json.dump([play], fh)
    return path


def seed_orphans(emu, n, start=0):
    now = int(time.time())
    names = [naming.encode("gone", "m%06d" % i, 0, created=now - 7200) for i in range(start, start + n)]
    for i in range(0, len(names), 5000):
        emu.admin("POST", "/seed-vgpu", {"location": LOC, "gpu_id": "a100", "vgpu_names": names[i : i + 5000]})


def scan_in_child(emu, rounds):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([COLLECTIONS, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, "-c", SCAN_CHILD, emu.url, emu.token, "capvco-demo", str(rounds)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--machines", type=int, default=20)
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--scan", type=int, default=10000)
    args = ap.parse_args()
    lat = args.latency_ms / 1000.0
    r = args.machines * args.gpus
    goals = []
    with tempfile.TemporaryDirectory() as tmp:
        world = {
            "customers": [{"customer_id": "capvco-demo"}],
            "locations": [
                {
                    "name": LOC,
                    "prices": {"vgu": 730.0},
                    "gpus": [{"id": "a100", "vendor": "NVIDIA", "model": "A100", "available_instances": 10**7}],
                    "cloudspaces": [{"cloudspace_id": CS, "customer_id": "capvco-demo", "name": "bench"}],
                }
            ],
        }
        seed = os.path.join(tmp, "seed.json")
        with open(seed, "w", encoding="utf-8") as fh:
            json.dump(world, fh)
        emu = Emulator(os.path.join(tmp, "state"), extra_args=["--config", seed]).start()
        try:
            client = emu.client(timeout=120)
            names = ["bench-m%02d" % i for i in range(args.machines)]
            solo = ["solo-s%02d" % i for i in range(args.machines)]  # the one-task vgpu playbook's (cluster solo)
            for cluster, pool in (("bench", names), ("solo", solo)):
                for n in pool:
                    client.create_vm(CS, name=n, description=markers.machine_marker(cluster), vcpus=4, memory=8192)
            emu.faults(latency_ms=args.latency_ms)
            # 1 and 2: the vgpu module's core, at the module's defaults
            emu.reset_stats()
            params = dict(VGPU_DEFAULTS, location=LOC, cloudspace_id=CS, cluster="bench")
            params.update(machines=names, gpu_type="NVIDIA A100", count=args.gpus)
            t0 = time.monotonic()
            vgpus.ensure(client, **params)
            create_wall = time.monotonic() - t0
            create_calls = total_calls(emu)
            pages = max(1, math.ceil(r / PAGE_LIMIT))
            # each machine's marker read (the proof that it is the cluster's), read once per run; the cluster's lease
            # (write its note, list the notes, delete the note) and, once it is held, the listing, the reservations
            # and the profiles read again (what was read before may be stale): one run at a time per cluster
            # and the cluster's member note on a cloudspace it did not create, written the first time it holds its lease
            create_min = r + pages + args.machines + LEASE_CALLS + (2 + pages) + MEMBER_NOTE
            # one round of independent reads, the lease (two calls in turn), the reads again, then one VM's reserves
            # in turn, then the lease let go
            create_floor = (1 + 2 + 1 + args.gpus + 1) * lat
            emu.reset_stats()
            reclaim = dict(location=LOC, scope="cluster", cluster="bench", grace_period=0, permanently=True)
            client = emu.client(timeout=120)  # a run of its own: it has read no marker yet
            t0 = time.monotonic()
            sweep.reclaim(client, parallel=32, **reclaim)
            teardown_wall = time.monotonic() - t0
            teardown_calls = total_calls(emu)
            teardown_min = pages + r + args.machines  # the marker of each machine holding them: the same proof
            goals += [
                ("create: calls / minimum", create_calls / create_min, 1.05),
                ("teardown: calls / minimum", teardown_calls / teardown_min, 1.05),
                ("vgpu module (defaults): wall / critical path", create_wall / create_floor, 1.5),
            ]
            # 3: the playbooks, the user's path, against the module's own time as a user sees it: a one-task
            # playbook of the vgpu module (and of vgpu_reclaim) for the same pool, in this run
            vgpu_args = {"location": LOC, "cloudspace_id": CS, "cluster": "solo", "machines": solo}
            vgpu_args.update(type="NVIDIA A100", count=args.gpus)
            vgpu_alone, _t, rc0 = playbook(emu, one_task(tmp, "vgpu", vgpu_args), {})
            reclaim_args = {"location": LOC, "scope": "cluster", "cluster": "solo"}
            reclaim_alone, _t, rc0b = playbook(emu, one_task(tmp, "vgpu_reclaim", reclaim_args), {})
            spec = {
                "cluster": {"name": "bench", "location": LOC, "cloudspace": "bench-cs"},
                "control_plane": {"replicas": 0, "vcpus": 2, "memory": 2048},
                "pools": [
                    {
                        "name": "gpu",
                        "replicas": args.machines,
                        "vcpus": 4,
                        "memory": 8192,
                        "image": 12,
                        "gpu": {"type": "NVIDIA A100", "count": args.gpus, "driverVersion": ""},
                    }
                ],
            }
            create_pb, create_tasks, rc1 = playbook(emu, "cluster_create.yml", spec)
            vgpu_task = create_tasks.get(
                "Converge the cluster to its spec (cloudspace, every pool's machines and GPUs by type)", 0.0
            )
            vm_path = 3 * lat  # the cloudspace's listing, each VM's create, its read: the VMs run at once
            create_bound = 2 * (vgpu_alone + vm_path)
            delete_pb, delete_tasks, rc2 = playbook(emu, "cluster_delete.yml", spec)
            sweep_task = delete_tasks.get(
                "Delete every machine the cluster owns, release every reservation it owns, then its own cloudspace", 0.0
            )
            delete_bound = 2 * (reclaim_alone + vm_path)
            goals += [
                ("cluster_create: wall / 2 x (vgpu alone + the VMs' path)", create_pb / create_bound, 1.0),
                ("cluster_delete: wall / 2 x (vgpu_reclaim alone + the VMs' path)", delete_pb / delete_bound, 1.0),
            ]
            # 4: the orphan scan the user runs
            emu.faults()
            seed_orphans(emu, args.scan)
            emu.faults(latency_ms=args.latency_ms)
            small = scan_in_child(emu, 5)
            orphans_pb, _tasks, rc3 = playbook(emu, "gpu_orphans.yml", {"location": LOC}, quiet=True)
            emu.faults()
            seed_orphans(emu, 9 * args.scan, start=args.scan)
            emu.faults(latency_ms=args.latency_ms)
            large = scan_in_child(emu, 1)
            assert small["count"] == args.scan and large["count"] == 10 * args.scan, (small, large)
            goals += [
                ("orphan scan, %d: seconds" % args.scan, small["seconds"], 2.0),
                (
                    "orphan scan, %d: x a minimal client reading the same pages" % args.scan,
                    small["seconds"] / small["minimal"],
                    1.3,
                ),
                ("gpu_orphans playbook, %d, with cost: seconds" % args.scan, orphans_pb, 3.0),
                (
                    "orphan scan, %d: x the %d time" % (10 * args.scan, args.scan),
                    large["seconds"] / small["seconds"],
                    10.0,
                ),
                ("orphan scan, %d: peak memory, MB" % (10 * args.scan), large["rss_mb"], 100.0),
            ]
        finally:
            emu.stop()

    print(
        "GPU benchmark: %d machines x %d vGPUs (R=%d), %.0f ms latency per call"
        % (args.machines, args.gpus, r, args.latency_ms)
    )
    print(
        "  create:   calls %d / minimum %d; wall %.2fs / critical path %.2fs"
        % (create_calls, create_min, create_wall, create_floor)
    )
    print("  teardown: calls %d / minimum %d; wall %.2fs" % (teardown_calls, teardown_min, teardown_wall))
    print(
        "  vgpu alone %.1fs, vgpu_reclaim alone %.1fs (one-task playbooks); cluster_create %.1fs (its vgpu task %.2fs,"
        " bound %.2fs, rc %d); cluster_delete %.1fs (its machines and sweep %.2fs, bound %.2fs, rc %d)"
        % (vgpu_alone, reclaim_alone, create_pb, vgpu_task, create_bound, rc1, delete_pb, sweep_task, delete_bound, rc2)
    )
    print(
        "  orphan scan (medians of 5, alternating with a minimal client): %d in %.2fs (the minimal client %.2fs,"
        " %.0f MB peak); %d in %.2fs (%.0f MB peak);"
        " gpu_orphans playbook %.2fs (rc %d: it fails while orphans exist)"
        % (
            args.scan,
            small["seconds"],
            small["minimal"],
            small["rss_mb"],
            10 * args.scan,
            large["seconds"],
            large["rss_mb"],
            orphans_pb,
            rc3,
        )
    )
    return report(goals, ["a lifecycle playbook failed"] if rc0 or rc0b or rc1 or rc2 else [], width=62)


if __name__ == "__main__":
    sys.exit(main())
