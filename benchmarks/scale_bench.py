#!/usr/bin/env python3
"""Scale benchmark: costs that grow with the cluster, not with its neighbours, and full speed under a rate limit.

Runs against fresh emulators and prints figures measured in this one run, each beside its goal (these machines are
noisy: every goal is a ratio of two figures measured side by side, or a count), and exits 1 when a goal is missed:

1. a 3-machine cluster (a control plane and two GPU machines) converged, converged again (idle), listed with
   ``machine_info cluster=...`` and torn down, in a cloudspace that also holds --foreign VMs made by hand, against
   the same in an empty cloudspace: the platform calls. Goal <= 1.05x.
2. the controller's idle reconcile of a converged VCOMachine (a GPU machine; the controller process woken by a
   label change, against the fake Kubernetes API of the tests): platform calls <= 3, and no write, on the platform
   or in Kubernetes. The idle reconcile of its VCOCluster is printed beside it, with the same in a cloudspace
   crowded by --foreign VMs (goal: the same calls, no write).
3. ``cluster_create`` (the playbook, as the user runs it) of --machines machines x --gpus vGPUs under a mutating
   budget of --rate per second with a burst of --burst (the emulator's token bucket per credential), with
   --latency-ms per call: wall <= 1.2x the budget's floor (the run's successful mutating calls / rate), the
   limit's 429s <= 5% of all calls, and the playbook succeeds.

    .venv/bin/python benchmarks/scale_bench.py [--foreign 1000] [--machines 50] [--gpus 8] [--rate 5] [--burst 50]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from goals import report  # beside this file: a script's own folder is on its path

from ansible_collections.whitesky.capvco.plugins.module_utils.cluster import run as cluster
from ansible_collections.whitesky.capvco.plugins.module_utils.machines import machine
from ansible_collections.whitesky.capvco.plugins.module_utils.platform import api
from capvco_lab.capi import MUTATING_K8S, A100x2, make_cluster, make_machine
from capvco_lab.controller import Controller, kube_with_crds
from capvco_lab.emulator import COLLECTIONS, ROOT, Emulator, wait_for
from capvco_lab.specs import cluster_spec

LOC = "be-gen-1"
MUTATING = {name for name, op in api.OPERATIONS.items() if op.method != "GET"}


def world(cloudspaces):
    return {
        "customers": [{"customer_id": "capvco-demo"}],
        "locations": [
            {
                "name": LOC,
                "prices": {"vgu": 730.0},
                "gpus": [{"id": "a100", "vendor": "NVIDIA", "model": "A100", "available_instances": 10**6}],
                "cloudspaces": [
                    {"cloudspace_id": cs, "customer_id": "capvco-demo", "name": name} for cs, name in cloudspaces
                ],
            }
        ],
    }


def start(tmp, name, seed, *extra):
    path = os.path.join(tmp, name + "-seed.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(seed, fh)
    return Emulator(os.path.join(tmp, name), extra_args=["--config", path, *extra]).start()


def calls(emu):
    ops = emu.stats()["operations"]
    total = sum(op["count"] for op in ops.values())
    writes = sum(op["count"] for name, op in ops.items() if name in MUTATING)
    return total, writes


def spec(name, cloudspace, replicas=2, gpus=1):
    """A control plane and a pool ``gpu`` of ``replicas`` x ``gpus`` A100s (the tests' spec)."""
    return cluster_spec(name, cloudspace, gpu_replicas=replicas, count=gpus)


def neighbours(tmp, foreign):
    """Row 1: the calls of one cluster's life beside ``foreign`` hand-made VMs, and beside none."""
    emu = start(tmp, "neighbours", world([("cs-empty", "empty"), ("cs-crowd", "crowd")]))
    try:
        client = emu.client(timeout=120)
        with ThreadPoolExecutor(16) as pool:  # the neighbours: VMs made by hand, some named like a cluster's
            # named as people name VMs; one in ten shares the cluster's first letters, not its name and "-"
            names = ["vm-%04d" % i if i % 10 else "webapp-%04d" % i for i in range(foreign)]
            list(
                pool.map(
                    lambda n: client.create_vm("cs-crowd", name=n, description="hand-made", vcpus=1, memory=512), names
                )
            )
        out = {}
        for where in ("empty", "crowd"):
            out[where] = life(emu, where)
        with emu.client() as check:
            left = [v["name"] for v in check.vms("cs-crowd")]
        assert sorted(left) == sorted(names), "the teardown left every neighbour as it was"
        return out
    finally:
        emu.stop()


def life(emu, where):
    """The calls of each step of cluster ``web``'s life in cloudspace ``where``, each a run of its own (a client
    of its own: a run reads every marker it needs)."""
    s = spec("web", where)
    steps = {
        "converge": lambda client: cluster.run(client, spec=s),
        "idle converge": lambda client: cluster.run(client, spec=s),
        "machine_info": lambda client: machine.info(client, cloudspace_id="cs-" + where, cluster="web"),
        "teardown": lambda client: cluster.run(client, spec=s, state="absent"),
    }
    figures = {}
    for step, run in steps.items():
        emu.reset_stats()
        with emu.client(timeout=120) as client:
            got = run(client)
        figures[step] = calls(emu)[0]
        if step == "machine_info":
            assert len(got["machines"]) == 3, got
    return figures


def reconciles(tmp, foreign):
    """Row 2: the controller's idle reconciles, each woken by a label change (the drift pass held off)."""
    emu = start(tmp, "controller", world([("cs-demo", "capvco-demo")]))
    kube = kube_with_crds(tmp)
    ctl = Controller(kube, emu, tmp, "--drift-period", "86400", "--driver-poll", "86400").start()
    try:

        def done(kind):
            return sum(
                v
                for k, v in ctl.metrics().items()
                if k.startswith('controller_runtime_reconcile_total{controller="%s"' % kind)
            )

        def quiet():
            m = ctl.metrics()
            return m.get('workqueue_depth{name="capvco"}', 1) == 0 and not m.get(
                'controller_runtime_active_workers{controller="capvco"}', 1
            )

        def idle(kind, obj, mark):
            assert wait_for(quiet, 120)
            before = done(kind)
            emu.reset_stats()
            kube.call("DELETE", "/_fake/requests")
            kube.merge(obj, {"metadata": {"labels": {"bench": mark}}})  # this write is ours, not the controller's
            if not wait_for(lambda: done(kind) > before and quiet(), 120):
                raise RuntimeError("the %s reconcile did not run: %s" % (kind, ctl.text()[-3000:]))
            total, writes = calls(emu)
            if os.environ.get("CAPVCO_BENCH_OPS"):
                print("    %s: %s" % (kind, {k: v["count"] for k, v in emu.stats()["operations"].items()}))
            ours = [r for r in kube.requests() if r["method"] in MUTATING_K8S]
            return total, writes + len(ours) - 1

        vc = make_cluster(kube)
        vm, _machine = make_machine(kube, "gpu1-md-0-abc", gpu=A100x2)
        if not wait_for(lambda: ((kube.get(vm) or {}).get("status") or {}).get("ready") is True, 120):
            raise RuntimeError("the machine never became ready: " + ctl.text()[-3000:])
        machine_idle = idle("vcomachine", vm, "1")
        cluster_idle = idle("vcocluster", vc, "1")
        cs = kube.get(vc)["status"]["cloudspaceID"]
        client = emu.client(timeout=120)
        with ThreadPoolExecutor(16) as pool:
            list(
                pool.map(
                    lambda i: client.create_vm(cs, name="hand-%04d" % i, description="hand-made", vcpus=1, memory=512),
                    range(foreign),
                )
            )
        cluster_crowd = idle("vcocluster", vc, "2")
        machine_crowd = idle("vcomachine", vm, "2")
        return machine_idle, machine_crowd, cluster_idle, cluster_crowd
    finally:
        ctl.stop()
        kube.stop()
        emu.stop()


def budget(tmp, args):
    """Row 3: cluster_create of machines x gpus under the mutating budget."""
    limit = "mutating=%s:%d" % (args.rate, args.burst)
    emu = start(tmp, "budget", world([("cs-demo", "capvco-demo")]), "--rate-limit", limit)
    try:
        emu.faults(latency_ms=args.latency_ms)
        emu.reset_stats()
        s = spec("big", "big-cs", replicas=args.machines, gpus=args.gpus)
        s["control_plane"]["replicas"] = 0
        env = dict(
            os.environ,
            **emu.env(),
            ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
            ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
        )
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        argv = [
            os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
            os.path.join(ROOT, "playbooks", "cluster_create.yml"),
        ]
        t0 = time.monotonic()
        proc = subprocess.run(argv + ["-e", json.dumps(s)], env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        stats = emu.stats()
        ok_writes = sum(
            n
            for name, op in stats["operations"].items()
            if name in MUTATING
            for status, n in op["statuses"].items()
            if int(status) < 400
        )
        total = sum(op["count"] for op in stats["operations"].values())
        limited = sum(stats["rate_limited"].values())
        if os.environ.get("CAPVCO_BENCH_OPS"):
            for name, op in sorted(stats["operations"].items()):
                print("    %-36s %s" % (name, dict(op["statuses"])))
        if proc.returncode:
            print(proc.stdout[-3000:], proc.stderr[-2000:])
        with emu.client() as client:
            reserved = sum(1 for r in client.vgpus(LOC) if r["vgpu_name"].startswith("capvco.big."))
        return {
            "wall": wall,
            "floor": ok_writes / args.rate,
            "writes": ok_writes,
            "calls": total,
            "limited": limited,
            "rc": proc.returncode,
            "reserved": reserved,
        }
    finally:
        emu.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--foreign", type=int, default=1000)
    ap.add_argument("--machines", type=int, default=50)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--rate", type=float, default=5.0)
    ap.add_argument("--burst", type=int, default=50)
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--only", choices=["neighbours", "controller", "budget"])
    args = ap.parse_args()
    goals = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "neighbours"):
            n = neighbours(tmp, args.foreign)
            print(
                "One cluster (1 control plane, 2 GPU machines) beside %d hand-made VMs, and beside none:" % args.foreign
            )
            for step in n["empty"]:
                print(
                    "  %-14s calls %4d beside none, %4d beside %d"
                    % (step, n["empty"][step], n["crowd"][step], args.foreign)
                )
            goals.append(
                (
                    "converge+idle+info+teardown: calls beside %d / beside none" % args.foreign,
                    sum(n["crowd"].values()) / sum(n["empty"].values()),
                    1.05,
                )
            )
        if args.only in (None, "controller"):
            m_idle, m_crowd, c_idle, c_crowd = reconciles(tmp, args.foreign)
            print(
                "Idle reconciles (calls, writes): VCOMachine %s, beside %d VMs %s; VCOCluster %s, beside %d VMs %s"
                % (m_idle, args.foreign, m_crowd, c_idle, args.foreign, c_crowd)
            )
            goals += [
                ("idle VCOMachine reconcile: platform calls", max(m_idle[0], m_crowd[0]), 3),
                ("idle VCOMachine reconcile: writes (platform + Kubernetes)", max(m_idle[1], m_crowd[1]), 0),
                (
                    "idle VCOCluster reconcile: calls beside %d VMs / beside none" % args.foreign,
                    c_crowd[0] / c_idle[0],
                    1.0,
                ),
                ("idle VCOCluster reconcile: writes (platform + Kubernetes)", max(c_idle[1], c_crowd[1]), 0),
            ]
        if args.only in (None, "budget"):
            b = budget(tmp, args)
            print(
                "cluster_create %d x %d vGPUs under %.0f mutating calls/s (burst %d), %.0f ms per call: %.1fs,"
                " floor %.1fs (%d mutating calls), %d calls, %d answered 429 by the limit, %d reservations, rc %d"
                % (
                    args.machines,
                    args.gpus,
                    args.rate,
                    args.burst,
                    args.latency_ms,
                    b["wall"],
                    b["floor"],
                    b["writes"],
                    b["calls"],
                    b["limited"],
                    b["reserved"],
                    b["rc"],
                )
            )
            goals += [
                ("cluster_create under the budget: wall / floor", b["wall"] / b["floor"], 1.2),
                ("cluster_create under the budget: 429s / calls", b["limited"] / max(1, b["calls"]), 0.05),
                ("cluster_create under the budget: failed runs", float(b["rc"] != 0), 0),
            ]
    return report(goals)


if __name__ == "__main__":
    sys.exit(main())
