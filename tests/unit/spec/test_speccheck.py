"""A cluster spec as given, checked whole (speccheck): its defaults and typed form, every error by its path, a
secret never shown, any input a spec or an input error.  No server: the checks against the emulator are
tests/integration/test_cluster_spec.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import speccheck
from ansible_collections.whitesky.capvco.plugins.module_utils.spec import typed as spec_typed
from ansible_collections.whitesky.capvco.plugins.module_utils.spec.pool import GpuSpec

from properties import examples

MINIMAL = {"cluster": {"name": "ty", "location": "be-gen-1"}}


def test_defaults_and_conversions():
    got = speccheck.check(
        dict(
            MINIMAL,
            control_plane={"image": 12},
            pools=[
                {
                    "name": "gpu",
                    "replicas": "2",
                    "vcpus": 4,
                    "memory": 8192,
                    "image": "14",
                    "gpu": {"type": "T4", "driverVersion": 550},
                }
            ],
        )
    )
    typed, got = got, got.as_dict()
    assert (typed.name, typed.cloudspace, typed.names) == ("ty", "ty", ["ty-cp-0", "ty-gpu-0", "ty-gpu-1"])
    assert typed.pools[1].gpu == GpuSpec("T4", 1, "550") and typed.pools[0].gpu is None
    assert got["cluster"]["cloudspace"] == "ty"
    assert got["control_plane"] == {"replicas": 1, "vcpus": 2, "memory": 4096, "image": 12}
    assert [p.image for p in typed.pools] == [12, 14]
    assert got["pools"][0]["replicas"] == 2 and got["pools"][0]["gpu"] == {
        "type": "T4",
        "count": 1,
        "driverVersion": "550",
    }
    assert [p["names"] for p in spec_typed.pools(got)] == [["ty-cp-0"], ["ty-gpu-0", "ty-gpu-1"]]


@pytest.mark.parametrize(
    "spec, error",
    [
        ({}, "cluster: is required"),
        ({"cluster": {"name": "ty"}}, "cluster.location: is required"),
        (
            dict(MINIMAL, control_plane={"replicas": True}),
            "control_plane.replicas: must be an integer, got a boolean True",
        ),
        (dict(MINIMAL, control_plane={"replicas": 101}), "control_plane.replicas: must be 100 or less, got 101"),
        (dict(MINIMAL, pools={"name": "x"}), "pools: must be a list, got a mapping"),
        (dict(MINIMAL, sriov={"enabled": True, "networks": [], "credential": "s3cret"}), "sriov.networks: is required"),
        (dict(MINIMAL, sriov={"enabled": "maybe"}), "sriov.enabled: must be true or false"),
        (dict(MINIMAL, sriov={"credential": 5}), "sriov.credential: must be a string, got an integer (hidden)"),
        (dict(MINIMAL, sriov={"kubeconfig": "kube/config"}), "sriov.kubeconfig: 'kube/config' is not an absolute path"),
        (
            dict(MINIMAL, cluster={"name": "x" * 33, "location": "l"}),
            "cluster.name: must be at most 32 characters, got 33",
        ),
        (dict(MINIMAL, controlplane={}), "controlplane: unknown key; did you mean control_plane?"),
        (
            dict(MINIMAL, pools=[{"name": "a", "replicas": 1, "vcpus": 1, "memory": 512, "disk_size": 3}]),
            "pools[0].disk_size: unknown key; did you mean diskSize?",
        ),
        (
            dict(MINIMAL, bogus=1),
            "bogus: unknown key; valid keys: cluster, control_plane, first_boot, pools, remove_pools, sriov",
        ),
        # a pool removed is one the spec no longer lists (issue 46)
        (
            dict(MINIMAL, pools=[{"name": "cpu", "replicas": 0, "vcpus": 1, "memory": 512}], remove_pools=["cpu"]),
            "remove_pools[0]: 'cpu' is listed in pools[0]: a pool removed is one the spec no longer lists",
        ),
        (dict(MINIMAL, remove_pools=["cp"]), "remove_pools[0]: 'cp' is the control plane"),
        (dict(MINIMAL, remove_pools=["Bad"]), "remove_pools[0]: 'Bad' does not match"),
        (dict(MINIMAL, remove_pools="cpu"), "remove_pools: must be a list"),
    ],
)
def test_errors_name_their_path(spec, error):
    with pytest.raises(InputError) as exc:
        speccheck.check(spec)
    assert error in str(exc.value)
    assert exc.value.details["spec_errors"]


def test_a_secret_is_never_in_an_error():
    with pytest.raises(InputError) as exc:
        speccheck.check(dict(MINIMAL, sriov={"enabled": True, "credential": ["tok-3f9a"]}))
    assert "tok-3f9a" not in str(exc.value)


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=True), st.text(max_size=12)
)
_JSON = st.recursive(
    _SCALARS,
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=12), kids, max_size=5)),
    max_leaves=25,
)
_KEYS = st.sampled_from(
    ["cluster", "control_plane", "pools", "sriov", "first_boot", "name", "replicas", "gpu", "count"]
)


@settings(max_examples=examples(400), deadline=None)
@given(st.dictionaries(_KEYS, _JSON, max_size=5))
def test_any_input_is_a_spec_or_an_input_error(raw):
    """Fuzz: whatever the input, the result is a checked spec or an InputError that names a path, never a crash."""
    try:
        got = speccheck.check(raw)
    except InputError as exc:
        assert exc.details["spec_errors"] and all(": " in e for e in exc.details["spec_errors"])
    else:
        assert speccheck.check(got.as_dict()) == got, "a checked spec checks again to itself"


@pytest.mark.parametrize(
    "spec, error",
    [
        (dict(MINIMAL, sriov=[1]), "sriov: must be a mapping, got a list [1]"),
        (dict(MINIMAL, pool=[]), "pool: unknown key; did you mean pools?"),
        (
            dict(
                MINIMAL,
                pools=[{"name": "g", "replicas": 1, "vcpus": 1, "memory": 512, "gpu": {"type": "NVIDIA A100\n"}}],
            ),
            "pools[0].gpu.type: 'NVIDIA A100\\n' does not match",
        ),
        (
            dict(MINIMAL, sriov={"networks": [{"name": "n", "network": "x", "routes": [{"dst": "not-a-cidr"}]}]}),
            "sriov.networks[0].routes[0].dst: 'not-a-cidr' is not a CIDR",
        ),
        (
            dict(MINIMAL, sriov={"networks": [{"name": "n", "network": "x"}, {"name": "n", "network": "y"}]}),
            "sriov.networks[1].name: 'n' is taken (by sriov.networks[0])",
        ),
    ],
)
def test_what_a_stranger_found(spec, error):
    with pytest.raises(InputError) as exc:
        speccheck.check(spec)
    assert error in str(exc.value)


def test_a_misspelt_variable_of_the_spec_is_refused():
    """The playbooks read the spec from variables: a variable ``pool`` or ``control-plane`` would go unseen."""
    with pytest.raises(InputError) as exc:
        speccheck.check(MINIMAL, variables=["pool", "control-plane", "cluster", "cluster_name", "cloudspace", "omit"])
    assert exc.value.details["spec_errors"] == [
        "control-plane: unknown variable of the cluster spec; did you mean control_plane?",
        "pool: unknown variable of the cluster spec; did you mean pools?",
    ]


def test_secrets_are_found_wherever_the_spec_holds_them():
    assert speccheck.secrets(dict(MINIMAL, sriov={"credential": "tok"})) == ["tok"]
    assert speccheck.secrets({"sriov": {"credential": 12345678}}) == ["12345678"]
    assert speccheck.secrets({"sriov": "x"}) == [] and speccheck.secrets(None) == []


def test_a_driver_version_yaml_read_as_a_number_says_to_quote_it():
    spec = {
        "cluster": {"name": "a", "location": "be-gen-1", "cloudspace": "a"},
        "pools": [
            {
                "name": "gpu",
                "replicas": 1,
                "vcpus": 4,
                "memory": 8192,
                "gpu": {"type": "NVIDIA A100", "driverVersion": 550.127},
            }
        ],
    }
    with pytest.raises(InputError) as caught:
        speccheck.check(spec)
    assert (
        'pools[0].gpu.driverVersion: must be a string, got a number 550.127; quote it (driverVersion: "550.127")'
        in str(caught.value)
    )


def test_a_machine_without_an_image_is_refused_naming_the_field_and_where_to_find_one():
    """Issue 39: a machine created without an image booted nothing (the platform showed image 0). The control plane
    and every pool with replicas need one; a pool at zero creates nothing and needs none; 0 is no image."""
    spec = dict(
        MINIMAL,
        control_plane={"replicas": 1},
        pools=[
            {"name": "gpu", "replicas": 2, "vcpus": 4, "memory": 8192},
            {"name": "idle", "replicas": 0, "vcpus": 4, "memory": 8192},
        ],
    )
    with pytest.raises(InputError) as caught:
        speccheck.check(spec)
    assert caught.value.details["spec_errors"] == [
        "control_plane.image: is required to create its 1 machine(s): the id of the image they boot, from location "
        "'be-gen-1' (whitesky.capvco.image_info lists a location's images)",
        "pools[0].image: is required to create its 2 machine(s): the id of the image they boot, from location "
        "'be-gen-1' (whitesky.capvco.image_info lists a location's images)",
    ]
    assert "nothing was changed" in str(caught.value)
    spec["control_plane"] = {"replicas": 1, "image": 12}
    spec["pools"][0]["image"] = 14
    assert [p.image for p in speccheck.check(spec).pools] == [12, 14, None]
    assert speccheck.check(dict(MINIMAL, control_plane={"replicas": 0})).pools[0].image is None
    # the cluster alone, as a teardown (cluster_delete, machine_delete) takes it: no machine stated, no image asked
    # for (a converge of it refuses to create the default control plane without one: machines.need_size)
    assert speccheck.check(MINIMAL).pools[0].image is None
    with pytest.raises(InputError, match=r"control_plane\.image: must be 1 or more, got 0"):
        speccheck.check(dict(MINIMAL, control_plane={"image": 0}))
