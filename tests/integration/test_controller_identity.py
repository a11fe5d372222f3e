"""A platform identity per cluster (issue 48, point 5): ``VCOCluster.spec.identityRef`` names a Secret with the
platform's URL, customer and token, and every platform call for that cluster and its machines uses it.  Run
against one emulator serving two customers, each with its own token, and the lab's fake Kubernetes API server."""

from __future__ import annotations

import base64
import json
import re
import uuid

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
from capvco_lab.capi import make_cluster, make_machine
from capvco_lab.controller import Controller
from capvco_lab.emulator import CUSTOMER, Emulator
from whitesky_emulator.world import DEFAULT_WORLD

from helpers import wait_for

OTHER = "capvco-other"
ANNOTATION = "infrastructure.cluster.x-k8s.io/vco-allowed-namespaces"


@pytest.fixture
def emulator(tmp_path):
    """The emulator with a second customer beside the demo one (a seed of the default world and one more)."""
    world = dict(DEFAULT_WORLD, customers=list(DEFAULT_WORLD["customers"]) + [{"customer_id": OTHER}])
    seed = tmp_path / "two-customers.json"
    seed.write_text(json.dumps(world))
    emu = Emulator(tmp_path / "emulator-state", extra_args=["--config", str(seed)]).start()
    yield emu
    emu.stop()


def b64(text):
    return base64.b64encode(text.encode()).decode()


def identity_secret(kube, name, emulator, customer, token, namespace="default", allowed=None):
    meta = {"name": name, "namespace": namespace}
    if allowed is not None:
        meta["annotations"] = {ANNOTATION: allowed}
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "data": {"api_url": b64(emulator.url), "customer_id": b64(customer), "api_token": b64(token)},
    }
    if kube.get(("v1", "Secret"), name, namespace) is None:
        return kube.create(body)
    code, out = kube.call("PUT", "/api/v1/namespaces/%s/secrets/%s" % (namespace, name), body)
    assert code == 200, out
    return out


def grant(emulator, customer):
    token = "tok-%s-%s" % (customer, uuid.uuid4().hex)
    emulator.grant(token, [customer])
    return token


