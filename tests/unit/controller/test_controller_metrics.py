"""The controller's /metrics as a scraper reads it: every family under controller-runtime's name and type (a total
is a counter, as Prometheus's rate() and the Go providers' dashboards expect), with its labels, and no series
controller-runtime lacks. The whole exposition of a Controller (built, never started) with every metric touched."""

from __future__ import annotations

import re

import prometheus_client
from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from capvco_controller import main
from capvco_controller.context import Settings
from capvco_controller.controller import Controller
from capvco_controller.credentials import Credentials
from capvco_controller.kube import Kube
from capvco_controller.metrics import Registry

#: name: (type, label names), as controller-runtime (and its process collector) name them, and the controller's own
EXPECTED = {
    "controller_runtime_reconcile_total": ("counter", ("controller", "result")),
    "controller_runtime_reconcile_errors_total": ("counter", ("controller",)),
    "controller_runtime_reconcile_time_seconds": ("histogram", ("controller",)),
    "controller_runtime_max_concurrent_reconciles": ("gauge", ("controller",)),
    "controller_runtime_active_workers": ("gauge", ("controller",)),
    "workqueue_depth": ("gauge", ("name",)),
    "workqueue_adds_total": ("counter", ("name",)),
    "workqueue_retries_total": ("counter", ("name",)),
    "workqueue_queue_duration_seconds": ("histogram", ("name",)),
    "leader_election_master_status": ("gauge", ("name",)),
    "capvco_drift_pass_seconds": ("histogram", ("location",)),
    "capvco_drift_found_total": ("counter", ("kind",)),
    "capvco_watch_errors_total": ("counter", ("kind",)),
    "capvco_platform_errors_total": ("counter", ("controller",)),
    "capvco_workqueue_delayed": ("gauge", ()),
    "capvco_informer_objects": ("gauge", ("kind",)),
    "process_cpu_seconds_total": ("counter", ()),
    "process_resident_memory_bytes": ("gauge", ()),
    "process_virtual_memory_bytes": ("gauge", ()),
    "process_start_time_seconds": ("gauge", ()),
    "process_open_fds": ("gauge", ()),
    "process_max_fds": ("gauge", ()),
}


def read(text):
    """{name as in its TYPE line: (type, label names of its samples)}, read with prometheus_client's parser."""
    declared = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    out = {}
    for family in text_string_to_metric_families(text):
        name = family.name + "_total" if family.type == "counter" else family.name
        labels = sorted({k for s in family.samples for k in s.labels if k != "le"})
        out[name] = (family.type, tuple(labels))
        assert declared[name] == family.type
        assert {s.name for s in family.samples} <= {name, name + "_bucket", name + "_sum", name + "_count"}, family
    return out


def test_the_exposition_has_controller_runtimes_names_and_types(tmp_path):
    for key, value in (("api_url", "https://portal.example/api/1"), ("customer_id", "acme"), ("api_token", "t")):
        (tmp_path / key).write_text(value + "\n")
    registry = Registry()
    ctl = Controller(Kube(k8s.ApiClient()), Credentials(str(tmp_path), {}), Settings(), metrics=registry)
    registry.add(main._leader_gauge(None, "capvco-controller"))
    registry.reconcile_total.inc(controller="vcomachine", result="success")
    registry.reconcile_errors.inc(controller="vcomachine")
    registry.reconcile_time.observe(0.3, controller="vcomachine")
    registry.queue_duration.observe(0.01, name="vcomachine")
    registry.drift_pass.observe(1.5, location="be-gen-1")
    registry.drift_found.inc(kind="VCOMachine")
    registry.watch_errors.inc(kind="Machine")
    registry.platform_errors.inc(controller="vcomachine")
    ctl.queue.add(("VCOMachine", "default", "m"))

    text = registry.render()
    assert read(text) == EXPECTED
    values = {line.rpartition(" ")[0]: float(line.rpartition(" ")[2]) for line in text.splitlines() if line[:1] != "#"}
    assert values['controller_runtime_reconcile_total{controller="vcomachine",result="success"}'] == 1
    assert values['workqueue_adds_total{name="capvco"}'] == 1
    assert values['controller_runtime_reconcile_time_seconds_bucket{controller="vcomachine",le="0.5"}'] == 1
    assert values['controller_runtime_reconcile_time_seconds_bucket{controller="vcomachine",le="0.25"}'] == 0
    assert values['leader_election_master_status{name="capvco-controller"}'] == 1
    assert values["process_cpu_seconds_total"] > 0 and values["process_resident_memory_bytes"] > 1 << 20
    assert registry.reconcile_total.get(controller="vcomachine", result="success") == 1
    assert registry.reconcile_time.count(controller="vcomachine") == 1


def test_each_registry_is_its_own():
    """Two Controllers in one process (the tests run many) each count their own, off prometheus_client's global
    registry."""
    one, two = Registry(), Registry()
    one.reconcile_total.inc(controller="vcomachine", result="error")
    assert one.reconcile_total.get(controller="vcomachine", result="error") == 1
    assert two.reconcile_total.get(controller="vcomachine", result="error") == 0
    assert "controller_runtime_reconcile_total" not in prometheus_client.generate_latest().decode()
