"""roles/gpu_driver with real apt in a container, against a local flaky repository of stub packages."""

from __future__ import annotations

import os
import time

from helpers import ROOT, run_playbook

PLAYBOOK = os.path.join(ROOT, "tests", "containers", "gpu_driver.yml")
MARKER = "/run/capvco/gpu-driver.ready"


def role(container, check=False, **variables):
    base = {
        "gpu_driver_version": "550",
        "gpu_driver_expected_count": 2,
        "gpu_driver_reboot": False,
        "gpu_driver_retries": 4,
        "gpu_driver_delay": 1,
        "gpu_driver_lock_timeout": 60,
        "gpu_driver_wait": 0,
    }
    base.update(variables)
    rc, out, data = run_playbook(PLAYBOOK, extra_vars=base, inventory=str(container.inventory), check=check)
    stats = data["stats"][container.name] if data else {}
    return rc, out, data, stats


def failure_message(data):
    msgs = []
    for play in data["plays"]:
        for task in play["tasks"]:
            for res in task["hosts"].values():
                if res.get("failed") and not res.get("skipped"):
                    msgs.append(res.get("msg", ""))
    return msgs[-1] if msgs else ""


def test_installs_pins_holds_verifies_and_is_idempotent(container):
    rc, out, data, stats = role(container)
    assert rc == 0, out[-3000:]
    assert container.exists(MARKER) and container.exists("/usr/bin/nvidia-smi")
    assert "blacklist nouveau" in container.sh("cat /etc/modprobe.d/blacklist-nouveau.conf").stdout
    held = container.sh("apt-mark showhold").stdout.split()
    assert held == ["nvidia-headless-550-server", "nvidia-utils-550-server"]
    assert "linux-headers-%s" % os.uname().release in container.sh("dpkg -l 'linux-headers-*'").stdout
    rc, out, data, stats = role(container)
    assert rc == 0 and stats["changed"] == 0, stats


def test_transient_repository_failures_are_retried(container):
    container.repo.fail_next(3)
    failed_before = container.repo.failed
    rc, out, data, stats = role(container)
    assert rc == 0, out[-3000:]
    assert container.repo.failed - failed_before == 3
    assert container.exists(MARKER)


def test_a_permanently_failing_repository_fails_loudly(container):
    container.repo.fail_always()
    rc, out, data, stats = role(container, gpu_driver_retries=3)
    container.repo.fail_always(False)
    assert rc != 0
    msg = failure_message(data)
    assert "nvidia-headless-550-server" in msg and "after 3 attempt(s)" in msg, msg
    assert "503" in msg or "Failed" in msg, msg
    assert not container.exists(MARKER)


def test_a_held_dpkg_lock_is_waited_for(container):
    holder = container.hold_dpkg_lock(8)
    t0 = time.monotonic()
    rc, out, data, stats = role(container)
    waited = time.monotonic() - t0
    holder.wait()
    assert rc == 0, out[-3000:]
    assert waited >= 5, waited
    assert container.exists(MARKER)


def test_empty_version_installs_nothing_and_still_verifies(container):
    requests = container.repo.requests
    rc, out, data, stats = role(container, gpu_driver_version="")
    assert rc != 0, "no nvidia-smi on the image: verification ran and failed"
    assert "cannot run nvidia-smi" in failure_message(data)
    assert container.repo.requests == requests, "nothing was fetched"
    # a baked-in driver: verification passes, still with no install
    container.sh("apt-get update -qq && apt-get install -y -qq nvidia-headless-550-server >/dev/null")
    requests = container.repo.requests
    rc, out, data, stats = role(container, gpu_driver_version="")
    assert rc == 0, out[-3000:]
    assert container.repo.requests == requests and container.exists(MARKER)
    assert container.sh("apt-mark showhold").stdout.strip() == ""


def test_wrong_version_or_too_few_gpus_fail_loudly_and_leave_no_marker(container):
    assert role(container)[0] == 0 and container.exists(MARKER)
    container.sh("sed -i 's/^VERSION=.*/VERSION=535.183.01/' /etc/nvidia-stub.conf")
    rc, out, data, stats = role(container)
    msg = failure_message(data)
    assert rc != 0 and "driver version 535.183.01 does not match the pin 550" in msg, msg
    assert "535.183.01, NVIDIA A100-SXM4-40GB" in msg, "what nvidia-smi printed is in the message"
    assert not container.exists(MARKER), "the stale marker is gone"
    container.sh("sed -i 's/^VERSION=.*/VERSION=550.127.05/; s/^COUNT=.*/COUNT=1/' /etc/nvidia-stub.conf")
    rc, out, data, stats = role(container)
    assert rc != 0 and "sees 1 GPU(s), at least 2 expected" in failure_message(data)
    assert not container.exists(MARKER)
    container.sh("sed -i 's/^FAIL=.*/FAIL=1/' /etc/nvidia-stub.conf")
    rc, out, data, stats = role(container)
    assert rc != 0 and "couldn't communicate with the NVIDIA driver" in failure_message(data)


def test_check_mode_says_what_the_install_would_change_and_changes_nothing(container):
    rc, out, data, stats = role(container, check=True)
    install = [
        r
        for play in data["plays"]
        for t in play["tasks"]
        if "Install the driver branch" in t["task"]["name"]
        for r in t["hosts"].values()
    ]
    assert rc == 0 and install and install[0]["changed"] is True, out[-2000:]
    assert not container.exists("/usr/bin/nvidia-smi")
    assert not container.exists("/etc/modprobe.d/blacklist-nouveau.conf")
    assert container.sh("apt-mark showhold").stdout.strip() == ""
    assert role(container)[0] == 0
    rc, out, data, stats = role(container, check=True)
    assert rc == 0 and stats["changed"] == 0, stats
