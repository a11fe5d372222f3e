"""The emulator against the platform's own Swagger spec, driven by schemathesis (a generator written elsewhere).

Every operation the emulator serves gets generated requests, valid and
invalid (seeded and bounded: ``CAPVCO_CONFORMANCE_EXAMPLES`` per operation,
25 by default).  Checks: no answer is a server error, every answer's body
conforms to the spec's schema for its status, and its content type too.
Not checked: that every status is one the spec lists (the spec lists only
200 for most operations, so every 400, 404 and 409 would count); that is the
spec's own looseness, written down in docs/known-limitations.md.

The spec is narrowed before generation only where the emulator's world
decides: the customer is the emulator's one customer, and a location is one
of its two (or one that does not exist), so requests get past the 403/404
into the operations themselves.  A note's id is one the emulator makes, so a
generated request names either a placeholder, replaced by a note made just
before it is sent, or a note that does not exist.
"""

from __future__ import annotations

import copy

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
)
from schemathesis.config import SchemathesisConfig

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError
from whitesky_emulator.app import OPS

from helpers import CUSTOMER, SPEC_ABSENT, Emulator
from properties import env_examples
from spec import load_spec

SPEC = load_spec()
EXAMPLES = env_examples("CAPVCO_CONFORMANCE_EXAMPLES", 25)
#: The placeholder a generated request names a note by, replaced by a real note's id (see ``with_a_note``).
A_NOTE = "a-note"
#: An external network of the emulator's cs-demo location.
NETWORK = 101
SERVED = {operation_id for _method, _path, operation_id, _mutating, _func in OPS}
pytestmark = pytest.mark.skipif(SPEC is None, reason=SPEC_ABSENT)


def narrowed(spec):
    """The spec, with only the operations the emulator serves, and its customer and locations fixed."""
    out = copy.deepcopy(spec)
    paths = {}
    for path, item in out["paths"].items():
        ops = {m: op for m, op in item.items() if m != "parameters" and op.get("operationId") in SERVED}
        if not ops:
            continue
        for param in item.get("parameters", []) + [p for op in ops.values() for p in op.get("parameters", [])]:
            if param.get("in") == "path" and param["name"] == "customer_id":
                param["enum"] = [CUSTOMER]
            if param.get("in") == "path" and param["name"] == "location":
                param["enum"] = ["be-gen-1", "nl-ams-1", "xx-nowhere-1"]
            if param.get("in") == "path" and param["name"] == "cloudspace_id":
                param["enum"] = ["cs-demo", "cs-ams", "cs-nowhere"]
            if param.get("in") == "path" and param["name"] == "note_id":
                param["enum"] = [A_NOTE, "no-such-note"]
        paths[path] = dict(ops, **({"parameters": item["parameters"]} if "parameters" in item else {}))
    out["paths"] = paths
    return out


#: The token is the test's own (every request carries it), so no security parameter is generated: a case whose
#: negation was a missing Authorization header, which the test then sends, is no negative case.
CONFIG = SchemathesisConfig.from_dict(
    {
        "generation": {
            "mode": "all",
            "max-examples": EXAMPLES,
            "deterministic": True,
            "with-security-parameters": False,
        }
    }
)
schema = schemathesis.openapi.from_dict(
    narrowed(SPEC) if SPEC else {"swagger": "2.0", "paths": {}, "info": {}}, config=CONFIG
)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    emu = Emulator(tmp_path_factory.mktemp("conformance")).start()
    with emu.client() as client:  # a few VMs, so small vm_ids name real ones; each with a NIC, so that their
        for i in range(3):  # info and the listing show network_interfaces (closed schemas, each its own)
            vm = client.create_vm("cs-demo", name="conf-%d" % i, description="conformance", vcpus=1, memory=1024)
            client.attach_nic("cs-demo", vm, NETWORK)
    yield emu
    emu.stop()


def test_every_served_operation_is_in_the_spec():
    assert {
        op.get("operationId") for item in SPEC["paths"].values() for op in item.values() if isinstance(op, dict)
    } >= SERVED


