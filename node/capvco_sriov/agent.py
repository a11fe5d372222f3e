"""``capvco-sriov-agent``: the node agent daemon.

It holds the platform credential (read from a file that a Secret mounts, and again
when the Secret changes, so a rotated token is used without a restart; it
refuses to start without one and never falls back to any other credential, nor
to the connection's environment variables: its ``Connection`` is its command line's),
serves the CNI plugin on a unix socket only root can use (0600), and runs the
reclaimer.  The commands are ``commands``' (on ``attachments``: the collection's platform client and NIC operations;
their answers ``results``), the reclaimer ``reclaimer``, the request's reading ``config``, the wire format ``wire``.
"""

from __future__ import annotations

import argparse
import logging
import os
import socketserver
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.connection import Connection
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.credentials import TokenFile
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import LIMIT, scrub
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import resolve_machines
from capvco_sriov.commands import NicAgent
from capvco_sriov.config import parse_request
from capvco_sriov.ledger import Ledger
from capvco_sriov.metrics import Metrics
from capvco_sriov.reclaimer import Reclaimer
from capvco_sriov.wire import IO_FAILURE, PROBE, CniError, decode_request, encode_reply

LOG = logging.getLogger("capvco-sriov-agent")


def read_credential(path: str | None) -> TokenFile:
    """The agent's platform token, in the file of the Secret mounted for it: read now (it refuses to start without
    it) and again when the Secret changes (``credentials.TokenFile``: a rotated token is used without a restart)."""
    if not path:
        raise SystemExit(
            "capvco-sriov-agent: --credential-file is required (the agent credential Secret); "
            "refusing to start without it"
        )
    try:
        return TokenFile(path, "the node agent's platform credential (--credential-file)")
    except WhiteskyError as exc:
        raise SystemExit("capvco-sriov-agent: %s; refusing to start" % exc) from None


def clean(redact: Callable[[object], str], text: object, limit: int = LIMIT, multiline: bool = False) -> str:
    """``text`` fit to leave the agent: without the client's own credential (``redact``), then through the one
    scrubber (``scrub``: any credential's form, control characters escaped, the length bounded)."""
    return scrub(redact(text), limit, multiline=multiline)


def serve_one(agent: NicAgent, raw: bytes, metrics: Metrics | None = None) -> tuple[int, dict[str, Any]]:
    """One request from the CNI plugin -> (exit code, JSON document); an error's ``msg`` and ``details`` go through
    :func:`clean` (the plugin's own messages are made of bounded data, and it imports no scrubber).  Counted in
    ``metrics`` (by command and CNI result code), the liveness probe excepted."""
    if raw.strip() == PROBE.strip():
        return 0, {}  # the liveness probe: answered from the serving thread, nothing else
    started = time.monotonic()
    command, code, doc = _serve_one(agent, raw)
    if code:
        redact = agent.client.transport.redact
        doc = dict(doc, msg=clean(redact, doc.get("msg", "")), details=clean(redact, doc.get("details", "")))
    if metrics is not None:
        metrics.answered(command, doc.get("code", 0) if code else 0, time.monotonic() - started)
    return code, doc


def _serve_one(agent: NicAgent, raw: bytes) -> tuple[str, int, dict[str, Any]]:
    """``(command, exit code, document)``; the command as the request names it (``invalid`` when it is no request
    line)."""
    code, doc = 0, {}
    try:
        env, config = decode_request(raw)
    except ValueError as exc:
        return "invalid", 1, CniError(IO_FAILURE, "bad request from the plugin", exc).to_dict()
    try:
        req = parse_request(env, config)
    except CniError as exc:
        return env.get("CNI_COMMAND", ""), 1, exc.to_dict()
    try:
        doc = agent.handle(req)
    except CniError as exc:
        code, doc = 1, exc.to_dict(req.version)
    except WhiteskyError as exc:  # a platform call outside the paths that map their own: 11 when "not now"
        code, doc = 1, NicAgent.platform_error(exc).to_dict(req.version)
    except Exception as exc:  # a bug must still answer the runtime with a CNI error
        LOG.exception("unexpected error")  # the log's Redact filter scrubs the credential
        code, doc = 1, CniError(IO_FAILURE, "internal error in the node agent", exc).to_dict(req.version)
    return req.command, code, doc


class Handler(socketserver.StreamRequestHandler):
    server: Server

    def handle(self) -> None:
        raw = self.rfile.readline()
        _code, doc = serve_one(self.server.agent, raw, self.server.metrics)
        self.wfile.write(encode_reply(doc))


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 256  # the listen backlog: a node's burst of pod starts (socketserver's default is 5)
    agent: NicAgent  # set before it serves
    metrics: Metrics | None = None


