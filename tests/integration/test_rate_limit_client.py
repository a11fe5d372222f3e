"""The client under the emulator's per-credential rate limit: one budget for every thread (the governor), paced to
the limit, few 429s, no failures.

The emulator's token buckets (``whitesky_emulator/ratelimit.py``) answer 429 with an integer ``Retry-After``; the
client's threads share one governor per credential (``module_utils/platform/governor.py``).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.whitesky.capvco.plugins.module_utils.platform import governor

CS = "cs-demo"


def create_vms(client, names, threads):
    """Create a VM per name from ``threads`` threads of one client; (seconds, {name: vm id or the error})."""
    got = {}
    lock = threading.Lock()

    def one(name):
        try:
            vm = client.create_vm(CS, name=name, description="rate limit", vcpus=1, memory=512)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            vm = exc
        with lock:
            got[name] = vm

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(one, names))
    return time.monotonic() - t0, got


def test_threads_of_one_client_share_the_mutating_budget(emulator):
    """120 VMs from 32 threads under mutating 10/s with a burst of 20: all made, within 1.25x of the time the bucket
    takes to give 100 more tokens (10 s), and few 429s: the first round (the requests sent before the first 429 came
    back, at most one per thread) and at most 5% of the calls besides."""
    rate, burst, calls, threads = 10, 20, 120, 32
    emulator.faults(rate_limit={"mutating": {"rate": rate, "burst": burst}, "read": None})
    client = emulator.client()
    assert client.transport.governor is governor.shared(client.transport.base_url, emulator.token)
    took, got = create_vms(client, ["vm-%03d" % i for i in range(calls)], threads)
    failed = {name: vm for name, vm in got.items() if isinstance(vm, Exception)}
    assert not failed, failed
    limited = emulator.stats()["rate_limited"]
    floor = (calls - burst) / rate
    print(
        "\n%d calls from %d threads, mutating %s/s burst %s: %.1fs (%.2fx of %.0fs), %d 429s (%.1f%%), client waited "
        "%.1fs in the governor, lane %r"
        % (calls, threads, rate, burst, took, took / floor, floor, limited["mutating"],
           100.0 * limited["mutating"] / calls, client.transport.retry.rate_waited,
           client.transport.governor.lanes["mutating"])
    )  # fmt: skip
    assert took <= 1.25 * floor, (took, floor)
    assert limited["read"] == 0
    assert client.transport.retry.rate_limited == limited["mutating"]
    assert limited["mutating"] <= threads + 0.05 * calls, limited
    assert len(set(got.values())) == calls  # each VM made once


def test_reads_and_mutations_of_two_clients_of_one_credential_are_paced_apart(emulator):
    """Two clients of the credential (as a module's and its lease's) share its governor; its two classes are
    independent: mutations at 10/s burst 20 from 16 threads while reads at 20/s burst 40 from 16 threads, each
    within 1.3x of its own floor, no failures, few 429s besides the first round."""
    limits = {"mutating": {"rate": 10, "burst": 20}, "read": {"rate": 20, "burst": 40}}
    emulator.faults(rate_limit=limits)
    writer, reader = emulator.client(), emulator.client()
    assert writer.transport.governor is reader.transport.governor
    vm = writer.create_vm(CS, name="read-me", description="rate limit", vcpus=1, memory=512)
    creates, reads, threads = 80, 200, 16
    out = {}

    def write():
        out["write"] = create_vms(writer, ["vm-%03d" % i for i in range(creates)], threads)

    def read():
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=threads) as pool:
            got = list(pool.map(lambda _i: reader.get_vm(CS, vm)["vm_id"], range(reads)))
        out["read"] = time.monotonic() - t0, got

    both = [threading.Thread(target=write), threading.Thread(target=read)]
    for t in both:
        t.start()
    for t in both:
        t.join(60)
    (write_took, made), (read_took, got) = out["write"], out["read"]
    limited = emulator.stats()["rate_limited"]
    # the budget's floor as the benchmark has it (calls / rate): a lane learns the limit from its first 429, then
    # ramps up from one call per Retry-After, so a short run spends part of its burst finding it
    floors = {"mutating": (creates + 1) / 10, "read": reads / 20}
    print(
        "\nmutations %.1fs (floor %.1fs), reads %.1fs (floor %.1fs), 429s %s"
        % (write_took, floors["mutating"], read_took, floors["read"], limited)
    )
    assert not [v for v in made.values() if isinstance(v, Exception)] and got == [vm] * reads
    assert write_took <= 1.3 * floors["mutating"] and read_took <= 1.3 * floors["read"]
    assert limited["mutating"] <= threads + 0.05 * creates and limited["read"] <= threads + 0.05 * reads
