"""A one-machine SR-IOV lab in network namespaces (TEST-NET addresses only).

- ``<p>ext``: the external network's host, a bridge ``br0`` with 198.51.100.1/24
  (the emulator's network 101 ``sriov-ext`` is 198.51.100.0/24);
- ``<p>node``: the node VM's netns; the emulator's NIC hook hot-plugs a veth
  with the platform's MAC into it, peered into ``br0``;
- ``<p>podN``: pods, each with a primary ``eth0`` (192.0.1.0/24 through a bridge
  in the node netns) that holds the default route;
- the emulator (loopback), and the node agent in the root netns, working in the
  node's netns through ``--host-netns``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from capvco_lab.emulator import CUSTOMER, ROOT, Emulator, wait_for

#: The CNI plugin's launcher (its shebang names the system python3) and its body, and the script that installs them
#: in a CNI bin directory (the DaemonSet's init container runs it too).
LAUNCHER = os.path.join(ROOT, "node", "capvco_sriov", "launcher.py")
PLUGIN = os.path.join(ROOT, "node", "capvco_sriov", "shim.py")
INSTALL = os.path.join(ROOT, "node", "install-cni-plugin.sh")
HOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hotplug.sh")
NETNS_DIR = "/var/run/netns"


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


@functools.lru_cache(maxsize=1)
def missing():
    """What this machine lacks for the lab, as words ("root", "ping", ...); empty when it can run."""
    out = [] if os.geteuid() == 0 else ["root"]
    out += [tool for tool in ("ip", "ping") if shutil.which(tool) is None]
    if not out:  # root with iproute2 may still be refused network namespaces (an unprivileged container)
        probe = "cvprobe%d" % os.getpid()
        made = sh("ip", "netns", "add", probe, check=False)
        if made.returncode != 0:
            out.append("network namespaces (ip netns add: %s)" % made.stderr.strip())
        else:
            sh("ip", "netns", "del", probe, check=False)
    return out


def install_plugin(bin_dir):
    """The plugin installed in ``bin_dir`` as a node has it; the path a runtime runs (``bin_dir/capvco-sriov``)."""
    subprocess.run(["sh", INSTALL, LAUNCHER, PLUGIN, str(bin_dir)], check=True)
    return os.path.join(str(bin_dir), "capvco-sriov")


class Lab:
    """The lab; with ``emu`` (a running emulator) and ``vm_name``, the node is that VM (the demo does that)."""

    def __init__(
        self, tmp_path, emu=None, vm_name=None, cloudspace_id="cs-demo", location="be-gen-1", agent_image=None
    ):
        self.tmp = tmp_path
        self.agent_image = agent_image  # run the agent from this image (podman, as the DaemonSet would)
        self.external_emu = emu
        self.vm_name = vm_name
        self.cloudspace_id = cloudspace_id
        self.location = location
        self.prefix = "cv%d" % (os.getpid() % 100000)
        self.ext = self.prefix + "ext"
        self.node = self.prefix + "node"
        self.pods = []
        self.socket = str(tmp_path / "agent.sock")
        self.ledger = str(tmp_path / "ledger")
        self.plugin = install_plugin(tmp_path / "cni-bin")
        self.agent = None
        self.agent_log = None
        self.emu = None
        self.vm_id = None

    # -- topology ------------------------------------------------------------
    def up(self, grace=1.0, interval=0.2, wait_timeout=5.0):
        for ns in (self.ext, self.node):
            sh("ip", "netns", "add", ns)
        sh("ip", "-n", self.ext, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.ext, "addr", "add", "198.51.100.1/24", "dev", "br0")
        sh("ip", "-n", self.ext, "link", "set", "br0", "up")
        sh("ip", "-n", self.ext, "link", "set", "lo", "up")
        sh("ip", "-n", self.node, "link", "add", "pbr", "type", "bridge")
        sh("ip", "-n", self.node, "addr", "add", "192.0.2.1/24", "dev", "pbr")
        sh("ip", "-n", self.node, "link", "set", "pbr", "up")
        hook = "EXT_NS=%s NODE_NS=%s %s" % (self.ext, self.node, HOOK)
        if self.external_emu:
            self.emu = self.external_emu
        else:
            self.emu = Emulator(self.tmp / "emu").start()
        self.emu.admin("POST", "/hooks", {"nic_attach": hook, "nic_detach": hook})
        with self.emu.client() as client:
            if self.vm_name:
                self.vm_id = [v["vm_id"] for v in client.vms(self.cloudspace_id) if v["name"] == self.vm_name][0]
            else:
                self.vm_id = client.create_vm(
                    self.cloudspace_id, name=self.node, description="node", vcpus=4, memory=8192
                )
        self.agent_args = [
            "--grace-period",
            str(grace),
            "--reclaim-interval",
            str(interval),
            "--wait-timeout",
            str(wait_timeout),
        ]
        self.start_agent()
        return self

    def start_agent(self):
        cred = self.tmp / "credential"
        fd = os.open(cred, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # a Secret's file: root only
        with os.fdopen(fd, "w") as fh:
            fh.write(self.emu.token + "\n")
        if self.agent_log:
            self.agent_log.close()
        self.agent_log = open(self.tmp / "agent.log", "a", encoding="utf-8")  # noqa: SIM115 (closed in down())
        args = [
            "--api-url",
            self.emu.url,
            "--customer-id",
            CUSTOMER,
            "--credential-file",
            str(cred),
            "--location",
            self.location,
            "--cloudspace-id",
            self.cloudspace_id,
            "--vm-id",
            str(self.vm_id),
            "--socket",
            self.socket,
            "--ledger-dir",
            self.ledger,
            "--host-netns",
            os.path.join(NETNS_DIR, self.node),
        ] + self.agent_args
        if self.agent_image:
            # the DaemonSet's shape: host network, NET_ADMIN and SYS_ADMIN only, netns HostToContainer, a read-only
            # root (readOnlyRootFilesystem; no tmpfs of podman's own: the manifest mounts none)
            argv = ["podman", "run", "--rm", "--name", self.prefix + "-agent", "--network", "host"]
            argv += ["--read-only", "--read-only-tmpfs=false"]
            argv += ["--cap-drop", "ALL", "--cap-add", "NET_ADMIN", "--cap-add", "SYS_ADMIN"]
            argv += ["-v", "%s:%s" % (self.tmp, self.tmp), "-v", "%s:%s:rslave" % (NETNS_DIR, NETNS_DIR)]
            argv += [self.agent_image]
        else:
            argv = [sys.executable, "-m", "capvco_sriov.agent"]
        self.agent = subprocess.Popen(
            argv + args, env=dict(os.environ), stdout=subprocess.PIPE, stderr=self.agent_log, text=True
        )
        line = self.agent.stdout.readline()
        assert "serving" in line, (self.tmp / "agent.log").read_text(encoding="utf-8")

    def kill_agent(self):
        if self.agent_image:
            sh("podman", "kill", "-s", "KILL", self.prefix + "-agent", check=False)
        self.agent.send_signal(signal.SIGKILL)
        self.agent.wait()

    def add_pod(self, i):
        name = "%spod%d" % (self.prefix, i)
        sh("ip", "netns", "add", name)
        host_if = "%sp%d" % (self.prefix[-6:], i)
        sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", name)
        sh("ip", "link", "set", host_if, "netns", self.node)
        sh("ip", "-n", self.node, "link", "set", host_if, "master", "pbr", "up")
        sh("ip", "-n", name, "addr", "add", "192.0.2.%d/24" % (10 + i), "dev", "eth0")
        sh("ip", "-n", name, "link", "set", "eth0", "up")
        sh("ip", "-n", name, "link", "set", "lo", "up")
        sh("ip", "-n", name, "route", "add", "default", "via", "192.0.2.1", "dev", "eth0")
        self.pods.append(name)
        return name

    def del_pod(self, name):
        sh("ip", "netns", "del", name, check=False)

    def down(self):
        if self.agent_image:
            sh("podman", "rm", "-f", "-t", "0", self.prefix + "-agent", check=False)
        if self.agent and self.agent.poll() is None:
            self.agent.terminate()
            self.agent.wait(10)
        if self.agent_log:
            self.agent_log.close()
        if self.emu and not self.external_emu:
            self.emu.stop()
        elif self.emu:
            self.emu.admin("POST", "/hooks", {"nic_attach": None, "nic_detach": None})
        for ns in self.pods + [self.node, self.ext]:
            sh("ip", "netns", "del", ns, check=False)

    # -- CNI -----------------------------------------------------------------
    def cni(self, command, pod=None, container="c0", ifname="net1", conf=None, raw=None, uid=None, env=None):
        config = {
            "cniVersion": "1.1.0",
            "name": "sriov-ext",
            "type": "capvco-sriov",
            "network": "sriov-ext",
            "agentSocket": self.socket,
        }
        config.update(conf or {})
        full = {
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": container,
            "CNI_IFNAME": ifname,
            "CNI_NETNS": os.path.join(NETNS_DIR, pod) if pod else "",
            "CNI_PATH": "/opt/cni/bin",
            "CNI_ARGS": "K8S_POD_UID=%s" % (uid or container),
            "PATH": os.environ.get("PATH", ""),
            "CAPVCO_SRIOV_SOCKET": self.socket,
        }
        full.update(env or {})
        proc = subprocess.run(
            [self.plugin],
            input=raw if raw is not None else json.dumps(config),
            env=full,
            capture_output=True,
            text=True,
            timeout=300,
        )
        out = json.loads(proc.stdout) if proc.stdout.strip() else None
        return proc.returncode, out

    def platform_nics(self):
        with self.emu.client() as client:
            return client.nics(self.cloudspace_id, self.vm_id)

    def ping(self, pod, dst="198.51.100.1", dev="net1", deadline=10):
        """0 once one echo comes back; ping keeps sending until then or until the deadline (ARP on a loaded host)."""
        argv = ("ip", "netns", "exec", pod, "ping", "-c", "1", "-w", str(deadline), "-I", dev, dst)
        return sh(*argv, check=False).returncode

    def ledger_entries(self):
        return sorted(f for f in os.listdir(self.ledger) if f.endswith(".json")) if os.path.isdir(self.ledger) else []

    def wait_nics(self, n, timeout=10):
        return wait_for(lambda: len(self.platform_nics()) == n, timeout=timeout, interval=0.1)


class Fleet:
    """Many nodes on one external network, for the scale benchmark: one emulator, one external host (``<p>ext``, a
    bridge ``br0`` with 198.51.100.1/24), and per node a :class:`Lab` of its own (``nodes[i]``): a VM in the
    cloudspace named like the node's netns (``<p>n<i>node``; the hot-plug hook puts each NIC into the netns named
    like its VM), the node netns as :meth:`Lab.up` makes it, and one agent process with its own socket and ledger,
    all with the one credential (the emulator's token).  Each node's ``add_pod`` and ``cni`` are :class:`Lab`'s.
    """

    def __init__(self, tmp_path, count, prefix=None):
        self.tmp = tmp_path
        self.count = count
        self.prefix = prefix or "cf%d" % (os.getpid() % 100000)
        self.ext = self.prefix + "ext"
        self.emu = None
        self.nodes = []
        self.made = []  # the netns made so far (pods are the nodes')

    def up(self, grace=600.0, interval=600.0, wait_timeout=5.0, workers=8):
        sh("ip", "netns", "add", self.ext)
        self.made.append(self.ext)
        sh("ip", "-n", self.ext, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.ext, "addr", "add", "198.51.100.1/24", "dev", "br0")
        sh("ip", "-n", self.ext, "link", "set", "br0", "up")
        sh("ip", "-n", self.ext, "link", "set", "lo", "up")
        self.emu = Emulator(self.tmp / "emu").start()
        hook = "EXT_NS=%s %s" % (self.ext, HOOK)  # no NODE_NS: the NIC goes to the netns named like its VM
        self.emu.admin("POST", "/hooks", {"nic_attach": hook, "nic_detach": hook})
        for i in range(self.count):
            tmp = self.tmp / ("n%d" % i)
            tmp.mkdir(parents=True, exist_ok=True)
            node = Lab(tmp, emu=self.emu)
            node.emu = self.emu
            node.prefix = "%sn%d" % (self.prefix, i)
            node.ext = self.ext
            node.node = node.prefix + "node"
            self.nodes.append(node)
            sh("ip", "netns", "add", node.node)
            self.made.append(node.node)
            sh("ip", "-n", node.node, "link", "add", "pbr", "type", "bridge")
            sh("ip", "-n", node.node, "addr", "add", "192.0.2.1/24", "dev", "pbr")
            sh("ip", "-n", node.node, "link", "set", "pbr", "up")
            node.agent_args = ["--grace-period", str(grace), "--reclaim-interval", str(interval)]
            node.agent_args += ["--wait-timeout", str(wait_timeout)]
        with self.emu.client() as client:
            for node in self.nodes:
                node.vm_id = client.create_vm(
                    node.cloudspace_id, name=node.node, description="node", vcpus=4, memory=8192
                )
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda node: node.start_agent(), self.nodes))
        return self

    def add_pods(self, per_node, workers=8):
        """``per_node`` pods on every node (made a few at a time); ``[[pod netns name, ...] per node]``."""
        with ThreadPoolExecutor(workers) as pool:
            return [list(pool.map(node.add_pod, range(per_node))) for node in self.nodes]

    def down(self):
        """Stop every agent and the emulator, and delete every netns made (safe after a partial ``up``)."""
        agents = [node.agent for node in self.nodes if node.agent and node.agent.poll() is None]
        for agent in agents:
            agent.terminate()
        for agent in agents:
            try:
                agent.wait(10)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
        for node in self.nodes:
            if node.agent and node.agent.stdout:
                node.agent.stdout.close()
            if node.agent_log:
                node.agent_log.close()
        if self.emu:
            self.emu.stop()
        listed = sh("ip", "netns", "list", check=False).stdout.split()
        stray = [ns for ns in listed if ns.startswith((self.prefix + "n", self.prefix + "ext"))]  # a pod half made
        for ns in dict.fromkeys([pod for node in self.nodes for pod in node.pods] + self.made[::-1] + stray):
            sh("ip", "netns", "del", ns, check=False)


def monotonic():
    return time.monotonic()
