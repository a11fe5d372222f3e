#!/usr/bin/env python3
"""Controller benchmark: the controller's own cost with --clusters x --machines converged objects in place.

One run of the real controller process (``python -m capvco_controller``) against the fake Kubernetes API server
(the lab's kubefake, serving watches and Cluster API v1.14.0's CRDs) and the emulator, both seeded with that many
converged objects: Clusters, VCOClusters, Machines, VCOMachines and their VMs.  It prints, side by side, and exits 1
when a goal is missed:

- the engine's floor: the CPU seconds of an empty ``ansible-playbook`` run on localhost;
- the CPU seconds of an idle reconcile of each kind (100 of each woken by a metadata change, CPU / count);
  every cluster also has a GPU VCOMachineTemplate, whose availability the controller checks every drift period;
- the steady state: the controller's cores over --window seconds with the drift pass every --drift-period
  seconds (default 60: ten times the shipped 600, so the figure bounds the shipped cost from above).  Goal <= 0.25;
- a new Machine: from its creation to its VM's create call.  Goal <= 10 s;
- 50 new Machines at once: from their creation to the last VM create call.  Goal <= 120 s;
- the controller's peak resident memory against half of the role's shipped limit.

    .venv/bin/python benchmarks/controller_bench.py [--clusters 100] [--machines 10] [--window 120]
"""

from __future__ import annotations

import argparse
import base64
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import yaml
from goals import report  # beside this file: a script's own folder is on its path

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import markers
from capvco_lab.controller import Controller, kube_with_crds
from capvco_lab.emulator import ROOT, Emulator, wait_for

INFRA_GROUP = "infrastructure.cluster.x-k8s.io"
IV = INFRA_GROUP + "/v1beta1"
#: Cluster API's core kinds as Cluster API 1.11 and later write them (the fake serves v1.14.0's CRDs)
CV = "cluster.x-k8s.io/v1beta2"
LOCATION = "be-gen-1"
NOW = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def shipped_memory_limit():
    """The memory limit the role ships for the controller, in bytes."""
    with open(os.path.join(ROOT, "roles", "capvco_controller", "defaults", "main.yml"), encoding="utf-8") as fh:
        limit = str(yaml.safe_load(fh)["capvco_controller_resources"]["limits"]["memory"])
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    return int(limit[:-2]) * units[limit[-2:]] if limit[-2:] in units else int(limit)


