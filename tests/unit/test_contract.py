"""The client's and the emulator's operations, checked against the platform's Swagger spec."""

from __future__ import annotations

import re

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.client import OPERATIONS
from whitesky_emulator import params as emulator_params
from whitesky_emulator.app import OPS

from helpers import SPEC_ABSENT
from spec import load_spec, operations

SPEC = load_spec()
pytestmark = pytest.mark.skipif(SPEC is None, reason=SPEC_ABSENT)


def placeholders(path):
    return re.sub(r"\{[^}]+\}", "{}", path)


@pytest.fixture(scope="module")
def spec_ops():
    return operations(SPEC)


def test_spec_base_path():
    assert SPEC["basePath"] == "/api/1"


@pytest.mark.parametrize("op_id", sorted(OPERATIONS))
def test_client_operation_matches_spec(op_id, spec_ops):
    method, path, query, body = OPERATIONS[op_id]
    assert op_id in spec_ops, "%s is not an operation of the spec" % op_id
    s_method, s_path, s_params, s_body = spec_ops[op_id]
    assert method == s_method
    assert path == s_path, "path parameters must be named as in the spec"
    for name in query:
        assert s_params.get(name) == "query", "%s: %r is not a query parameter in the spec" % (op_id, name)
    for name in body:
        assert name in s_body, "%s: %r is not a body field in the spec" % (op_id, name)
    required = {n for n, where in s_params.items() if where == "query"}
    # every query parameter the spec requires must be one the client can send
    spec_required = {
        p["name"]
        for p in SPEC["paths"][s_path][s_method.lower()].get("parameters", [])
        if p.get("required") and p["in"] == "query"
    }
    assert spec_required <= set(query), "%s: the client cannot send required %s" % (op_id, spec_required - set(query))
    assert set(query) <= required


@pytest.mark.parametrize("method,path,op_id", [(m, p, o) for m, p, o, _mut, _f in OPS])
def test_emulator_route_matches_spec(method, path, op_id, spec_ops):
    assert op_id in spec_ops, "the emulator serves %s, which the spec does not have" % op_id
    s_method, s_path, _params, _body = spec_ops[op_id]
    assert (method, path) == (s_method, s_path)


def test_emulator_serves_every_client_operation():
    served = {o for _m, _p, o, _mut, _f in OPS}
    assert set(OPERATIONS) <= served


def spec_params(spec, operation_id):
    for item in spec["paths"].values():
        for method, op in item.items():
            if method != "parameters" and op.get("operationId") == operation_id:
                return [p for p in item.get("parameters", []) + op.get("parameters", []) if p["in"] != "header"]
    raise KeyError(operation_id)


@pytest.mark.parametrize("operation_id", sorted(emulator_params.OPERATIONS))
def test_the_emulators_parameter_table_matches_the_spec(operation_id):
    mine = emulator_params.OPERATIONS[operation_id]
    theirs = spec_params(SPEC, operation_id)
    path = {p["name"]: p["type"] for p in theirs if p["in"] == "path"}
    assert path == dict(mine["path"], customer_id="string")
    query = {p["name"]: (p["type"], bool(p.get("required"))) for p in theirs if p["in"] == "query"}
    assert query == {n: (r["type"], r["required"]) for n, r in mine["query"].items()}
    for p in theirs:
        if p["in"] == "query" and p.get("enum") and p["name"] != "os_name":
            assert tuple(p["enum"]) == mine["query"][p["name"]]["enum"], p["name"]
    body = [p for p in theirs if p["in"] == "body"]
    assert bool(body) == ("body" in mine), "a body where the spec has one"
    if body:
        definition = SPEC["definitions"][body[0]["schema"]["$ref"].split("/")[-1]]
        assert set(definition["properties"]) == set(mine["body"]["properties"])
        assert set(definition.get("required") or ()) == set(mine["body"]["required"])
        assert definition.get("additionalProperties") is False, "a closed schema, as the emulator enforces"
