#!/usr/bin/env python3
"""CNI benchmark: capvco-sriov ADD+DEL against Debian's Go host-device plugin, same netns setup, one run.

Prints medians and ratios measured in this one run, each beside its goal, and exits 1 when a goal is missed:

- ADD+DEL wall time of capvco-sriov (plugin -> agent -> platform -> hot-plug -> netlink) against host-device
  (moving an existing device, static IPAM), both with the pod netns and the device set up the same way, with no
  platform latency; the goal is on the local overhead, with the emulator's hot-plug hook time taken out (the hook
  stands in for the platform creating the VF, which host-device never has to do): <= 1.5x host-device;
- 20 ADDs at once on one node, with --attach-ms of latency on every platform call: the time against 20 t, where t
  is one attach call's own time (the latency and the hot-plug), measured alone in the same run; failed ADDs are
  counted. Goal: <= 1.5 x 20 t, and no failure.

    sudo .venv/bin/python benchmarks/cni_bench.py [--runs 30] [--attach-ms 100]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from capvco_lab.netlab import NETNS_DIR, Lab, missing, sh

GO_PLUGINS = "/usr/lib/cni"


def host_device(lab, pod, command, device):
    conf = {
        "cniVersion": "1.0.0",
        "name": "hd",
        "type": "host-device",
        "device": device,
        "ipam": {"type": "static", "addresses": [{"address": "198.51.100.200/24"}]},
    }
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": "hd",
        "CNI_IFNAME": "net1",
        "CNI_NETNS": os.path.join(NETNS_DIR, pod),
        "CNI_PATH": GO_PLUGINS,
        "PATH": os.environ["PATH"],
    }
    t0 = time.perf_counter()
    proc = subprocess.run(
        ["ip", "netns", "exec", lab.node, os.path.join(GO_PLUGINS, "host-device")],
        input=json.dumps(conf),
        env=env,
        capture_output=True,
        text=True,
    )
    took = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--attach-ms", type=float, default=100.0)
    args = ap.parse_args()
    if missing() or not os.path.exists(os.path.join(GO_PLUGINS, "host-device")):
        print("needs root, iproute2 and containernetworking-plugins")
        return 1
    lab = Lab(pathlib.Path(tempfile.mkdtemp())).up(grace=600, interval=600)
    try:
        pod = lab.add_pod(1)
        ours, ours_local, theirs = [], [], []
        for i in range(args.runs):
            # host-device: the device exists in the node netns before ADD (set up untimed)
            sh("ip", "-n", lab.node, "link", "add", "hdv", "type", "veth", "peer", "name", "hdp")
            t_add = host_device(lab, pod, "ADD", "hdv")
            t_del = host_device(lab, pod, "DEL", "hdv")
            sh("ip", "-n", lab.node, "link", "del", "hdv", check=False)
            theirs.append(t_add + t_del)
            t0 = time.perf_counter()
            rc, res = lab.cni("ADD", pod, container="b%d" % i)
            rc2, _ = lab.cni("DEL", pod, container="b%d" % i)
            took = time.perf_counter() - t0
            assert rc == 0 and rc2 == 0, res
            log = lab.emu.admin("GET", "/hooks")["log"]
            hook = sum(e["seconds"] for e in log[-2:])  # this iteration's attach and detach hooks
            ours.append(took)
            ours_local.append(took - hook)
        # 20 pods at once on one node, every platform call taking --attach-ms
        lab.emu.faults(latency_ms=args.attach_ms)
        alone = []
        with lab.emu.client() as client:
            for _ in range(3):  # t: one attach call by itself (latency + the hot-plug), and its detach untimed
                free = client.free_addresses(lab.location, 101)[0]
                t0 = time.perf_counter()
                client.attach_nic(lab.cloudspace_id, lab.vm_id, 101, ip_address=free)
                alone.append(time.perf_counter() - t0)
                client.detach_nic(lab.cloudspace_id, lab.vm_id, free, 101)
        lab.emu.reset_stats()
        pods = [lab.add_pod(10 + i) for i in range(20)]
        results = []
        threads = [
            threading.Thread(target=lambda p=p, i=i: results.append(lab.cni("ADD", p, container="p%d" % i)))
            for i, p in enumerate(pods)
        ]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        conc = time.perf_counter() - t0
        failed = sum(1 for rc, _ in results if rc != 0)
        conflicts = lab.emu.stats()["vm_lock_conflicts"]
    finally:
        lab.down()
    med = statistics.median
    t = med(alone)
    local = med(ours_local) / med(theirs)
    burst = conc / (20 * t)
    goals = [
        ("ADD+DEL local overhead vs Go host-device", local, 1.5),
        ("20 ADDs at once vs 20 x t", burst, 1.5),
    ]
    print("CNI ADD+DEL, median of %d, platform latency 0:" % args.runs)
    print("  Go host-device:             %6.1f ms" % (med(theirs) * 1000))
    print("  capvco-sriov:               %6.1f ms  = %.2fx host-device" % (med(ours) * 1000, med(ours) / med(theirs)))
    print(
        "  capvco-sriov, no hot-plug:  %6.1f ms  = %.2fx host-device (goal <= 1.5x)" % (med(ours_local) * 1000, local)
    )
    print(
        "20 ADDs at once on one node, %.0f ms latency per call, t = one attach alone = %.0f ms:"
        % (args.attach_ms, t * 1000)
    )
    print(
        "  %.2fs / 20 t %.2fs = %.2fx (goal <= 1.5x), failed ADDs: %d (goal 0), VM-lock 409s: %d"
        % (conc, 20 * t, burst, failed, conflicts)
    )
    missed = [name for name, value, goal in goals if value > goal] + (["failed ADDs"] if failed else [])
    print("goals: %s" % ("all met" if not missed else "MISSED: " + ", ".join(missed)))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