def with_a_note(case, live):
    """A case that names the placeholder note gets a real one, made now in its cloudspace (or in cs-demo).

    A generated deleteCloudspace may have taken the cloudspace already: the case then keeps the placeholder.
    """
    params = case.path_parameters or {}
    if params.get("note_id") != A_NOTE:
        return
    cs = params.get("cloudspace_id") if params.get("cloudspace_id") in ("cs-demo", "cs-ams") else "cs-demo"
    with live.client() as client:
        try:
            client.create_cloudspace_note(cs, "conformance", "a note to update or delete")
            params["note_id"] = client.cloudspace_notes(cs)[-1]["id"]
        except ApiError as exc:
            if exc.status != 404:
                raise


def cases(test):
    """The spec's cases for ``test``; without the spec, one placeholder that the module's mark skips (schemathesis
    refuses a test that matches no operation at collection, before any skip applies)."""
    return schema.parametrize()(test) if SPEC else pytest.mark.parametrize("case", [None])(test)


@cases
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_the_emulator_conforms_to_the_spec(case, live):
    with_a_note(case, live)
    case.call_and_validate(
        base_url=live.url.rsplit("/api/1", 1)[0] + SPEC.get("basePath", "/api/1"),
        headers={"Authorization": "Bearer " + live.token},
        checks=[not_a_server_error, response_schema_conformance, content_type_conformance, negative_data_rejection],
    )


def call(operation_id, live, **parts):
    """One request to the emulator, made by schemathesis from the spec's operation, and its answer checked against
    the spec's schema for it."""
    case = schema.find_operation_by_id(operation_id).Case(**parts)
    return case.call_and_validate(
        base_url=live.url.rsplit("/api/1", 1)[0] + SPEC.get("basePath", "/api/1"),
        headers={"Authorization": "Bearer " + live.token},
        checks=[not_a_server_error, response_schema_conformance, content_type_conformance],
    )


def test_where_the_emulator_used_to_differ_from_the_spec(live):
    """A VM's info names its NICs' type ``nic_type`` (VmInfoModelNetworkInterfaces, closed), a listing names it
    ``external_network_type`` (VmsModelNetworkInterfaces, closed); createCloudspace refuses a firewall without its
    required ``private``, as the platform's validation does."""
    where = {"customer_id": CUSTOMER, "cloudspace_id": "cs-demo"}
    listed = call("listCloudspaceVirtualMachines", live, path_parameters=where).json()["result"]
    vm = next(v for v in listed if v["network_interfaces"])
    assert {n["external_network_type"] for n in vm["network_interfaces"]} == {"external"}
    info = call("getVirtualMachineInfo", live, path_parameters=dict(where, vm_id=vm["vm_id"])).json()
    assert {n["nic_type"] for n in info["network_interfaces"]} == {"external"}
    refused = call(
        "createCloudspace",
        live,
        path_parameters={"customer_id": CUSTOMER},
        body={"name": "no-private", "location": "be-gen-1", "firewall": {"external_network_id": NETWORK}},
    )
    assert refused.status_code == 400 and "firewall.private" in refused.json()["message"], refused.text


def test_a_locations_images_conform_and_hold_the_image_the_docs_boot(live):
    """listCustomerImages (the spec's Images: a closed ImagesModel per image), with and without the logos; image 12,
    which the tests, the examples and the docs boot, is in both locations."""
    for location in ("be-gen-1", "nl-ams-1"):
        where = {"customer_id": CUSTOMER, "location": location}
        images = call("listCustomerImages", live, path_parameters=where).json()["result"]
        assert 12 in [i["image_id"] for i in images] and all("logo" not in i for i in images)
        logos = call("listCustomerImages", live, path_parameters=where, query={"include_logo": True}).json()
        assert all("logo" in i for i in logos["result"])
    missing = call("listCustomerImages", live, path_parameters={"customer_id": CUSTOMER, "location": "xx-nowhere-1"})
    assert missing.status_code == 404
