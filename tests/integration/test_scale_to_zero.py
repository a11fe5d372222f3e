"""A GPU pool scaled to zero and back through the controller, as Cluster API does it when the autoscaler sets a
MachineDeployment's replicas: its VCOMachines deleted (every reservation released, nothing billed while at zero),
then new ones (reservations by type again). The money is read from the platform's consumption report, in billed
vGPU-seconds, before, during and after."""

from __future__ import annotations

import time

from test_controller_templates import TEMPLATE_GPU, make_template

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu import billing
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from capvco_lab.capi import A100x2, make_cluster, make_machine
from capvco_lab.controller import Controller

from helpers import wait_for
from test_gpu import live

LOCATION = "be-gen-1"
VGU_SECONDS = 3600.0  # the consumption report counts vGPU unit-hours


def billed_seconds(emulator, start, end):
    """vGPU-seconds billed in [start, end] (the platform's consumption report for the location)."""
    with emulator.client() as client:
        report = client.consumption(LOCATION, start, end)
    return report["consumption"]["vgu"] * VGU_SECONDS


def ready(kube, objs):
    return all(((kube.get(o) or {}).get("status") or {}).get("ready") is True for o in objs)


def test_a_gpu_pool_goes_to_zero_and_back_through_the_controller(kube, emulator, tmp_path):
    ctl = Controller(kube, emulator, tmp_path, "--drift-period", "2").start()
    try:
        make_cluster(kube)
        template = make_template(kube, "gpu1-md-gpu", TEMPLATE_GPU)
        pool = [make_machine(kube, "gpu1-md-gpu-%d" % i, gpu=A100x2)[0] for i in range(2)]
        assert wait_for(lambda: ready(kube, pool), 90), ctl.text()[-3000:]
        at_two = time.time()
        held = live(emulator, "gpu1")
        assert len(held) == 4 and {r["gpu_id"].startswith("nvidia-a100") for r in held} == {True}
        with emulator.client() as client:
            per_vgpu_hour = billing.price_per_hour(client.prices(LOCATION))
        assert per_vgpu_hour == 1.0  # 730 a month

        # to zero: Cluster API deletes the machines; their finalizers release every reservation
        for obj in pool:
            kube.delete(obj)
        assert wait_for(lambda: all(kube.get(o) is None for o in pool), 90), ctl.text()[-3000:]
        at_zero = time.time()
        assert live(emulator, "gpu1") == [] and emulator.ledger()["accruing"] == 0
        billed_at_two = billed_seconds(emulator, at_two - 1, at_zero + 1)
        assert billed_at_two > 0
        # the template still says what one machine brings: the autoscaler can scale the pool up from zero
        assert kube.get(template)["status"]["capacity"]["nvidia.com/gpu"] == "2"
        # while at zero, nothing is billed: a drift pass or two later, the report says 0 vGPU-seconds since
        passes = ctl.metrics()
        count = "capvco_drift_pass_seconds_count"
        before = sum(v for k, v in passes.items() if k.startswith(count))
        assert wait_for(lambda: sum(v for k, v in ctl.metrics().items() if k.startswith(count)) >= before + 2, 30)
        at_zero_seconds = time.time() - at_zero
        assert billed_seconds(emulator, at_zero + 1, time.time()) == 0

        # back to two: new machines, reservations by type again
        back = [make_machine(kube, "gpu1-md-gpu-%d" % i, gpu=A100x2)[0] for i in range(2, 4)]
        assert wait_for(lambda: ready(kube, back), 90), ctl.text()[-3000:]
        held = live(emulator, "gpu1")
        assert (
            sorted(naming.decode(r["vgpu_name"]).machine for r in held) == ["gpu1-md-gpu-2"] * 2 + ["gpu1-md-gpu-3"] * 2
        )
        assert {r["gpu_id"].startswith("nvidia-a100") for r in held} == {True}
        assert wait_for(lambda: billed_seconds(emulator, time.time() - 60, time.time()) > 0, 30)
        assert emulator.ledger()["double_reservations"] == 0
        print(
            "scale to zero: %.1f vGPU-s billed over %.1f s at two machines (4 vGPUs), 0 over %.1f s at zero"
            % (billed_at_two, at_zero - at_two, at_zero_seconds)
        )
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]