def proc_cpu(pid):
    with open("/proc/%d/stat" % pid, encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss(pid):
    with open("/proc/%d/status" % pid, encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def engine_floor(workdir):
    play = os.path.join(workdir, "empty.yml")
    with open(play, "w", encoding="utf-8") as fh:
        fh.write("- hosts: localhost\n  gather_facts: false\n  tasks: []\n")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", play],
        capture_output=True,
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


class Seeder:
    def __init__(self, kube, emulator):
        self.kube, self.emulator = kube, emulator
        self.http = httpx.Client(base_url=kube.url, headers={"Authorization": "Bearer kubefake"}, timeout=30)

    def post(self, path, body):
        r = self.http.post(path, json=body)
        if r.status_code != 201:
            raise RuntimeError("%s: %s %s" % (path, r.status_code, r.text[:300]))
        return r.json()

    def status(self, path, status):
        r = self.http.patch(
            path + "/status", json={"status": status}, headers={"Content-Type": "application/merge-patch+json"}
        )
        r.raise_for_status()

    def cluster(self, name, cloudspace_id):
        ns = "default"
        c = self.post(
            "/apis/%s/namespaces/%s/clusters" % (CV, ns),
            {
                "apiVersion": CV,
                "kind": "Cluster",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "VCOCluster", "name": name}},
            },
        )
        path = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/%s/vcoclusters" % ns
        self.post(
            path,
            {
                "apiVersion": IV,
                "kind": "VCOCluster",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "finalizers": ["vcocluster.infrastructure.cluster.x-k8s.io"],
                    "ownerReferences": [
                        {"apiVersion": CV, "kind": "Cluster", "name": name, "uid": c["metadata"]["uid"]}
                    ],
                },
                "spec": {
                    "location": LOCATION,
                    "cloudspace": name + "-cs",
                    "controlPlaneEndpoint": {"host": name + ".example", "port": 6443},
                },
            },
        )
        self.status(
            path + "/" + name,
            {
                "initialization": {"provisioned": True},
                "ready": True,
                "cloudspaceID": cloudspace_id,
                "gpuOwner": name,
                "gpu": {"orphans": 0, "orphanNames": []},
                "conditions": [
                    {
                        "type": "CloudspaceReady",
                        "status": "True",
                        "reason": "Ready",
                        "message": "",
                        "lastTransitionTime": NOW,
                    },
                    {
                        "type": "GPUReservationsClean",
                        "status": "True",
                        "reason": "NoOrphans",
                        "message": "no orphaned vGPU reservations",
                        "lastTransitionTime": NOW,
                    },
                ],
            },
        )

    def machine(self, cluster, name, cloudspace_id=None, vm_id=None):
        """A Machine, its bootstrap Secret and its VCOMachine; converged (its VM recorded) when ``vm_id`` is given."""
        ns = "default"
        m = self.post(
            "/apis/%s/namespaces/%s/machines" % (CV, ns),
            {
                "apiVersion": CV,
                "kind": "Machine",
                "metadata": {"name": name, "namespace": ns, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
                "spec": {
                    "clusterName": cluster,
                    "bootstrap": {"dataSecretName": name},
                    "infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "VCOMachine", "name": name},
                },
            },
        )
        self.status(
            "/apis/%s/namespaces/%s/machines/%s" % (CV, ns, name),
            {"initialization": {"bootstrapDataSecretCreated": True}},
        )
        self.post(
            "/api/v1/namespaces/%s/secrets" % ns,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": ns},
                "data": {"value": base64.b64encode(b"#cloud-config\n").decode(), "format": "Y2xvdWQtY29uZmln"},
            },
        )
        spec = {"vcpus": 2, "memory": 2048, "image": 12}
        if vm_id is not None:
            spec["providerID"] = "whitesky://%s/%s/%s" % (LOCATION, cloudspace_id, name)
        path = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/%s/vcomachines" % ns
        self.post(
            path,
            {
                "apiVersion": IV,
                "kind": "VCOMachine",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": {"cluster.x-k8s.io/cluster-name": cluster},
                    "finalizers": ["vcomachine.infrastructure.cluster.x-k8s.io"],
                    "ownerReferences": [
                        {"apiVersion": CV, "kind": "Machine", "name": name, "uid": m["metadata"]["uid"]}
                    ],
                },
                "spec": spec,
            },
        )
        if vm_id is not None:
            self.status(
                path + "/" + name,
                {
                    "initialization": {"provisioned": True},
                    "ready": True,
                    "vmID": vm_id,
                    "addresses": [{"type": "Hostname", "address": name}],
                    "conditions": [
                        {
                            "type": "VMProvisioned",
                            "status": "True",
                            "reason": "Provisioned",
                            "message": "",
                            "lastTransitionTime": NOW,
                        }
                    ],
                },
            )

    def template(self, cluster, name):
        """A GPU VCOMachineTemplate of the cluster (2 x NVIDIA A100 a machine): the controller publishes its capacity
        and checks its image and its type's availability every drift period."""
        spec = {"vcpus": 16, "memory": 65536, "image": 12, "diskSize": 100, "gpu": {"type": "NVIDIA A100", "count": 2}}
        self.post(
            "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/default/vcomachinetemplates",
            {
                "apiVersion": IV,
                "kind": "VCOMachineTemplate",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "labels": {"cluster.x-k8s.io/cluster-name": cluster},
                },
                "spec": {"template": {"spec": spec}},
            },
        )

    def annotate(self, plural, name, value):
        r = self.http.patch(
            "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/default/%s/%s" % (plural, name),
            json={"metadata": {"annotations": {"bench.capvco/wake": value}}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        r.raise_for_status()


def seed(seeder, emulator, clusters, machines):
    """The platform's side (cloudspaces, VMs) and then Kubernetes's (every object converged)."""

    def one(i):
        name = "c%03d" % i
        with emulator.client() as client:
            cs = client.create_cloudspace(name + "-cs", LOCATION)
            marker = markers.machine_marker(name)  # the cluster's mark on its VMs (ownership by identity)
            vms = [(m, client.create_vm(cs, "%s-m%02d" % (name, m), marker, 2, 2048)) for m in range(machines)]
        seeder.cluster(name, cs)
        seeder.template(name, name + "-gpu")
        for m, vm_id in vms:
            seeder.machine(name, "%s-m%02d" % (name, m), cs, vm_id)
        return name

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, range(clusters)))


def reconciles(ctl, controller):
    return sum(
        v
        for k, v in ctl.metrics().items()
        if k.startswith('controller_runtime_reconcile_total{controller="%s"' % controller)
    )