#: Where the metrics are served by default: the node's loopback only (the DaemonSet runs on the host network).
METRICS_ADDRESS = "127.0.0.1:9738"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="capvco-sriov-agent", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--api-url", required=True)
    p.add_argument("--customer-id", required=True)
    p.add_argument("--credential-file", help="file holding the agent's platform token (from a Secret)")
    p.add_argument("--location", required=True)
    p.add_argument("--cloudspace-id", required=True)
    vm = p.add_mutually_exclusive_group(required=True)
    vm.add_argument("--vm-id", type=int, help="this node's VM id")
    vm.add_argument("--vm-name", help="this node's VM name (the Kubernetes node name), resolved to its id")
    p.add_argument("--socket", default="/run/capvco/sriov.sock")
    p.add_argument("--ledger-dir", default="/var/lib/capvco/sriov")
    p.add_argument("--host-netns", help="the node's network namespace (default: the agent's own)")
    p.add_argument("--node-name", help="Kubernetes node name; enables the API signal of the reclaimer")
    p.add_argument("--grace-period", type=float, default=30.0)
    p.add_argument("--reclaim-interval", type=float, default=10.0)
    p.add_argument("--wait-timeout", type=float, default=30.0)
    p.add_argument("--model", default="virtio")
    p.add_argument("--no-verify", action="store_true", help="do not verify the portal's TLS certificate")
    p.add_argument(
        "--log-level",
        choices=("debug", "info", "warning"),
        default="info",
        help="the agent's log level (default info); debug adds a line per platform request",
    )
    p.add_argument(
        "--metrics-address",
        default=os.environ.get("CAPVCO_SRIOV_METRICS_ADDRESS", METRICS_ADDRESS),
        help="HOST:PORT of /metrics (Prometheus text format; port 0: any free one), or 'off' "
        "(default: $CAPVCO_SRIOV_METRICS_ADDRESS, else %s: off the node's public interfaces)" % METRICS_ADDRESS,
    )
    return p.parse_args(argv)


def build(args: argparse.Namespace, metrics: Metrics) -> tuple[NicAgent, Reclaimer]:
    from capvco_sriov.netlink import Netlink
    from capvco_sriov.pods import KubePods

    credential = read_credential(args.credential_file)
    connection = Connection.from_options(
        {
            "api_url": args.api_url,
            "api_token": credential.token(),
            "customer_id": args.customer_id,
            "validate_certs": not args.no_verify,
        }
    )
    client = WhiteskyClient.connect(connection, credential=credential)
    pods = KubePods(args.node_name) if args.node_name else None
    vm_id = args.vm_id
    if vm_id is None:
        ((vm_id, _name),) = resolve_machines(client.vms(args.cloudspace_id), [args.vm_name], args.cloudspace_id)
    agent = NicAgent(
        client,
        args.location,
        args.cloudspace_id,
        vm_id,
        Ledger(args.ledger_dir),
        Netlink(args.host_netns),
        model=args.model,
        wait_timeout=args.wait_timeout,
    )
    metrics.watch(agent.ledger, client.transport.governor)
    return agent, Reclaimer(agent, pods=pods, grace_period=args.grace_period, count=metrics.counter())


#: The bound of one log record (a traceback included), in characters.
LOG_LIMIT = 16384


class Redact(logging.Filter):
    """Every log record, traceback included, through :func:`clean`: without the client's credential
    (``Transport.redact``) and scrubbed (``scrub``, lines kept, at most :data:`LOG_LIMIT` characters)."""

    def __init__(self, redact: Callable[[object], str]) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info))
        cleaned = clean(self.redact, text, LOG_LIMIT, multiline=True)
        record.msg, record.args, record.exc_info, record.exc_text = cleaned, (), None, None
        return True


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    level = getattr(logging, args.log_level.upper())
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # the HTTP library's line per request (3 or 4 a pod) only at debug: the agent logs what it decided
    logging.getLogger("httpx").setLevel(logging.DEBUG if level == logging.DEBUG else logging.WARNING)
    metrics = Metrics()
    agent, reclaim = build(args, metrics)
    for handler in logging.getLogger().handlers:
        handler.addFilter(Redact(agent.client.transport.redact))
    if args.metrics_address != "off":
        metrics.serve(args.metrics_address)
    resolved = reclaim.recover()
    if resolved:
        LOG.info("resolved %d attachment(s) left halfway by a crash: %s", len(resolved), resolved)
    os.makedirs(os.path.dirname(args.socket), exist_ok=True)
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    old = os.umask(0o177)  # the socket is born 0600: only root may ask for NICs
    try:
        server = Server(args.socket, Handler)
    finally:
        os.umask(old)
    server.agent = agent
    server.metrics = metrics
    stop = threading.Event()

    def reclaimer() -> None:
        while not stop.wait(args.reclaim_interval):
            try:
                for item in reclaim.reclaim_once():
                    LOG.info("reclaimed %s (%s)", item["key"], item["reason"])
            except Exception:
                LOG.exception("reclaimer pass failed")

    threading.Thread(target=reclaimer, daemon=True).start()
    print("capvco-sriov-agent: serving on %s" % args.socket, flush=True)
    try:
        server.serve_forever()
    finally:
        stop.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
