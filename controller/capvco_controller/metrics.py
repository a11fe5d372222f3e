"""Prometheus metrics in the text exposition format, under the names controller-runtime uses (so the dashboards
and alerts a cluster operator has for Go providers apply), and the health endpoints the kubelet probes.

``/metrics``: ``controller_runtime_reconcile_total{controller,result}``, ``controller_runtime_reconcile_errors_total``,
``controller_runtime_reconcile_time_seconds`` (a histogram), ``controller_runtime_max_concurrent_reconciles``,
``controller_runtime_active_workers``, ``workqueue_depth``, ``workqueue_adds_total``, ``workqueue_retries_total``,
``workqueue_queue_duration_seconds``, ``leader_election_master_status``, the drift pass's own
(``capvco_drift_pass_seconds``, ``capvco_drift_found_total{kind}``), and the process's CPU and memory.
``/healthz``: the process's threads are alive.  ``/readyz``: ready to reconcile (standing by counts as ready).

The probes and the metrics are served on two addresses (``--health-probe-bind-address``, which the kubelet reaches
on the pod's IP, and ``--metrics-bind-address``, 127.0.0.1 by default): a :class:`Server` serves only the paths it is
given, so the probe address never serves ``/metrics`` to the pods that reach the controller's pod IP.
"""

from __future__ import annotations

import os
import resource
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LabelSet = tuple[tuple[str, str], ...]
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _labels(labels: LabelSet) -> str:
    if not labels:
        return ""
    body = ",".join(
        '%s="%s"' % (k, v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")) for k, v in labels
    )
    return "{" + body + "}"


class Metric:
    def __init__(self, name: str, help_: str, kind: str) -> None:
        self.name, self.help, self.kind = name, help_, kind
        self.lock = threading.Lock()

    def lines(self) -> Iterable[str]:
        yield "# HELP %s %s" % (self.name, self.help)
        yield "# TYPE %s %s" % (self.name, self.kind)
        yield from self.samples()

    def samples(self) -> Iterable[str]:
        raise NotImplementedError


class Counter(Metric):
    def __init__(self, name: str, help_: str) -> None:
        super().__init__(name, help_, "counter")
        self.values: dict[LabelSet, float] = {}

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self.lock:
            self.values[key] = self.values.get(key, 0.0) + amount

    def get(self, **labels: str) -> float:
        with self.lock:
            return self.values.get(tuple(sorted(labels.items())), 0.0)

    def samples(self) -> Iterable[str]:
        with self.lock:
            items = sorted(self.values.items())
        for labels, value in items:
            yield "%s%s %s" % (self.name, _labels(labels), _num(value))


class Gauge(Metric):
    def __init__(self, name: str, help_: str, read: Callable[[], Iterable[tuple[LabelSet, float]]]) -> None:
        super().__init__(name, help_, "gauge")
        self.read = read

    def samples(self) -> Iterable[str]:
        for labels, value in self.read():
            yield "%s%s %s" % (self.name, _labels(labels), _num(value))


class Histogram(Metric):
    def __init__(self, name: str, help_: str, buckets: tuple[float, ...] = BUCKETS) -> None:
        super().__init__(name, help_, "histogram")
        self.buckets = buckets
        self.series: dict[LabelSet, list[float]] = {}  # bucket counts, then sum, then count

    def observe(self, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self.lock:
            s = self.series.setdefault(key, [0.0] * (len(self.buckets) + 2))
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    s[i] += 1
            s[-2] += value
            s[-1] += 1

    def count(self, **labels: str) -> float:
        with self.lock:
            s = self.series.get(tuple(sorted(labels.items())))
            return s[-1] if s else 0.0

    def samples(self) -> Iterable[str]:
        with self.lock:
            items = sorted((k, list(v)) for k, v in self.series.items())
        for labels, s in items:
            for bound, n in zip(self.buckets, s, strict=False):
                yield "%s_bucket%s %s" % (self.name, _labels(labels + (("le", _num(bound)),)), _num(n))
            yield "%s_bucket%s %s" % (self.name, _labels(labels + (("le", "+Inf"),)), _num(s[-1]))
            yield "%s_sum%s %s" % (self.name, _labels(labels), _num(s[-2]))
            yield "%s_count%s %s" % (self.name, _labels(labels), _num(s[-1]))


def _num(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))


def process_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def resident_bytes() -> int:
    """The process's resident memory now (``/proc/self/statm``), or its peak where there is no /proc."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Registry:
    def __init__(self) -> None:
        self.metrics: list[Metric] = []
        self.reconcile_total = self.add(Counter("controller_runtime_reconcile_total", "Reconciles by result."))
        self.reconcile_errors = self.add(
            Counter("controller_runtime_reconcile_errors_total", "Reconciles that failed.")
        )
        self.reconcile_time = self.add(Histogram("controller_runtime_reconcile_time_seconds", "Time per reconcile."))
        self.queue_duration = self.add(
            Histogram("workqueue_queue_duration_seconds", "How long a key waited in the queue before its reconcile.")
        )
        self.drift_pass = self.add(Histogram("capvco_drift_pass_seconds", "Time per drift pass of a location."))
        self.drift_found = self.add(Counter("capvco_drift_found_total", "Objects a drift pass found not as recorded."))
        self.watch_errors = self.add(Counter("capvco_watch_errors_total", "Watches that broke and were started again."))
        self.platform_errors = self.add(
            Counter("capvco_platform_errors_total", "Platform calls that failed a reconcile.")
        )
        self.add(
            Gauge("process_cpu_seconds_total", "CPU seconds the process used.", lambda: [((), process_cpu_seconds())])
        )
        self.add(Gauge("process_resident_memory_bytes", "Resident memory.", lambda: [((), float(resident_bytes()))]))

    def add(self, metric: Any) -> Any:
        self.metrics.append(metric)
        return metric

    def render(self) -> str:
        return "\n".join(line for m in self.metrics for line in m.lines()) + "\n"


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
                    code, body, ctype = 200, outer.registry.render(), "text/plain; version=0.0.4"
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
