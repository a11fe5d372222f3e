#!/usr/bin/env python3
"""GPU benchmark: calls and wall time against their floors, and an orphan scan at scale.

Runs against a fresh emulator with 100 ms of injected latency per request and
prints ratios measured in this one run (these machines are noisy; compare
ratios, not seconds):

1. platform calls per operation against the minimum: reserving 20 machines x 4
   vGPUs needs R reserve-and-attach calls plus the list pages; teardown needs
   the list pages plus R deletes;
2. wall time against the critical path (one VM's operations run in turn
   because of the VM lock; different VMs may overlap);
3. an orphan scan over 10,000 reservations: time, and calls against pages.

    .venv/bin/python benchmarks/gpu_bench.py [--machines 20] [--gpus 4] [--latency-ms 100] [--scan 10000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time

from ansible_collections.whitesky.capvco.plugins.module_utils import gpu, ownership, sweep
from ansible_collections.whitesky.capvco.plugins.module_utils.client import PAGE_LIMIT
from ansible_collections.whitesky.capvco.plugins.module_utils.request import Request
from capvco_lab.emulator import Emulator


def total_calls(emu):
    return sum(op["count"] for op in emu.stats()["operations"].values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--machines", type=int, default=20)
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--scan", type=int, default=10000)
    ap.add_argument("--parallel", type=int, default=20)
    args = ap.parse_args()
    lat = args.latency_ms / 1000.0
    r = args.machines * args.gpus
    with tempfile.TemporaryDirectory() as tmp:
        world = {
            "customers": [{"customer_id": "capvco-demo"}],
            "locations": [
                {
                    "name": "be-gen-1",
                    "prices": {"vgu": 730.0},
                    "gpus": [{"id": "a100", "vendor": "NVIDIA", "model": "A100", "available_instances": r + args.scan}],
                    "cloudspaces": [{"cloudspace_id": "cs-demo", "customer_id": "capvco-demo", "name": "bench"}],
                }
            ],
        }
        seed = os.path.join(tmp, "seed.json")
        with open(seed, "w", encoding="utf-8") as fh:
            json.dump(world, fh)
        emu = Emulator(os.path.join(tmp, "state"), extra_args=["--config", seed]).start()
        try:
            client = emu.client(timeout=60)
            names = ["m%02d" % i for i in range(args.machines)]
            for n in names:
                client.create_vm("cs-demo", name=n, description="bench", vcpus=4, memory=8192)
            emu.faults(latency_ms=args.latency_ms)
            emu.reset_stats()
            params = dict(
                location="be-gen-1",
                cloudspace_id="cs-demo",
                cluster="bench",
                machine=None,
                machines=names,
                type="NVIDIA A100",
                count=args.gpus,
                state="present",
                permanently=True,
                parallel=args.parallel,
            )
            t0 = time.monotonic()
            gpu.ensure(Request(client, params))
            create_wall = time.monotonic() - t0
            create_calls = total_calls(emu)
            pages = max(1, math.ceil(r / PAGE_LIMIT))
            create_min = r + pages
            # critical path: the reads that must precede (VM list, reservation pages, profiles), then one VM's
            # reserves in turn
            create_floor = (1 + 1 + 1 + args.gpus) * lat

            emu.reset_stats()
            t0 = time.monotonic()
            sweep.reclaim(
                Request(
                    client,
                    dict(
                        location="be-gen-1",
                        scope="cluster",
                        cluster="bench",
                        grace_period=0,
                        permanently=True,
                        parallel=args.parallel,
                    ),
                )
            )
            teardown_wall = time.monotonic() - t0
            teardown_calls = total_calls(emu)
            teardown_min = pages + r
            teardown_floor = (1 + 1 + args.gpus) * lat  # list, prices, one VM's deletes in turn

            emu.faults()
            now = int(time.time())
            orphan_names = [ownership.encode("gone", "m%05d" % i, 0, created=now - 7200) for i in range(args.scan)]
            for i in range(0, len(orphan_names), 2000):
                emu.admin(
                    "POST",
                    "/seed-vgpu",
                    {"location": "be-gen-1", "gpu_id": "a100", "vgpu_names": orphan_names[i : i + 2000]},
                )
            emu.faults(latency_ms=args.latency_ms)
            emu.reset_stats()
            t0 = time.monotonic()
            found = sweep.info(
                Request(
                    client, dict(location="be-gen-1", cluster=None, machine=None, orphans_only=True, with_cost=False)
                )
            )
            scan_wall = time.monotonic() - t0
            scan_calls = total_calls(emu)
            scan_pages = math.ceil(args.scan / PAGE_LIMIT)
            assert len(found["reservations"]) == args.scan, len(found["reservations"])
        finally:
            emu.stop()

    print(
        "GPU benchmark: %d machines x %d vGPUs (R=%d), %.0f ms latency per call, parallel=%d"
        % (args.machines, args.gpus, r, args.latency_ms, args.parallel)
    )
    print(
        "create:   calls %4d / minimum %4d = %.3fx   wall %.2fs / critical path %.2fs = %.2fx"
        % (create_calls, create_min, create_calls / create_min, create_wall, create_floor, create_wall / create_floor)
    )
    print(
        "teardown: calls %4d / minimum %4d = %.3fx   wall %.2fs / critical path %.2fs = %.2fx"
        % (
            teardown_calls,
            teardown_min,
            teardown_calls / teardown_min,
            teardown_wall,
            teardown_floor,
            teardown_wall / teardown_floor,
        )
    )
    print(
        "orphan scan over %d reservations: %.2fs (goal <= 2 s), calls %d / pages %d = %.2fx"
        % (args.scan, scan_wall, scan_calls, scan_pages, scan_calls / scan_pages)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
