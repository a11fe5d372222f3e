"""The fake Kubernetes API server's watches, driven by the real ``kubernetes`` client's ``watch.Watch`` (a client
written elsewhere): a controller that watches needs ADDED, MODIFIED and DELETED in order, a resume from a
``resourceVersion``, selectors, and 410 Gone for a version older than the history, as the API server gives them."""

from __future__ import annotations

import threading

import pytest
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch

from capvco_lab.controller import kube_with_crds

IV = ("infrastructure.cluster.x-k8s.io", "v1beta1")


def api(kube):
    return k8s_client.CustomObjectsApi(k8s_config.new_client_from_config(kube.kubeconfig))


def machine(name, labels=None):
    return {
        "apiVersion": "%s/%s" % IV,
        "kind": "VCOMachine",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {"vcpus": 1, "memory": 1024},
    }


def events(custom, timeout=2, **kw):
    w = k8s_watch.Watch()
    got = []
    for event in w.stream(
        custom.list_namespaced_custom_object, *IV, "default", "vcomachines", timeout_seconds=timeout, **kw
    ):
        got.append((event["type"], event["object"]["metadata"]["name"], event["object"]["metadata"]["resourceVersion"]))
    return got


def test_a_watch_sees_what_exists_then_each_change_in_order(kube):
    custom = api(kube)
    kube.create(machine("m0"))
    seen = []
    started = threading.Event()

    def watch():
        w = k8s_watch.Watch()
        for event in w.stream(custom.list_namespaced_custom_object, *IV, "default", "vcomachines", timeout_seconds=60):
            started.set()
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            if event["type"] == "DELETED":
                w.stop()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    assert started.wait(10)
    kube.create(machine("m1"))
    custom.patch_namespaced_custom_object(*IV, "default", "vcomachines", "m1", {"metadata": {"labels": {"a": "b"}}})
    custom.delete_namespaced_custom_object(*IV, "default", "vcomachines", "m1")
    t.join(60)
    assert seen == [("ADDED", "m0"), ("ADDED", "m1"), ("MODIFIED", "m1"), ("DELETED", "m1")]


def test_a_watch_resumes_from_a_version_and_applies_selectors(kube):
    custom = api(kube)
    listed = custom.list_namespaced_custom_object(*IV, "default", "vcomachines")
    rv = listed["metadata"]["resourceVersion"]
    kube.create(machine("m0", {"pool": "gpu"}))
    kube.create(machine("m1", {"pool": "cp"}))
    got = events(custom, resource_version=rv, label_selector="pool=gpu")
    assert [(t, n) for t, n, _ in got] == [("ADDED", "m0")]
    later = events(custom, resource_version=got[-1][2])
    assert [(t, n) for t, n, _ in later] == [("ADDED", "m1")], "only what came after the version"


def test_a_version_older_than_the_history_is_gone(tmp_path):
    fake = kube_with_crds(tmp_path, watch_history=3)
    try:
        custom = api(fake)
        for i in range(6):
            fake.create(machine("m%d" % i))
        with pytest.raises(k8s_client.exceptions.ApiException) as err:
            events(custom, resource_version="101")
        assert err.value.status == 410
    finally:
        fake.stop()
