"""Fixtures for the container tests: the local Debian image, a stub apt repository, a container per test."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

from aptrepo import FlakyRepo, build_repo
from helpers import ROOT, require, wait_for

IMAGE = "localhost/capvco-debian:bookworm"


def podman(*args, check=True):
    return subprocess.run(["podman"] + list(args), check=check, capture_output=True, text=True)


@pytest.fixture(scope="session")
def image():
    require(
        os.geteuid() == 0 and shutil.which("podman") and shutil.which("dpkg-deb"),
        "the container tests need root, podman and dpkg-deb",
    )
    subprocess.run([os.path.join(ROOT, "hack", "build-test-image.sh"), IMAGE], check=True)
    return IMAGE


@pytest.fixture(scope="session")
def repo(tmp_path_factory):
    served = FlakyRepo(build_repo(str(tmp_path_factory.mktemp("aptrepo"))))
    yield served
    served.stop()


class Container:
    def __init__(self, image, repo, tmp_path):
        self.name = "capvco-t-" + uuid.uuid4().hex[:8]
        self.repo = repo
        podman("run", "-d", "--network", "host", "--name", self.name, image, "sleep", "infinity")
        self.sh(
            "mkdir -p /etc/apt/sources.list.d /etc/apt/apt.conf.d /run/capvco && "
            "echo 'deb [trusted=yes] %s ./' > /etc/apt/sources.list.d/capvco.list && "
            'printf \'Acquire::Retries "0";\\nAcquire::http::Timeout "5";\\n\' '
            "> /etc/apt/apt.conf.d/90capvco-tests" % repo.url
        )
        self.inventory = tmp_path / "inventory.ini"
        self.inventory.write_text(
            "%s ansible_connection=containers.podman.podman ansible_python_interpreter=/usr/bin/python3\n" % self.name
        )

    def sh(self, script, check=True):
        return podman("exec", self.name, "sh", "-c", script, check=check)

    def hold_dpkg_lock(self, seconds):
        """Hold the dpkg locks (fcntl, as apt does) from a process in the container; return it once held."""
        hold = (
            "import fcntl, time\n"
            "fs = [open(p, 'w') for p in ('/var/lib/dpkg/lock-frontend', '/var/lib/dpkg/lock')]\n"
            "[fcntl.lockf(f, fcntl.LOCK_EX) for f in fs]\n"
            "open('/tmp/locked', 'w').close()\n"
            "time.sleep(%s)\n" % seconds
        )
        holder = subprocess.Popen(["podman", "exec", self.name, "python3", "-c", hold])
        if not wait_for(lambda: self.exists("/tmp/locked"), timeout=60, interval=0.1):
            holder.kill()
            raise AssertionError("the dpkg lock holder did not take the lock within 60 s")
        return holder

    def exists(self, path):
        return self.sh("test -e %s" % path, check=False).returncode == 0

    def remove(self):
        podman("rm", "-f", "-t", "0", self.name, check=False)


@pytest.fixture
def container(image, repo, tmp_path):
    repo.fail_next(0)
    repo.fail_always(False)
    c = Container(image, repo, tmp_path)
    yield c
    c.remove()