def idle_reconcile_cpu(ctl, seeder, plural, controller, names):
    before_n, before_cpu = reconciles(ctl, controller), proc_cpu(ctl.proc.pid)
    for name in names:
        seeder.annotate(plural, name, str(time.time()))
    if not wait_for(lambda: reconciles(ctl, controller) >= before_n + len(names), 300, 0.5):
        raise RuntimeError("the %s reconciles did not all run" % controller)
    return (proc_cpu(ctl.proc.pid) - before_cpu) / len(names)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clusters", type=int, default=100)
    p.add_argument("--machines", type=int, default=10, help="machines per cluster")
    p.add_argument("--window", type=float, default=120.0, help="seconds of steady state measured")
    p.add_argument("--drift-period", type=float, default=60.0)
    args = p.parse_args(argv)
    limit = shipped_memory_limit()
    with tempfile.TemporaryDirectory(prefix="capvco-controller-bench-") as tmp:
        floor = engine_floor(tmp)
        emulator = Emulator(os.path.join(tmp, "emulator")).start()
        kube = kube_with_crds(tmp, watch_history=200000)
        try:
            seeder = Seeder(kube, emulator)
            t = time.monotonic()
            names = seed(seeder, emulator, args.clusters, args.machines)
            print("seeded %d clusters x %d machines in %.0f s" % (args.clusters, args.machines, time.monotonic() - t))
            ctl = Controller(kube, emulator, tmp, "--drift-period", str(args.drift_period)).start()
            try:
                assert wait_for(
                    lambda: (
                        sum(v for k, v in ctl.metrics().items() if k.startswith("capvco_drift_pass_seconds_count")) >= 1
                    ),
                    300,
                    0.5,
                ), ctl.text()[-3000:]
                woken = reconciles(ctl, "vcomachine")
                cpu0, t0 = proc_cpu(ctl.proc.pid), time.monotonic()
                time.sleep(args.window)  # the measurement window itself (not a wait for a condition)
                steady = (proc_cpu(ctl.proc.pid) - cpu0) / (time.monotonic() - t0)
                passes = sum(v for k, v in ctl.metrics().items() if k.startswith("capvco_drift_pass_seconds_count"))

                machines_idle = idle_reconcile_cpu(
                    ctl, seeder, "vcomachines", "vcomachine", ["%s-m00" % n for n in names[:100]]
                )
                clusters_idle = idle_reconcile_cpu(ctl, seeder, "vcoclusters", "vcocluster", names[:100])

                base = emulator.op_count("createVirtualMachine")
                t1 = time.monotonic()
                seeder.machine(names[0], "%s-new" % names[0])
                if not wait_for(lambda: emulator.op_count("createVirtualMachine") > base, 60, 0.05):
                    raise RuntimeError("the new Machine's VM was never created: " + ctl.text()[-3000:])
                first = time.monotonic() - t1

                base = emulator.op_count("createVirtualMachine")
                t2 = time.monotonic()
                for i in range(50):
                    seeder.machine(names[1 + i % (len(names) - 1)], "%s-b%02d" % (names[1 + i % (len(names) - 1)], i))
                if not wait_for(lambda: emulator.op_count("createVirtualMachine") >= base + 50, 300, 0.1):
                    raise RuntimeError("50 new Machines: not all VMs created: " + ctl.text()[-3000:])
                fifty = time.monotonic() - t2
                peak = peak_rss(ctl.proc.pid)
            finally:
                ctl.stop()
        finally:
            kube.stop()
            emulator.stop()
    objects = args.clusters * args.machines
    print()
    print("%-60s %10s" % ("figure", "measured"))
    print("%-60s %10.2f" % ("engine floor: an empty ansible-playbook (CPU s)", floor))
    print("%-60s %10.4f" % ("idle VCOMachine reconcile (CPU s)", machines_idle))
    print("%-60s %10.4f" % ("idle VCOCluster reconcile (CPU s)", clusters_idle))
    print("%-60s %10.1f" % ("engine floor / idle VCOMachine reconcile", floor / max(machines_idle, 1e-6)))
    print("%-60s %10.4f" % ("steady state, %d machines in %d clusters (cores)" % (objects, args.clusters), steady))
    print("%-60s %10.0f" % ("drift passes in the run (period %.0f s)" % args.drift_period, passes))
    print("%-60s %10.0f" % ("VCOMachine reconciles before the window (the start)", woken))
    print("%-60s %10.2f" % ("new Machine -> VM create call (s)", first))
    print("%-60s %10.2f" % ("50 new Machines -> last VM create call (s)", fifty))
    print("%-60s %10.0f" % ("peak resident memory (MiB)", peak / 2**20))
    print("%-60s %10.0f" % ("shipped memory limit (MiB)", limit / 2**20))
    print()
    return report(
        [
            ("steady-state cores, %d machines in %d clusters" % (objects, args.clusters), steady, 0.25),
            ("new Machine -> VM create call (s)", first, 10.0),
            ("50 new Machines -> last VM create call (s)", fifty, 120.0),
            ("peak memory / half the shipped limit", peak / (limit / 2), 1.0),
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
