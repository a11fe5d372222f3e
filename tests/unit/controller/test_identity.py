"""The identity of a VCOCluster (``capvco_controller.identity``): which namespaces may use an identity Secret, and
the connection kept per version of the Secret (a changed Secret is used from then on)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capvco_controller import identity
from capvco_controller.identity import ALLOWED, Identities, IdentityError, Ref, allowed

NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)


def test_its_own_namespace_may_use_a_secret_without_the_annotation():
    assert allowed("tenant-a", {}, "tenant-a")
    assert not allowed("tenant-a", {}, "tenant-b")


def test_the_annotation_lists_the_other_namespaces_or_every_one():
    listed = {ALLOWED: " tenant-b ,tenant-c,"}
    assert allowed("tenant-a", listed, "tenant-b") and allowed("tenant-a", listed, "tenant-c")
    assert not allowed("tenant-a", listed, "tenant-d")
    assert not allowed("tenant-a", {ALLOWED: "tenant-bb"}, "tenant-b"), "a whole name, never a prefix"
    assert not allowed("tenant-a", {"other/annotation": "tenant-b"}, "tenant-b")
    assert allowed("tenant-a", {ALLOWED: "*"}, "anywhere")


@given(home=NAMES, user=NAMES, listed=st.lists(NAMES, max_size=4))
def test_a_namespace_is_allowed_exactly_when_it_is_the_secrets_or_listed(home, user, listed):
    annotations = {ALLOWED: ",".join(listed)}
    assert allowed(home, annotations, user) == (user == home or user in listed)


class Secrets:
    def __init__(self):
        self.objects = {}
        self.reads = 0

    def put(self, namespace, name, data, annotations=None, version="1"):
        self.objects[(namespace, name)] = (data, dict(annotations or {}), version)

    def secret_object(self, namespace, name):
        self.reads += 1
        return self.objects.get((namespace, name))


DATA = {"api_url": "https://cloud.example/api/1", "customer_id": "acme", "api_token": "t0ken-one"}


def test_refusals_name_the_secret_never_its_token():
    secrets, ids = Secrets(), Identities({})
    ref = Ref("tenant-a", "ident")
    with pytest.raises(IdentityError) as got:
        ids.resolve(secrets, ref, "tenant-a")
    assert got.value.reason == identity.NOT_FOUND and "Secret tenant-a/ident" in str(got.value)
    secrets.put("tenant-a", "ident", DATA)
    with pytest.raises(IdentityError) as got:
        ids.resolve(secrets, ref, "tenant-b")
    assert got.value.reason == identity.NOT_ALLOWED and "t0ken" not in str(got.value)
    secrets.put("tenant-a", "ident", dict(DATA, api_token=" "), version="2")
    with pytest.raises(IdentityError) as got:
        ids.resolve(secrets, ref, "tenant-a")
    assert got.value.reason == identity.INVALID and "api_token" in str(got.value)
    assert ids.tokens() == ()


def test_a_new_version_of_the_secret_gives_a_new_connection():
    secrets, ids = Secrets(), Identities({})
    ref = Ref("tenant-a", "ident")
    secrets.put("tenant-a", "ident", DATA, version="7")
    one, key = ids.resolve(secrets, ref, "tenant-a")
    again, same = ids.resolve(secrets, ref, "tenant-a")
    assert (one, key) == (again, same) and one.customer_id == "acme" and one.api_token == "t0ken-one"
    assert secrets.reads == 2, "read on every reconcile that needs it: a change is seen at once"
    secrets.put("tenant-a", "ident", dict(DATA, api_token="t0ken-two"), version="8")
    two, key2 = ids.resolve(secrets, ref, "tenant-a")
    assert two.api_token == "t0ken-two" and key2 != key
    assert ids.tokens() == ("t0ken-one", "t0ken-two"), "both scrubbed from then on"


def test_a_ref_defaults_to_the_clusters_namespace():
    assert Ref.of({"identityRef": {"kind": "Secret", "name": "x"}}, "ns") == Ref("ns", "x")
    assert Ref.of({"identityRef": {"kind": "Secret", "name": "x", "namespace": "other"}}, "ns") == Ref("other", "x")
    assert Ref.of({}, "ns") is None


def test_a_placed_cluster_keeps_the_identity_it_was_placed_with():
    ref = Ref("tenant-a", "ident")
    identity.unchanged({}, ref)  # not placed yet: any identity
    identity.unchanged({"cloudspaceID": "cs-1"}, None)  # placed before identities: the controller's own
    identity.unchanged({"cloudspaceID": "cs-1", "identity": "tenant-a/ident"}, ref)
    for status, now in [
        ({"cloudspaceID": "cs-1"}, ref),  # added
        ({"cloudspaceID": "cs-1", "identity": "tenant-a/ident"}, None),  # removed
        ({"cloudspaceID": "cs-1", "identity": "tenant-a/ident"}, Ref("tenant-a", "other")),  # changed
    ]:
        with pytest.raises(IdentityError) as got:
            identity.unchanged(status, now)
        assert got.value.reason == identity.INVALID
