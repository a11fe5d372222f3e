#!/usr/bin/env python3
"""CNI benchmark: capvco-sriov ADD+DEL against Debian's Go host-device plugin, same netns setup, one run.

Platform latency is 0 (the emulator answers at once). Prints medians and ratios:

- ADD+DEL wall time of capvco-sriov (plugin -> agent -> platform -> hot-plug -> netlink) against host-device
  (moving an existing device, static IPAM), both with the pod netns and the device set up the same way;
- the same with the emulator's hot-plug hook time taken out (the hook stands in for the platform creating the
  VF, which host-device never has to do);
- 20 concurrent ADDs on one node against the serialisation floor (20 x the attach time), with each attach
  holding the VM for --attach-ms.

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
        # 20 concurrent pods on one node
        lab.emu.faults(vm_op_seconds=args.attach_ms / 1000.0)
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
        assert all(rc == 0 for rc, _ in results)
        conflicts = lab.emu.stats()["vm_lock_conflicts"]
        hotplug = statistics.median(e["seconds"] for e in lab.emu.admin("GET", "/hooks")["log"][-20:])
    finally:
        lab.down()
    med = statistics.median
    floor = 20 * args.attach_ms / 1000.0
    floor_hp = 20 * (args.attach_ms / 1000.0 + hotplug)
    print("CNI ADD+DEL, median of %d, platform latency 0:" % args.runs)
    print("  Go host-device:           %6.1f ms" % (med(theirs) * 1000))
    print("  capvco-sriov:             %6.1f ms  = %.2fx host-device" % (med(ours) * 1000, med(ours) / med(theirs)))
    print(
        "  capvco-sriov, no hot-plug: %5.1f ms  = %.2fx host-device (the emulator's hook creating the VF removed)"
        % (med(ours_local) * 1000, med(ours_local) / med(theirs))
    )
    print(
        "20 concurrent ADDs on one node, attach holds the VM %.0f ms: %.2fs / floor %.2fs = %.2fx, 409s: %d"
        % (args.attach_ms, conc, floor, conc / floor, conflicts)
    )
    print(
        "  the same against 20 x (attach + the emulator's hot-plug, %.0f ms median): %.2fs = %.2fx"
        % (hotplug * 1000, floor_hp, conc / floor_hp)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
