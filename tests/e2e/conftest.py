"""The netns lab fixture for the SR-IOV end-to-end tests (root and iproute2 needed), and a proxy at the platform's
boundary for the faults the emulator has no switch for."""

from __future__ import annotations

import http.client
import http.server
import threading
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

from capvco_lab.netlab import Lab, missing

from helpers import require


@pytest.fixture
def lab(tmp_path, request):
    require(not missing(), "the netns lab needs %s" % missing())
    opts = getattr(request, "param", {}) or {}
    lab = Lab(tmp_path).up(**opts)
    yield lab
    lab.down()


class Drop(Exception):
    """Raised by a hook: the request is never answered (the connection is cut)."""


class PlatformProxy:
    """An HTTP proxy between the node agent and the emulator, on a free loopback port: a test changes what crosses
    the platform's boundary, as a real platform (or the network) might.

    ``on_request(method, path)`` runs before a request goes on (it may block, or raise :class:`Drop`);
    ``on_answer(method, path, status, body) -> body`` may rewrite an answer.  Both run on the request's thread.
    """

    def __init__(self, upstream):
        self.upstream = urlsplit(upstream)
        self.url = None
        self.on_request = None
        self.on_answer = None
        self.seen = []  # (method, path) of every request, in order
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def relay(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.seen.append((self.command, self.path))
                try:
                    if proxy.on_request:
                        proxy.on_request(self.command, self.path)
                except Drop:
                    self.close_connection = True
                    return
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    answer = resp.read()
                    status, reason = resp.status, resp.reason
                    kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in ("content-length", "connection")]
                finally:
                    conn.close()
                if proxy.on_answer:
                    answer = proxy.on_answer(self.command, self.path, status, answer)
                try:
                    self.send_response(status, reason)
                    for k, v in kept:
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                except OSError:  # the client went away meanwhile (a killed agent)
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = relay

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        host, port = self.server.server_address[:2]
        self.url = "http://%s:%d%s" % (host, port, self.upstream.path)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def start_agent(self, lab):
        """(Re)start the lab's agent with this proxy as its platform; the lab keeps its own emulator."""
        real = lab.emu
        lab.emu = SimpleNamespace(url=self.url, token=real.token)
        try:
            lab.start_agent()
        finally:
            lab.emu = real

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def platform_proxy(lab):
    proxy = PlatformProxy(lab.emu.url)
    yield proxy
    proxy.close()
