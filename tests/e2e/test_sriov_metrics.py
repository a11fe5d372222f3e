"""The node agent's metrics endpoint (issue 38), scraped during the netns end-to-end run: its counters say what the
test did (ADDs, a refused ADD, a CHECK, a DEL, a reclaim), in the Prometheus text format."""

from __future__ import annotations

import os
import re
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers import wait_for


def metrics_url(lab):
    """The URL the agent logged for its metrics (the last start's)."""
    log = (lab.tmp / "agent.log").read_text(encoding="utf-8")
    found = re.findall(r"metrics on (http://127\.0\.0\.1:[0-9]+/metrics)", log)
    assert found, log[-2000:]
    return found[-1]


def scrape(url):
    """``{(name, labels as a sorted tuple): value}`` of every sample, and the text."""
    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 (the test's own loopback URL)
        assert answer.headers["Content-Type"].startswith("text/plain"), answer.headers["Content-Type"]
        text = answer.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[s.name, tuple(sorted(s.labels.items()))] = s.value
    return samples, text


def requests(samples, command, code):
    return samples.get(("capvco_sriov_cni_requests_total", (("code", code), ("command", command))), 0)


@pytest.mark.parametrize("lab", [{"grace": 0.5, "interval": 0.1}], indirect=True)
def test_the_agents_metrics_count_what_it_did(lab, monkeypatch):
    lab.kill_agent()
    monkeypatch.setenv("CAPVCO_SRIOV_METRICS_ADDRESS", "127.0.0.1:0")  # any free port, on the loopback
    lab.start_agent()
    url = metrics_url(lab)
    first, a, b = lab.add_pod(1), lab.add_pod(2), lab.add_pod(3)
    rc, res = lab.cni("ADD", first, container="c1")
    assert rc == 0, res
    assert lab.cni("ADD", a, container="c2")[0] == 0
    assert lab.cni("ADD", b, container="c3", conf={"network": "no-such-net"})[1]["code"] == 7
    assert lab.cni("CHECK", first, container="c1", conf={"prevResult": res}) == (0, None)
    assert lab.cni("DEL", first, container="c1") == (0, None)
    samples, _text = scrape(url)
    assert requests(samples, "ADD", "0") == 2 and requests(samples, "ADD", "7") == 1
    assert requests(samples, "CHECK", "0") == 1 and requests(samples, "DEL", "0") == 1
    labels = (("code", "0"), ("command", "ADD"))
    assert samples["capvco_sriov_cni_request_duration_seconds_count", labels] == 2
    assert 0 < samples["capvco_sriov_cni_request_duration_seconds_sum", labels] < 60
    assert samples["capvco_sriov_ledger_entries", (("state", "ready"),)] == 1
    lab.del_pod(a)  # no DEL: the reclaimer releases c2's NIC
    released = ("capvco_sriov_reclaimer_actions_total", (("action", "released"),))
    assert wait_for(lambda: scrape(url)[0].get(released) == 1, timeout=30), scrape(url)[1]
    samples, text = scrape(url)
    assert samples["capvco_sriov_ledger_entries", (("state", "ready"),)] == 0
    assert samples["capvco_sriov_entries_held", ()] == 0
    assert samples["capvco_sriov_reclaimer_actions_total", (("action", "failed"),)] == 0
    assert samples["capvco_sriov_platform_rate_limited_total", ()] == 0
    assert samples["capvco_sriov_platform_rate_limit_wait_seconds_total", ()] >= 0
    assert lab.platform_nics() == []
    (lab.tmp / "metrics.txt").write_text(text, encoding="utf-8")
    if os.environ.get("CAPVCO_SHOW_METRICS"):
        print(text)
