"""The emulator as a process on a free loopback port, with its admin API (tests, benchmarks, chaos, the demo)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx

from whitesky_emulator.world import DEMO_CUSTOMER as CUSTOMER
from whitesky_emulator.world import DEMO_TOKEN as TOKEN

#: The repository this package lives in (it is a development tool, never shipped).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Where ``make link`` puts the collection for Ansible and Python: ansible_collections/whitesky/capvco -> ROOT.
COLLECTIONS = os.path.join(ROOT, ".build", "collections")


def wait_for(predicate, timeout=10.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


class ServerProcess:
    """A server run as a child process that prints its base URL on its first line once it is ready."""

    what = "server"

    def __init__(self):
        self.proc = None
        self.url = None

    def argv(self):
        raise NotImplementedError

    def start(self):
        self.proc = subprocess.Popen(self.argv(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http"):
            self.proc.kill()
            raise RuntimeError("%s did not start: %r" % (self.what, line))
        self.url = line
        self.started()
        return self

    def started(self):
        """Called once the URL is known."""

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)


class Emulator(ServerProcess):
    """A real emulator process on a free loopback port."""

    what = "emulator"

    def __init__(self, state_dir, token=TOKEN, extra_args=()):
        super().__init__()
        self.state_dir = str(state_dir)
        self.token = token
        self.extra_args = list(extra_args)

    @classmethod
    def running(cls, url, token=TOKEN):
        """An emulator that another process started, by its API URL (``.../api/1``)."""
        emu = cls(None, token)
        emu.url = url
        emu.started()
        return emu

    def argv(self):
        return [
            sys.executable,
            "-m",
            "whitesky_emulator",
            "--port",
            "0",
            "--state-dir",
            self.state_dir,
            "--token",
            self.token,
            *self.extra_args,
        ]

    def started(self):
        self.admin_url = self.url[: -len("/api/1")] + "/_emulator"

    def admin(self, method, path, body=None):
        resp = httpx.request(method, self.admin_url + path, json=body, timeout=30)
        resp.raise_for_status()
        return resp.json()

    def faults(self, **cfg):
        return self.admin("POST", "/faults", cfg)

    def stats(self):
        return self.admin("GET", "/stats")

    def reset_stats(self):
        return self.admin("DELETE", "/stats")

    def ledger(self):
        return self.admin("GET", "/ledger")

    def snapshot(self):
        """The stored cloudspaces, their notes, VMs and reservations (``/_emulator/snapshot``)."""
        return self.admin("GET", "/snapshot")

    def quiesce(self, timeout=30.0, settle=0.2):
        """Wait until every request already sent has been answered (e.g. those of a killed run).

        Done when no request is in flight and none arrived for ``settle``
        seconds (a request still in the server's socket buffer lands meanwhile).
        """
        seen = [None, time.monotonic()]

        def quiet():
            stats = self.stats()
            now = time.monotonic()
            if stats["in_flight"] or stats["requests"] != seen[0]:
                seen[:] = [stats["requests"], now]
                return False
            return now - seen[1] >= settle

        if not wait_for(quiet, timeout=timeout, interval=settle / 4):
            raise AssertionError("the emulator still had requests in flight after %ss" % timeout)

    def grant(self, token, customers=None):
        """Accept ``token`` from now on, for ``customers`` (None: all)."""
        return self.admin("POST", "/credentials", {"token": token, "customers": customers})

    def rotate(self, new_token):
        """Rotate this emulator's token: ``new_token`` is accepted for its customers, the old one refused from
        now on (``self.token`` follows)."""
        out = self.admin("POST", "/credentials", {"rotate": self.token, "token": new_token})
        self.token = new_token
        return out

    def revoke(self, token):
        return self.admin("DELETE", "/credentials", {"token": token})

    def op_count(self, operation):
        return self.stats()["operations"].get(operation, {}).get("count", 0)

    def env(self):
        return {"WHITESKY_API_URL": self.url, "WHITESKY_API_TOKEN": self.token, "WHITESKY_CUSTOMER_ID": CUSTOMER}

    def client(self, **kw):
        from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient

        kw.setdefault("timeout", 10)
        return WhiteskyClient(self.url, self.token, CUSTOMER, **kw)
