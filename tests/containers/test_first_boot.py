"""The first-boot user data, run for real in a container against the flaky local apt repository,
and the lifecycle playbook's wait for it."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time

from ansible_collections.whitesky.capvco.plugins.module_utils.firstboot import render as firstboot

from helpers import ROOT, run_playbook

BOOTSTRAP = "#!/bin/sh\necho joined > /tmp/bootstrapped\n"


def boot(container, packages=("nvidia-utils-550-server",), bootstrap=BOOTSTRAP, attempts=4, delay=1, gpu=None):
    script = firstboot.render(
        list(packages), bootstrap, attempts=attempts, delay=delay, lock_timeout=60, gpu_driver=gpu
    )
    subprocess.run(
        ["podman", "exec", "-i", container.name, "sh", "-c", "cat > /tmp/first-boot.sh"],
        input=script,
        text=True,
        check=True,
    )
    proc = container.sh("sh /tmp/first-boot.sh", check=False)
    status = json.loads(container.sh("cat /var/lib/capvco/first-boot.status").stdout)
    return proc, status


def test_ready_after_packages_and_bootstrap(container):
    proc, status = boot(container)
    assert proc.returncode == 0 and "CAPVCO-FIRST-BOOT: READY" in proc.stdout
    assert status["state"] == "ready" and status["step"] == "done"
    assert container.exists("/var/lib/capvco/first-boot.ready") and container.exists("/tmp/bootstrapped")
    assert "nvidia-utils-550-server" in container.sh("dpkg -l nvidia-utils-550-server").stdout


def test_transient_failures_are_retried_with_backoff(container):
    container.repo.fail_next(2)
    proc, status = boot(container)
    assert proc.returncode == 0 and status["state"] == "ready"
    log = container.sh("cat /var/lib/capvco/first-boot.log").stdout
    assert "attempt 1 of 4 failed; retrying in 1s" in log


def test_permanent_failure_fails_loudly_with_the_log_tail(container):
    container.repo.fail_always()
    try:
        proc, status = boot(container, attempts=2)
    finally:
        container.repo.fail_always(False)
    assert proc.returncode == 1
    assert "CAPVCO-FIRST-BOOT: FAILED at apt-update: apt-get update failed 2 time(s)" in proc.stdout
    assert status["state"] == "failed" and status["step"] == "apt-update"
    assert "503" in status["log_tail"] and "giving up after 2 attempt(s)" in status["log_tail"]
    assert container.exists("/var/lib/capvco/first-boot.failed")
    assert not container.exists("/var/lib/capvco/first-boot.ready") and not container.exists("/tmp/bootstrapped")


def test_a_held_dpkg_lock_is_waited_for(container):
    holder = container.hold_dpkg_lock(6)
    t0 = time.monotonic()
    proc, status = boot(container)
    holder.wait()
    assert status["state"] == "ready", status
    assert time.monotonic() - t0 >= 3


def test_a_failing_bootstrap_fails_the_first_boot(container):
    proc, status = boot(container, packages=(), bootstrap="#!/bin/sh\necho kubeadm join failed >&2\nexit 3\n")
    assert proc.returncode == 1 and status["state"] == "failed" and status["step"] == "bootstrap"
    assert "exited 3" in status["reason"] and "kubeadm join failed" in status["log_tail"]


WAIT = (
    textwrap.dedent("""\
    - name: Wait for the first boot
      hosts: all
      gather_facts: false
      tasks:
        - name: Wait
          ansible.builtin.import_tasks: %s/playbooks/tasks/wait_first_boot.yml
    """)
    % ROOT
)


def wait(container, tmp_path, deadline):
    play = tmp_path / "wait.yml"
    play.write_text(WAIT)
    t0 = time.monotonic()
    rc, out, data = run_playbook(
        str(play), extra_vars={"capvco_deadline": deadline}, inventory=str(container.inventory)
    )
    return rc, out, time.monotonic() - t0


def test_the_playbook_waits_and_prints_the_reason_instead_of_hanging(container, tmp_path):
    rc, out, took = wait(container, tmp_path, 3)
    assert rc != 0 and "did not report ready or failed within 3 s" in out
    container.repo.fail_always()
    try:
        boot(container, attempts=1)
    finally:
        container.repo.fail_always(False)
    rc, out, took = wait(container, tmp_path, 30)
    assert rc != 0 and "the first boot failed at apt-update: apt-get update failed 1 time(s)" in out
    boot(container)
    rc, out, took = wait(container, tmp_path, 30)
    assert rc == 0, out[-2000:]


# What anything on the guest can write into the status file: the playbook's message is scrubbed and bounded, and a
# document that is not a status is said to be invalid, never a crash of the template.
HOSTILE = (
    (
        {"state": "failed", "step": "x", "reason": "Bearer eyJhbGciOi.eyJzdWIi.c2lnbmF0dXJl \x1b[2J" + "y" * 60000},
        "the first boot failed at x:",
    ),
    ({"state": "ready", "nvidia_smi": 5}, "the first boot status is invalid: not a first-boot status: nvidia_smi"),
    ({"state": "failed", "note": "https://user:hunter2@repo.example/"}, "unknown field(s) 'note'"),
)


def test_the_playbook_reads_a_hostile_status_file_as_hostile(container, tmp_path):
    for doc, says in HOSTILE:
        subprocess.run(
            [
                "podman",
                "exec",
                "-i",
                container.name,
                "sh",
                "-c",
                "mkdir -p /var/lib/capvco && cat > /var/lib/capvco/first-boot.status",
            ],
            input=json.dumps(doc),
            text=True,
            check=True,
        )
        rc, out, _took = wait(container, tmp_path, 10)
        assert rc != 0 and says in out, out[-3000:]
        assert "eyJzdWIi" not in out and "hunter2" not in out and "\x1b" not in out and "y" * 5000 not in out


# -- the gpu-driver step: the pinned driver from the flaky repository's stub packages, verified by the stub
# nvidia-smi (aptrepo.py), in the first boot of a GPU machine (count 2 as the stub reports by default)
A100x2 = {"version": "550", "count": 2, "wait": 0}


def test_the_gpu_driver_is_installed_pinned_held_and_verified_before_the_bootstrap(container):
    proc, status = boot(container, packages=(), gpu=A100x2)
    assert proc.returncode == 0 and status["state"] == "ready", status
    assert status["gpu_driver_version"] == "550.127.05" and container.exists("/tmp/bootstrapped")
    held = container.sh("apt-mark showhold").stdout.split()
    assert held == ["nvidia-headless-550-server", "nvidia-utils-550-server"]
    assert "blacklist nouveau" in container.sh("cat /etc/modprobe.d/blacklist-nouveau.conf").stdout
    assert "linux-headers-%s" % os.uname().release in container.sh("dpkg -l 'linux-headers-*'").stdout
    # a full version is a pin: the version apt installs is that one
    proc, status = boot(container, packages=(), gpu=dict(A100x2, version="550.127.05"))
    assert status["state"] == "ready" and status["gpu_driver_version"] == "550.127.05"


def test_gpu_driver_transient_repository_failures_are_retried(container):
    container.repo.fail_next(3)
    failed_before = container.repo.failed
    proc, status = boot(container, packages=(), gpu=A100x2)
    assert status["state"] == "ready", status
    assert container.repo.failed - failed_before == 3
    assert (
        "attempt 1 of 4 failed; retrying in 1s: gpu_driver_apt"
        in container.sh("cat /var/lib/capvco/first-boot.log").stdout
    )


def test_gpu_driver_permanent_failure_is_loud_with_the_step_and_apts_lines(container):
    container.repo.fail_always()
    try:
        proc, status = boot(container, packages=(), gpu=A100x2, attempts=2)
    finally:
        container.repo.fail_always(False)
    assert proc.returncode == 1 and status["state"] == "failed" and status["step"] == "gpu-driver"
    assert "CAPVCO-FIRST-BOOT: FAILED at gpu-driver: installing the NVIDIA driver 550" in proc.stdout
    assert "failed after 2 attempt(s); apt said:" in status["reason"] and "503" in status["reason"], status
    assert "nvidia-headless-550-server" in status["reason"] and "503" in status["log_tail"]
    assert not container.exists("/tmp/bootstrapped"), "no bootstrap on a GPU machine without its driver"
    # a pin the repository does not have fails the same way, naming it
    proc, status = boot(container, packages=(), gpu=dict(A100x2, version="550.54.14"), attempts=1)
    assert status["step"] == "gpu-driver" and "550.54.14" in status["reason"], status


def test_gpu_driver_waits_out_a_held_dpkg_lock(container):
    holder = container.hold_dpkg_lock(6)
    t0 = time.monotonic()
    proc, status = boot(container, packages=(), gpu=A100x2)
    holder.wait()
    assert status["state"] == "ready", status
    assert time.monotonic() - t0 >= 3


def test_a_wrong_driver_version_is_caught_by_the_verification(container):
    container.sh("apt-get update -qq && apt-get install -y -qq nvidia-headless-550-server >/dev/null")
    container.sh("sed -i 's/^VERSION=.*/VERSION=535.183.01/' /etc/nvidia-stub.conf")  # what the driver reports
    proc, status = boot(container, packages=(), gpu=A100x2)
    assert status["state"] == "failed" and status["step"] == "gpu-driver", status
    assert "driver version 535.183.01 does not match the pin 550" in status["reason"]
    assert "535.183.01, NVIDIA A100-SXM4-40GB" in status["reason"], "what nvidia-smi printed"
    assert not container.exists("/tmp/bootstrapped")
    # too few GPUs, after waiting for them
    container.sh("sed -i 's/^VERSION=.*/VERSION=550.127.05/; s/^COUNT=.*/COUNT=1/' /etc/nvidia-stub.conf")
    proc, status = boot(container, packages=(), gpu=dict(A100x2, wait=1))
    assert "nvidia-smi sees 1 GPU(s), at least 2 expected (waited 1s)" in status["reason"], status


def test_an_empty_driver_version_only_verifies(container):
    requests = container.repo.requests
    proc, status = boot(container, packages=(), gpu=dict(A100x2, version=""))
    assert status["state"] == "failed" and status["step"] == "gpu-driver", status
    assert "cannot run nvidia-smi: no NVIDIA driver is installed" in status["reason"]
    assert container.repo.requests == requests, "nothing was fetched: an empty version installs nothing"
    container.sh("apt-get update -qq && apt-get install -y -qq nvidia-headless-550-server >/dev/null")
    requests = container.repo.requests
    proc, status = boot(container, packages=(), gpu=dict(A100x2, version=""))
    assert status["state"] == "ready" and status["gpu_driver_version"] == "550.127.05", status
    assert container.repo.requests == requests and container.sh("apt-mark showhold").stdout.strip() == ""