def condition(kube, obj, ctype):
    got = kube.get(obj) or {}
    return next((c for c in (got.get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


def ready(kube, obj):
    return ((kube.get(obj) or {}).get("status") or {}).get("ready") is True


def vm_names(emulator, customer, token):
    """The names of the VMs of every cloudspace of ``customer``, as its own token lists them."""
    with WhiteskyClient(emulator.url, token, customer) as client:
        return sorted(v["name"] for cs in client.cloudspaces() for v in client.vms(str(cs["cloudspace_id"])))


def identity(name, namespace=None):
    ref = {"kind": "Secret", "name": name}
    if namespace:
        ref["namespace"] = namespace
    return {"identityRef": ref}


def test_two_clusters_of_two_customers_each_machine_in_its_own_customer(kube, emulator, tmp_path):
    """Two VCOClusters name two identities of two customers of one emulator; each machine's VM is made in its own
    cluster's customer, and none in the other (the controller's own credential, the demo customer's, is used for
    neither: the second customer's token cannot see the demo customer, and the other way round)."""
    token_a, token_b = grant(emulator, CUSTOMER), grant(emulator, OTHER)
    identity_secret(kube, "ident-a", emulator, CUSTOMER, token_a)
    identity_secret(kube, "ident-b", emulator, OTHER, token_b)
    ctl = Controller(kube, emulator, tmp_path, "--drift-period", "2").start()
    try:
        clusters = [
            make_cluster(kube, "alpha", spec=identity("ident-a")),
            make_cluster(kube, "beta", spec=identity("ident-b")),
        ]
        vm_a, _ = make_machine(kube, "alpha-md-0-a", cluster="alpha")
        vm_b, _ = make_machine(kube, "beta-md-0-b", cluster="beta")
        assert wait_for(lambda: ready(kube, vm_a) and ready(kube, vm_b), 90), ctl.text()[-3000:]
        assert vm_names(emulator, CUSTOMER, token_a) == ["alpha-md-0-a"]
        assert vm_names(emulator, OTHER, token_b) == ["beta-md-0-b"]
        for obj in clusters:
            c = condition(kube, obj, "IdentityReady")
            assert c.get("status") == "True", c
        # the drift passes read each cluster with its own identity: nothing is found lost
        assert wait_for(lambda: ctl.text().count("drift pass of be-gen-1") >= 2, 30), ctl.text()[-3000:]
        assert ready(kube, vm_a) and ready(kube, vm_b) and "VMDeleted" not in str(kube.events())
        for token in (token_a, token_b):
            assert token not in ctl.text() and token not in str(kube.events())
        # a machine never moves to another customer: the identity of a cluster cannot change
        code, out = kube.merge(clusters[1], {"spec": {"identityRef": {"name": "ident-a"}}})
        assert code == 422 and "identityRef cannot change once set" in out["message"], (code, out)
        # the finalizers delete with the cluster's identity too: the machines', then the clusters'
        for obj in (vm_a, vm_b):
            assert kube.delete(obj)[0] == 200
        assert wait_for(lambda: kube.get(vm_a) is None and kube.get(vm_b) is None, 60), ctl.text()[-3000:]
        assert vm_names(emulator, CUSTOMER, token_a) == [] and vm_names(emulator, OTHER, token_b) == []
        for obj in clusters:
            assert kube.delete(obj)[0] == 200
        assert wait_for(lambda: all(kube.get(obj) is None for obj in clusters), 60), ctl.text()[-3000:]
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]
    # `get` by name is all the controller needs on the identities' Secrets: never a list or a watch
    reads = [r for r in kube.requests() if "/secrets" in r["path"] and r["method"] != "POST"]
    paths = {r["path"] for r in reads}
    assert {"/api/v1/namespaces/default/secrets/ident-a", "/api/v1/namespaces/default/secrets/ident-b"} <= paths
    for request in reads:
        assert request["method"] == "GET" and re.fullmatch(r"/api/v1/namespaces/[^/]+/secrets/[^/?]+", request["path"])
        assert "watch" not in request["query"], request


def test_a_cluster_in_a_namespace_the_identity_does_not_allow_is_refused_and_nothing_is_done(kube, emulator, tmp_path):
    """A VCOCluster in namespace tenant-b names the identity Secret of namespace default, which does not list
    tenant-b: ``IdentityReady`` False ``IdentityNotAllowed``, a Warning Event, and no platform write at all; once
    the Secret's annotation lists tenant-b, the cluster is provisioned with it."""
    token_a = grant(emulator, CUSTOMER)
    secret = identity_secret(kube, "ident-a", emulator, CUSTOMER, token_a, allowed="tenant-c")
    before = emulator.snapshot()
    ctl = Controller(kube, emulator, tmp_path).start()
    try:
        vcc = make_cluster(kube, "gamma", namespace="tenant-b", spec=identity("ident-a", "default"))
        assert wait_for(lambda: condition(kube, vcc, "IdentityReady").get("reason") == "IdentityNotAllowed", 30), (
            ctl.text()[-3000:]
        )
        got = condition(kube, vcc, "IdentityReady")
        assert got["status"] == "False" and "may not be used from namespace tenant-b" in got["message"], got
        assert condition(kube, vcc, "Ready").get("status") == "False"
        warned = [e for e in kube.events("tenant-b") if e["reason"] == "IdentityNotAllowed"]
        assert warned and warned[0]["type"] == "Warning"
        assert not (kube.get(vcc).get("status") or {}).get("cloudspaceID")
        assert emulator.snapshot() == before, "nothing done on the platform"
        assert token_a not in ctl.text() and token_a not in str(kube.events("tenant-b"))

        kube.merge(secret, {"metadata": {"annotations": {ANNOTATION: "tenant-c, tenant-b"}}})
        kube.merge(vcc, {"metadata": {"labels": {"touched": "1"}}})  # a change of the VCOCluster wakes it
        assert wait_for(lambda: condition(kube, vcc, "IdentityReady").get("status") == "True", 30), ctl.text()[-3000:]
        assert wait_for(lambda: (kube.get(vcc).get("status") or {}).get("cloudspaceID"), 30), ctl.text()[-3000:]
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]


def test_a_rotated_identity_is_used_from_then_on(kube, emulator, tmp_path):
    """The identity's token is rotated on the platform (the old one refused from then on): a new machine of the
    cluster fails with a 401 that names the identity (never a token); once the Secret holds the new token, the
    next try makes the machine's VM with it."""
    old = grant(emulator, OTHER)
    new = "tok-rotated-%s" % uuid.uuid4().hex
    identity_secret(kube, "ident-b", emulator, OTHER, old)
    ctl = Controller(kube, emulator, tmp_path).start()
    try:
        make_cluster(kube, "beta", spec=identity("ident-b"))
        first, _ = make_machine(kube, "beta-md-0-one", cluster="beta")
        assert wait_for(lambda: ready(kube, first), 60), ctl.text()[-3000:]

        emulator.admin("POST", "/credentials", {"rotate": old, "token": new})
        second, _ = make_machine(kube, "beta-md-0-two", cluster="beta")
        refused = "the platform refused the identity Secret default/ident-b, for customer " + OTHER
        assert wait_for(lambda: refused in str(kube.events()), 60), ctl.text()[-3000:]
        assert not ready(kube, second)

        identity_secret(kube, "ident-b", emulator, OTHER, new)
        assert wait_for(lambda: ready(kube, second), 90), ctl.text()[-3000:]
        assert vm_names(emulator, OTHER, new) == ["beta-md-0-one", "beta-md-0-two"]
        for where, text in [("the log", ctl.text()), ("the Events", str(kube.events()))]:
            assert old not in text and new not in text, where
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]


