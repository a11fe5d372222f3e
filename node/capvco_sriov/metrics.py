"""The agent's metrics, in the Prometheus text format (``prometheus_client``), for a node operator to scrape.

- ``capvco_sriov_cni_requests_total{command, code}`` and ``capvco_sriov_cni_request_duration_seconds{command,
  code}``: every CNI request the agent answered, by command (``ADD``, ``DEL``, ``CHECK``, ``GC``, ``STATUS``;
  ``invalid`` for one that was refused before its command was known) and CNI result code (``0``: success);
- ``capvco_sriov_ledger_entries{state}``, ``capvco_sriov_entries_held`` (kept for a person: not proven the
  agent's), ``capvco_sriov_entries_release_failed`` (a release to finish), read from the ledger when scraped;
- ``capvco_sriov_reclaimer_actions_total{action}``: ``recovered`` and ``settled`` (an ADD's leftover settled, at
  start or by the reclaimer), ``released`` (a pod gone without a DEL), ``release_finished`` (a release that had
  failed), ``failed`` (tried, and tried again on the next pass);
- ``capvco_sriov_platform_rate_limited_total`` and ``capvco_sriov_platform_rate_limit_wait_seconds_total``: the
  429s the platform answered the agent's credential, and the seconds its calls waited on the rate limit (the
  platform client's governor, read when scraped).

Served on ``127.0.0.1`` by default (``--metrics-address``): off the host network's public interfaces.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from capvco_sriov.ledger import STATES, Ledger

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.governor import Governor

LOG = logging.getLogger("capvco-sriov-agent")

#: The commands a request is counted under (anything else: ``invalid``).
COMMANDS = ("ADD", "DEL", "CHECK", "GC", "STATUS")
#: The latency buckets, in seconds: an ADD takes tens of milliseconds on an idle platform, seconds behind a busy
#: one (its VM's lock, the rate limit), at most the plugin's 60 s.
BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: The reclaimer's actions (``Reclaimer``'s ``count``).
ACTIONS = ("recovered", "settled", "released", "release_finished", "failed")


class _Read(Collector):
    """What is read when scraped: the ledger's entries, and the platform client's governor."""

    def __init__(self, ledger: Ledger, governor: Governor | None) -> None:
        self.ledger = ledger
        self.governor = governor

    def collect(self) -> Iterator[Metric]:
        entries = list(self.ledger.items().values())
        by_state = GaugeMetricFamily(
            "capvco_sriov_ledger_entries", "Attachments in the ledger, by state.", labels=["state"]
        )
        for state in STATES:
            by_state.add_metric([state], sum(1 for e in entries if e["state"] == state))
        yield by_state
        yield GaugeMetricFamily(
            "capvco_sriov_entries_held",
            "Ledger entries kept for a person: a NIC at the address that cannot be proven the agent's.",
            value=sum(1 for e in entries if e.get("held")),
        )
        yield GaugeMetricFamily(
            "capvco_sriov_entries_release_failed",
            "Ledger entries whose NIC could not be moved back to the node; the reclaimer tries again.",
            value=sum(1 for e in entries if e.get("release_failed")),
        )
        if self.governor is not None:
            yield CounterMetricFamily(
                "capvco_sriov_platform_rate_limited",
                "429s the platform answered the agent's credential (the platform client's governor).",
                value=self.governor.limited,
            )
            yield CounterMetricFamily(
                "capvco_sriov_platform_rate_limit_wait_seconds",
                "Seconds the agent's platform calls waited on the rate limit, all threads together.",
                value=self.governor.waited,
            )


class Metrics:
    """The agent's metrics, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "capvco_sriov_cni_requests",
            "CNI requests the agent answered, by command and CNI result code (0: success).",
            ["command", "code"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "capvco_sriov_cni_request_duration_seconds",
            "How long the agent took to answer a CNI request, by command and CNI result code.",
            ["command", "code"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.reclaimer = Counter(
            "capvco_sriov_reclaimer_actions",
            "What recovery and the reclaimer did, by action.",
            ["action"],
            registry=self.registry,
        )
        for action in ACTIONS:  # every series there from the start (a rate of a series born at 1 reads 0)
            self.reclaimer.labels(action)

    def watch(self, ledger: Ledger, governor: Governor | None) -> None:
        """Read the ledger and the governor when scraped."""
        self.registry.register(_Read(ledger, governor))

    def answered(self, command: str, code: int, seconds: float) -> None:
        """One CNI request answered: its command, its CNI result code, how long it took."""
        labels = (command if command in COMMANDS else "invalid", str(code))
        self.requests.labels(*labels).inc()
        self.duration.labels(*labels).observe(seconds)

    def counter(self) -> Callable[[str], None]:
        """The reclaimer's ``count``."""
        return lambda action: self.reclaimer.labels(action).inc()

    def serve(self, address: str) -> str | None:
        """Serve ``/metrics`` on ``HOST:PORT`` (port 0: any free one); the URL, or None when it cannot bind (logged:
        the agent serves CNI all the same)."""
        host, _, port = address.rpartition(":")
        try:
            server, _thread = start_http_server(int(port), addr=host.strip("[]"), registry=self.registry)
        except (OSError, ValueError) as exc:
            LOG.warning("metrics: cannot serve on %s: %s; the agent goes on without them", address, exc)
            return None
        url = "http://%s:%d/metrics" % (host, server.server_port)
        LOG.info("metrics on %s", url)
        return url
