"""``capvco-controller``: the command line of the controller (the flags controller-runtime managers take).

    capvco-controller [--credentials-dir DIR] [--kubeconfig PATH] [--context NAME] [--namespace NS ...]
                      [--max-concurrent-reconciles N] [--leader-elect] [--leader-election-id NAME]
                      [--leader-election-namespace NS] [--health-probe-bind-address :6789]
                      [--metrics-bind-address 127.0.0.1:8080] [--drift-period 540] [--driver-poll 60]
                      [--addon-resync 3600] [--ansible-playbook ansible-playbook]
                      [--log-level debug|info|warning|error]

The platform credential comes from ``--credentials-dir`` (the files ``api_url``, ``customer_id`` and ``api_token`` of
a mounted Secret, read again when they change: ``credentials.py``), else from the environment (``WHITESKY_API_URL``,
``WHITESKY_CUSTOMER_ID``, ``WHITESKY_API_TOKEN``, read once); ``WHITESKY_VALIDATE_CERTS`` and ``WHITESKY_TIMEOUT``
from the environment in both cases.  Kubernetes from ``--kubeconfig``,
``KUBECONFIG`` or the pod's service account.  ``SIGTERM`` stops it cleanly: the reconciles under way finish, the
Lease is given up.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Sequence

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub
from capvco_controller.context import Settings
from capvco_controller.controller import Controller
from capvco_controller.credentials import Credentials
from capvco_controller.kube import Kube
from capvco_controller.leader import LeaderElector
from capvco_controller.metrics import METRICS, PROBES, Gauge, Registry, Server

log = logging.getLogger("capvco_controller")
#: Measured (docs/controller.md, "Sizing"): 4 workers create 50 machines well within the 2 minutes of the goal.
DEFAULT_WORKERS = 4


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be more than 0, got %s" % text)
    return value


def _workers(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError("must be from 1 to 64, got %s" % text)
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="capvco-controller", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--credentials-dir",
        default=os.environ.get("CAPVCO_CREDENTIALS_DIR") or None,
        help="a folder with the files api_url, customer_id and api_token (a mounted Secret), read again when they "
        "change (default: CAPVCO_CREDENTIALS_DIR; without either: WHITESKY_API_URL, WHITESKY_CUSTOMER_ID and "
        "WHITESKY_API_TOKEN, read once)",
    )
    p.add_argument("--kubeconfig", default=None)
    p.add_argument("--context", default=None)
    p.add_argument(
        "--namespace",
        action="append",
        default=None,
        help="a namespace to watch (repeat it; default: WATCH_NAMESPACE, comma-separated, or every namespace)",
    )
    p.add_argument("--max-concurrent-reconciles", type=_workers, default=DEFAULT_WORKERS)
    p.add_argument("--leader-elect", action="store_true")
    p.add_argument("--leader-election-id", default="capvco-controller")
    p.add_argument("--leader-election-namespace", default=os.environ.get("POD_NAMESPACE") or "capvco-system")
    p.add_argument("--health-probe-bind-address", default=":6789")
    p.add_argument("--metrics-bind-address", default="127.0.0.1:8080", help='"0" turns the metrics endpoint off')
    p.add_argument(
        "--drift-period",
        type=_positive,
        default=540.0,
        help="seconds from one drift pass of a location to the start of the next (the drift delay is at most this "
        "plus one pass's duration)",
    )
    p.add_argument("--driver-poll", type=_positive, default=60.0, help="seconds between reads of a first boot's report")
    p.add_argument(
        "--addon-resync", type=_positive, default=3600.0, help="seconds between applies of the SR-IOV add-on"
    )
    p.add_argument("--ansible-playbook", default="ansible-playbook", help="the SR-IOV add-on's ansible-playbook")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    for chatty in ("httpx", "httpcore", "urllib3", "kubernetes"):  # one line per request: only their warnings
        logging.getLogger(chatty).setLevel(max(logging.WARNING, logging.getLogger().level))
    try:
        credentials = Credentials(args.credentials_dir, os.environ)
        kube = Kube.connect(args.kubeconfig, args.context)
        capi = kube.cluster_api()  # which versions of Cluster and Machine to read, and which contract's fields
    except WhiteskyError as exc:
        log.error("%s", scrub(str(exc), 2048))
        return 2
    log.info(
        "Cluster API serves %s: reading Cluster and Machine at %s%s",
        ", ".join(capi.served),
        capi.version,
        ", writing the v1beta1 contract's fields beside the v1beta2 contract's" if capi.v1beta1 else "",
    )
    namespaces = args.namespace or [n.strip() for n in os.environ.get("WATCH_NAMESPACE", "").split(",") if n.strip()]
    settings = Settings(
        drift_period=args.drift_period,
        driver_poll=args.driver_poll,
        addon_resync=args.addon_resync,
        ansible_playbook=args.ansible_playbook,
        namespaces=namespaces,
    )
    registry = Registry()
    controller = Controller(
        kube, credentials, settings, workers=args.max_concurrent_reconciles, metrics=registry, capi=capi
    )
    stop = controller.stop
    lost = threading.Event()
    elector: LeaderElector | None = None
    if args.leader_elect:
        identity = "%s_%s" % (socket.gethostname(), uuid.uuid4())

        def on_lost() -> None:
            lost.set()
            stop.set()

        elector = LeaderElector(
            kube, args.leader_election_namespace, args.leader_election_id, identity, on_lost=on_lost
        )
    registry.add(_leader_gauge(elector, args.leader_election_id))

    def ready() -> bool:
        return controller.ready() or (elector is not None and not elector.leading.is_set() and not stop.is_set())

    servers = serve(
        args.health_probe_bind_address,
        args.metrics_bind_address,
        registry,
        lambda: (not controller.started) or controller.healthy(),
        ready,
    )

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        if elector is not None:
            if not elector.acquire(stop):
                return 0
            threading.Thread(target=elector.renew_forever, args=(stop,), name="leader", daemon=True).start()
        controller.start()
        stop.wait()
    finally:
        controller.shutdown()
        if elector is not None and not lost.is_set():
            elector.release()
        for server in servers:
            server.stop()
    return 1 if lost.is_set() else 0


def serve(
    probe_address: str, metrics_address: str, registry: Registry, healthy: Callable[[], bool], ready: Callable[[], bool]
) -> list[Server]:
    """The probes (``/healthz``, ``/readyz``) on ``probe_address`` and ``/metrics`` on ``metrics_address``, each
    only there (one server for both when the two are the same address, not a free port's ``:0``); ``"0"`` or an
    empty address turns that one off.  Started, each logged with its port."""
    wanted: list[tuple[str, tuple[str, ...]]] = []
    pairs: tuple[tuple[str, tuple[str, ...]], ...] = ((probe_address, PROBES), (metrics_address, METRICS))
    for address, paths in pairs:
        if not address or address == "0":
            continue
        if wanted and wanted[0][0] == address and not address.endswith(":0"):
            wanted[0] = (address, wanted[0][1] + paths)
        else:
            wanted.append((address, paths))
    servers = []
    for address, paths in wanted:
        server = Server(address, registry, healthy, ready, paths).start()
        log.info("serving %s on port %d", ", ".join(p for p in paths if p != "/livez"), server.port)
        servers.append(server)
    return servers


def _leader_gauge(elector: LeaderElector | None, name: str) -> Gauge:
    def read() -> list[tuple[tuple[tuple[str, str], ...], float]]:
        leading = elector is None or elector.leading.is_set()
        return [((("name", name),), 1.0 if leading else 0.0)]

    return Gauge("leader_election_master_status", "1 while this replica leads.", read)


if __name__ == "__main__":
    sys.exit(main())