def test_an_identity_added_to_a_placed_cluster_is_refused(kube, emulator, tmp_path):
    """A cluster placed with the controller's own credential is given an identityRef afterwards (the CRD refuses a
    changed one; an added one it cannot tell from a first one): refused, ``IdentityInvalid``, and no platform write,
    since its machines live in the account it was placed in; taken away again, the cluster is ready again."""
    token_b = grant(emulator, OTHER)
    identity_secret(kube, "ident-b", emulator, OTHER, token_b)
    ctl = Controller(kube, emulator, tmp_path).start()
    try:
        vcc = make_cluster(kube, "delta")
        assert wait_for(lambda: condition(kube, vcc, "CloudspaceReady").get("status") == "True", 30), ctl.text()[-3000:]
        assert "identity" not in kube.get(vcc)["status"]
        before = emulator.snapshot()
        code, out = kube.merge(vcc, {"spec": identity("ident-b")})
        assert code == 200, out
        assert wait_for(lambda: condition(kube, vcc, "IdentityReady").get("reason") == "IdentityInvalid", 30), (
            ctl.text()[-3000:]
        )
        got = condition(kube, vcc, "IdentityReady")
        assert "placed with the controller's own credential" in got["message"], got
        assert condition(kube, vcc, "Ready").get("status") == "False"
        assert emulator.snapshot() == before and vm_names(emulator, OTHER, token_b) == []
        with WhiteskyClient(emulator.url, token_b, OTHER) as client:
            assert client.cloudspaces() == [], "nothing made in the other customer"
        code, out = kube.merge(vcc, {"spec": {"identityRef": None}})
        assert code == 200, out
        assert wait_for(lambda: condition(kube, vcc, "IdentityReady").get("status") == "True", 30), ctl.text()[-3000:]
        assert condition(kube, vcc, "CloudspaceReady").get("status") == "True"
    finally:
        assert ctl.stop() == 0, ctl.text()[-3000:]
