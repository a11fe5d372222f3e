"""The project's one table of operations (``api.OPERATIONS``: the client's and the emulator's), checked against the
platform's Swagger spec, and the emulator's routes against that table."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.platform import caller
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.api import OPERATIONS
from whitesky_emulator import params as emulator_params
from whitesky_emulator.app import OPS

from helpers import ROOT, SPEC_ABSENT
from spec import load_spec, operations

SPEC = load_spec()
needs_spec = pytest.mark.skipif(SPEC is None, reason=SPEC_ABSENT)


def placeholders(path):
    return re.sub(r"\{[^}]+\}", "{}", path)


@pytest.fixture(scope="module")
def spec_ops():
    return operations(SPEC)


@needs_spec
def test_spec_base_path():
    assert SPEC["basePath"] == "/api/1"


@needs_spec
@pytest.mark.parametrize("op_id", sorted(OPERATIONS))
def test_operation_matches_spec(op_id, spec_ops):
    """Every entry of the one table, the client's and the emulator-only ones: method, path, query and body names."""
    method, path, query, body = OPERATIONS[op_id]
    assert op_id in spec_ops, "%s is not an operation of the spec" % op_id
    s_method, s_path, s_params, s_body = spec_ops[op_id]
    assert method == s_method
    assert path == s_path, "path parameters must be named as in the spec"
    for name in query:
        assert s_params.get(name) == "query", "%s: %r is not a query parameter in the spec" % (op_id, name)
    for name in body:
        assert name in s_body, "%s: %r is not a body field in the spec" % (op_id, name)
    # every query parameter the spec requires must be one the client can send
    spec_required = {
        p["name"]
        for p in SPEC["paths"][s_path][s_method.lower()].get("parameters", [])
        if p.get("required") and p["in"] == "query"
    }
    assert spec_required <= set(query), "%s: the client cannot send required %s" % (op_id, spec_required - set(query))
    # a body the spec requires has its required fields in the table
    body_params = [p for p in SPEC["paths"][s_path][s_method.lower()].get("parameters", []) if p["in"] == "body"]
    if body_params and body_params[0].get("required") and "$ref" in body_params[0].get("schema", {}):
        definition = SPEC["definitions"][body_params[0]["schema"]["$ref"].split("/")[-1]]
        missing = set(definition.get("required") or ()) - set(body)
        assert not missing, "%s: the table lacks required body field(s) %s" % (op_id, sorted(missing))


@needs_spec
@pytest.mark.parametrize("method,path,op_id", [(m, p, o) for m, p, o, _mut, _f in OPS])
def test_emulator_route_matches_spec(method, path, op_id, spec_ops):
    assert op_id in spec_ops, "the emulator serves %s, which the spec does not have" % op_id
    s_method, s_path, _params, _body = spec_ops[op_id]
    assert (method, path) == (s_method, s_path)


def test_the_emulator_serves_exactly_the_tables_operations_at_their_paths():
    """One table: every operation the project knows is served, at the method and path the table gives."""
    served = {o: (m, p) for m, p, o, _mut, _f in OPS}
    assert len(served) == len(OPS), "an operation served twice"
    assert served == {op_id: (op.method, op.path) for op_id, op in OPERATIONS.items()}
    assert set(emulator_params.OPERATIONS) == set(OPERATIONS), "the emulator validates every operation it serves"


def test_the_client_sends_by_the_one_table():
    assert caller.OPERATIONS is OPERATIONS


def test_the_emulator_reads_the_table_without_the_collection_on_its_path():
    """``make venv`` without ``make link``: the emulator reads ``plugins/module_utils/platform/api.py`` as a file."""
    code = (
        "import sys; sys.modules['ansible_collections'] = None\n"  # no collection importable
        "from whitesky_emulator.app import OPS\n"
        "print(len(OPS))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == str(len(OPS)), out


def spec_params(spec, operation_id):
    for item in spec["paths"].values():
        for method, op in item.items():
            if method != "parameters" and op.get("operationId") == operation_id:
                return [p for p in item.get("parameters", []) + op.get("parameters", []) if p["in"] != "header"]
    raise KeyError(operation_id)


@needs_spec
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
        same_body(definition_of(body[0]["schema"]), mine["body"], "body")


def definition_of(schema):
    """The definition a schema refers to (``$ref``, or an ``allOf`` of one ``$ref``), or None."""
    ref = schema.get("$ref") or (schema.get("allOf") or [{}])[0].get("$ref")
    return SPEC["definitions"][ref.split("/")[-1]] if ref else None


def same_body(definition, mine, where):
    """A body of the emulator's table against its definition in the spec, nested objects included: the same
    fields, the same required ones, the same types and allowed values, closed."""
    assert set(definition["properties"]) == set(mine["properties"]), where
    assert set(definition.get("required") or ()) == set(mine["required"]), "%s: required fields" % where
    assert definition.get("additionalProperties") is False, "%s: a closed schema, as the emulator enforces" % where
    for name, prop in definition["properties"].items():
        nested = definition_of(prop)
        if nested is not None:
            assert isinstance(mine["properties"][name], dict), "%s.%s is an object in the spec" % (where, name)
            same_body(nested, mine["properties"][name], "%s.%s" % (where, name))
            continue
        assert mine["properties"][name] == prop["type"], "%s.%s: the spec's type is %s" % (where, name, prop["type"])
        if prop.get("enum"):
            assert tuple(mine["enum"].get(name) or ()) == tuple(prop["enum"]), "%s.%s: allowed values" % (where, name)
