"""The first-boot user data, run for real in a container against the flaky local apt repository,
and the lifecycle playbook's wait for it."""

from __future__ import annotations

import json
import subprocess
import textwrap
import time

from ansible_collections.whitesky.capvco.plugins.module_utils import firstboot

from helpers import ROOT, run_playbook

BOOTSTRAP = "#!/bin/sh\necho joined > /tmp/bootstrapped\n"


def boot(container, packages=("nvidia-utils-550-server",), bootstrap=BOOTSTRAP, attempts=4, delay=1):
    script = firstboot.render(list(packages), bootstrap, attempts=attempts, delay=delay, lock_timeout=60)
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
