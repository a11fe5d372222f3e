"""The redact filter (plugins/filter/redact.py): what playbooks/tasks/spec_from_survey.yml shows of a cluster spec."""

from __future__ import annotations

from ansible_collections.whitesky.capvco.plugins.filter.redact import FilterModule
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import clusterspec

redact = FilterModule().filters()["redact"]


def secret_paths(field, path=()):
    if field.secret:
        yield path
    for key, sub in (field.fields or {}).items():
        yield from secret_paths(sub, path + (key,))
    if field.items is not None:
        yield from secret_paths(field.items, path + ("[]",))


def test_every_secret_of_the_spec_is_masked_and_lives_under_sriov():
    """cluster_create.yml gives the module the spec's ``sriov`` from the variable itself (the fact has it masked):
    so every secret field is under sriov, and redact masks each by its key."""
    paths = list(secret_paths(clusterspec.SPEC))
    assert paths and all(p[0] == "sriov" for p in paths), paths
    for path in paths:
        spec = value = {}
        for key in path[:-1]:
            value = value.setdefault(key, {})
        value[path[-1]] = "s3cret-value"
        assert "s3cret-value" not in repr(redact(spec))


def test_redact_keeps_what_is_no_secret():
    spec = {
        "cluster": {"name": "c", "location": "be-gen-1"},
        "pools": [{"name": "gpu", "replicas": 2, "gpu": {"count": 1, "driverVersion": "550"}}],
        "sriov": {
            "enabled": True,
            "credential": "agent-token",
            "credentialSecretRef": {"name": "mine", "key": "token"},
            "kubeconfig": "/k",
        },
        "api_token": 12345,
        "note": "agent-token",
    }
    out = redact(spec)
    assert out["sriov"] == {
        "enabled": True,
        "credential": "********",
        "credentialSecretRef": {"name": "mine", "key": "token"},
        "kubeconfig": "/k",
    }
    assert out["cluster"] == spec["cluster"] and out["pools"] == spec["pools"]
    assert out["api_token"] == "********" and out["note"] == "agent-token"
    assert redact(spec, secrets=["agent-token"])["note"] == "********"
    assert redact(None) is None and redact("x") == "x"


def test_a_given_secret_is_masked_wherever_it_occurs_and_the_scrubbers_forms_too():
    """Issue 46, point 8: a given secret inside a longer string, a URL's credentials and a kubeconfig's text showed it
    in full; a bearer token or a URL's password not given is masked by its form."""
    x = "Zq8wPLANTEDk3Vx"
    out = redact(
        {
            "note": "Bearer " + x,
            "url": "https://user:%s@host/" % x,
            "kubeconfig": "users:\n- name: a\n  user:\n    client-key-data: %s\n" % x,
            "list": ["before %s after" % x, 7, None, True],
            "alone": x,
        },
        secrets=[x],
    )
    assert x not in repr(out), out
    assert out["note"] == "Bearer ********" and out["url"] == "https://********@host/"
    assert out["list"] == ["before ******** after", 7, None, True] and out["alone"] == "********"
    assert "client-key-data: ********" in out["kubeconfig"]
    ungiven = redact({"a": "Authorization: Bearer abc.def", "b": "see http://me:pw@h:8/x"})
    assert ungiven == {"a": "Authorization: ********", "b": "see http://********@h:8/x"}, ungiven
    # one secret holding another: the longer is masked whole
    assert redact("k=%s" % (x + "tail"), secrets=[x, x + "tail"]) == "k=********"
    assert redact("plain text, no secret") == "plain text, no secret"
