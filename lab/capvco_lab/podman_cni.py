"""Podman 4.3 with its CNI network backend, private to one test: a real CNI runtime (libcni) for the plugin.

Everything podman keeps is under one directory: its storage (``--root``,
``--runroot``), its ``containers.conf`` (``CONTAINERS_CONF``, with
``network_backend = "cni"``), the network configuration directory and the plugin
directory, which holds the project's plugin as ``capvco-sriov``.  Containers run
from a tiny root file system (``--rootfs``: ``sleep`` and its libraries), so no
image and no registry are needed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

from capvco_lab.netlab import install_plugin

NETWORK = "capvco-ext"


def missing():
    """What podman's CNI path needs that this machine lacks ("" when nothing)."""
    if not shutil.which("podman"):
        return "podman"
    if os.geteuid() != 0:
        return "root"
    return ""


def make_rootfs(path):
    """A root file system holding ``/bin/sleep`` and the libraries it loads."""
    os.makedirs(path, exist_ok=True)
    for sub in ("bin", "etc", "proc", "sys", "dev", "tmp", "run"):
        os.makedirs(os.path.join(path, sub), exist_ok=True)
    sleep = shutil.which("sleep")
    shutil.copy2(sleep, os.path.join(path, "bin", "sleep"))
    ldd = subprocess.run(["ldd", sleep], capture_output=True, text=True, check=True).stdout
    for word in ldd.split():
        if word.startswith("/"):
            dest = os.path.join(path, word.lstrip("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(os.path.realpath(word), dest)
    return path


class Podman:
    """``podman`` with a private store and configuration, its CNI networks calling the project's plugin."""

    def __init__(self, base, agent_socket, network="sriov-ext", timeout_seconds=60):
        self.base = str(base)
        self.runroot = tempfile.mkdtemp(prefix="cvpm", dir="/run")  # podman wants it under 50 characters
        self.rootfs = make_rootfs(os.path.join(self.base, "rootfs"))
        self.conf_dir = os.path.join(self.base, "net.d")
        self.bin_dir = os.path.join(self.base, "cni-bin")
        for d in (self.conf_dir, self.bin_dir):
            os.makedirs(d, exist_ok=True)
        install_plugin(self.bin_dir)
        self.conf = os.path.join(self.base, "containers.conf")
        with open(self.conf, "w", encoding="utf-8") as fh:
            fh.write(
                "[containers]\n"
                'default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n'
                "[engine]\n"
                'runtime = "runc"\n'
                'events_logger = "file"\n'
                'cgroup_manager = "cgroupfs"\n'
                "[network]\n"
                'network_backend = "cni"\n'
                "network_config_dir = %s\n"
                "cni_plugin_dirs = [%s]\n" % (json.dumps(self.conf_dir), json.dumps(self.bin_dir))
            )
        with open(os.path.join(self.conf_dir, NETWORK + ".conflist"), "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "cniVersion": "1.0.0",  # podman 4.3's libcni reads 1.0.0 results only
                    "name": NETWORK,
                    "plugins": [
                        {
                            "type": "capvco-sriov",
                            "network": network,
                            "agentSocket": str(agent_socket),
                            "timeoutSeconds": timeout_seconds,
                        }
                    ],
                },
                fh,
            )

    def __call__(self, *args, check=True, timeout=120):
        argv = [
            "podman",
            "--root",
            os.path.join(self.base, "root"),
            "--runroot",
            self.runroot,
            "--tmpdir",
            os.path.join(self.base, "tmp"),
            *args,
        ]
        env = dict(os.environ, CONTAINERS_CONF=self.conf)
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode:
            raise AssertionError("%s: rc %d\n%s%s" % (" ".join(args), proc.returncode, proc.stdout, proc.stderr))
        return proc

    def run(self, name):
        """Start a container on the network; its id."""
        out = self("run", "-d", "--name", name, "--network", NETWORK, "--rootfs", self.rootfs, "/bin/sleep", "3600")
        return out.stdout.strip()

    def inspect(self, name):
        return json.loads(self("inspect", name).stdout)[0]

    def netns(self, name):
        """The container's network namespace path (podman's CNI backend names it /run/netns/cni-...)."""
        return self.inspect(name)["NetworkSettings"]["SandboxKey"]

    def interface(self, name, ifname="eth0"):
        """The container's interface as ``ip -j addr`` sees it, or None."""
        pid = self.inspect(name)["State"]["Pid"]
        if not pid:
            return None
        proc = subprocess.run(
            ["nsenter", "-t", str(pid), "-n", "ip", "-j", "addr", "show", ifname], capture_output=True, text=True
        )
        return json.loads(proc.stdout)[0] if proc.returncode == 0 and proc.stdout.strip() else None

    def ping(self, name, dst="198.51.100.1", ifname="eth0", deadline=10):
        pid = self.inspect(name)["State"]["Pid"]
        argv = ["nsenter", "-t", str(pid), "-n", "ping", "-c", "1", "-w", str(deadline), "-I", ifname, dst]
        return subprocess.run(argv, capture_output=True, check=False).returncode

    def cleanup(self):
        self("rm", "-a", "-f", "-t", "0", check=False)
        shutil.rmtree(os.path.join(self.base, "root"), ignore_errors=True)
        shutil.rmtree(self.runroot, ignore_errors=True)
