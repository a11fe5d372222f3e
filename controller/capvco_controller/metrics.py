"""Prometheus metrics (``prometheus_client``, in a registry of the controller's own), under the names and types
controller-runtime uses (so the dashboards and alerts a cluster operator has for Go providers apply), and the health
endpoints the kubelet probes.

``/metrics``: the counters ``controller_runtime_reconcile_total{controller,result}``,
``controller_runtime_reconcile_errors_total{controller}``, ``workqueue_adds_total{name}``,
``workqueue_retries_total{name}``; the histograms ``controller_runtime_reconcile_time_seconds{controller}`` and
``workqueue_queue_duration_seconds{name}``; the gauges ``controller_runtime_max_concurrent_reconciles{controller}``,
``controller_runtime_active_workers{controller}``, ``workqueue_depth{name}``, ``leader_election_master_status{name}``;
the controller's own (``capvco_drift_pass_seconds{location}``, ``capvco_drift_found_total{kind}``,
``capvco_watch_errors_total{kind}``, ``capvco_platform_errors_total{controller}``, ``capvco_workqueue_delayed``,
``capvco_informer_objects{kind}``); and the process's (``prometheus_client``'s process collector:
``process_cpu_seconds_total``, a counter, ``process_resident_memory_bytes``, ``process_virtual_memory_bytes``,
``process_start_time_seconds``, ``process_open_fds``, ``process_max_fds``).  Counters and histograms have no
``_created`` series, as controller-runtime's have none.
``/healthz``: the process's threads are alive.  ``/readyz``: ready to reconcile (standing by counts as ready).

The probes and the metrics are served on two addresses (``--health-probe-bind-address``, which the kubelet reaches
on the pod's IP, and ``--metrics-bind-address``, 127.0.0.1 by default): a :class:`Server` serves only the paths it is
given, so the probe address never serves ``/metrics`` to the pods that reach the controller's pod IP.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

LabelSet = tuple[tuple[str, str], ...]
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: The text exposition format that ``generate_latest`` writes.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Counter:
    """A counter whose labels are given by name at each increment (``inc(controller="vcomachine")``)."""

    def __init__(self, name: str, help_: str, labels: Iterable[str], registry: CollectorRegistry) -> None:
        self.name, self.registry = name, registry
        self.metric = prometheus_client.Counter(name, help_, list(labels), registry=registry)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        self.metric.labels(**labels).inc(amount)

    def get(self, **labels: str) -> float:
        return self.registry.get_sample_value(self.name, labels) or 0.0


class Histogram:
    """A histogram (``BUCKETS``, in seconds) whose labels are given by name at each observation."""

    def __init__(
        self,
        name: str,
        help_: str,
        labels: Iterable[str],
        registry: CollectorRegistry,
        buckets: tuple[float, ...] = BUCKETS,
    ) -> None:
        self.name, self.registry = name, registry
        self.metric = prometheus_client.Histogram(name, help_, list(labels), registry=registry, buckets=buckets)

    def observe(self, value: float, **labels: str) -> None:
        self.metric.labels(**labels).observe(value)

    def count(self, **labels: str) -> float:
        return self.registry.get_sample_value(self.name + "_count", labels) or 0.0


class Gauge(Collector):
    """A gauge read when scraped: ``read()`` gives its series, each its label set and its value."""

    family: type[GaugeMetricFamily] | type[CounterMetricFamily] = GaugeMetricFamily

    def __init__(self, name: str, help_: str, read: Callable[[], Iterable[tuple[LabelSet, float]]]) -> None:
        self.name, self.help, self.read = name, help_, read

    def collect(self) -> Iterator[Metric]:
        rows = list(self.read())
        names = [k for k, _ in rows[0][0]] if rows else []
        family = self.family(self.name, self.help, labels=names)
        for labels, value in rows:
            family.add_metric([v for _, v in labels], value)
        yield family


class Counted(Gauge):
    """A counter read when scraped (a total another object keeps, as the work queue keeps its adds)."""

    family = CounterMetricFamily


class _Exposed(Collector):
    """What ``/metrics`` shows of a registry: everything but the ``_created`` series of its counters and
    histograms (controller-runtime has none; ``prometheus_client`` would add one per series)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            created = family.name + "_created"
            family.samples = [s for s in family.samples if s.name != created]
            yield family


class Registry:
    """The controller's metrics, in a ``prometheus_client`` registry of their own (never the library's global
    one: each Controller in a test's process has its own)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total", "Reconciles by result.", ["controller", "result"], r
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total", "Reconciles that failed.", ["controller"], r
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds", "Time per reconcile.", ["controller"], r
        )
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds", "How long a key waited in the queue before its reconcile.", ["name"], r
        )
        self.drift_pass = Histogram("capvco_drift_pass_seconds", "Time per drift pass of a location.", ["location"], r)
        self.drift_found = Counter(
            "capvco_drift_found_total", "Objects a drift pass found not as recorded.", ["kind"], r
        )
        self.watch_errors = Counter(
            "capvco_watch_errors_total", "Watches that broke and were started again.", ["kind"], r
        )
        self.platform_errors = Counter(
            "capvco_platform_errors_total", "Platform calls that failed a reconcile.", ["controller"], r
        )
        ProcessCollector(registry=r)

    def add(self, metric: Gauge) -> Gauge:
        """A metric read when scraped (:class:`Gauge`, :class:`Counted`), registered."""
        self.registry.register(metric)
        return metric

    def render(self) -> str:
        """The text exposition format (``/metrics``'s body)."""
        return generate_latest(_Exposed(self.registry)).decode("utf-8")


#: What a server serves: the metrics, the probes.
METRICS = ("/metrics",)
PROBES = ("/healthz", "/livez", "/readyz")


class Server:
    """``paths`` (of ``/metrics``, ``/healthz``, ``/livez`` and ``/readyz``) on one address (``host:port``; an empty
    host is every address); any other path is a 404."""

    def __init__(
        self,
        address: str,
        registry: Registry,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        paths: Iterable[str] = METRICS + PROBES,
    ) -> None:
        host, _, port = address.rpartition(":")
        outer = self
        self.paths = tuple(paths)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                path = self.path.split("?")[0]
                if path not in outer.paths:
                    code, body, ctype = 404, "not found\n", "text/plain"
                elif path == "/metrics":
                    code, body, ctype = 200, outer.registry.render(), CONTENT_TYPE
                elif path in ("/healthz", "/livez"):
                    ok = outer.healthy()
                    code, body, ctype = (200 if ok else 500), ("ok\n" if ok else "unhealthy\n"), "text/plain"
                elif path == "/readyz":
                    ok = outer.ready()
                    code, body, ctype = (200 if ok else 500), ("ok\n" if ok else "not ready\n"), "text/plain"
                else:
                    code, body, ctype = 404, "not found\n", "text/plain"
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
                return

        self.registry, self.healthy, self.ready = registry, healthy, ready
        self.httpd = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)  # noqa: S104 (the probe's port)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics", daemon=True)

    def start(self) -> Server:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
