"""The emulator's table of what each operation accepts (``whitesky_emulator/spec_params.py``) is generated from the
platform's Swagger spec (``python -m whitesky_emulator.gen_params``): the committed module is what the generator
writes, for exactly the operations of the collection's one table, and it carries none of the spec's prose."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.api import OPERATIONS
from whitesky_emulator import gen_params, params, spec_params

from helpers import ROOT, SPEC_ABSENT
from spec import CANDIDATES, load_spec

SPEC = load_spec()
needs_spec = pytest.mark.skipif(SPEC is None, reason=SPEC_ABSENT)


@needs_spec
def test_the_committed_table_is_what_the_generator_writes_from_the_spec():
    table = gen_params.table(SPEC, OPERATIONS)
    assert table == spec_params.OPERATIONS
    with open(spec_params.__file__, encoding="utf-8") as fh:
        assert fh.read() == gen_params.render(table), "run python -m whitesky_emulator.gen_params"


@needs_spec
def test_the_generators_check_mode_agrees():
    spec = next(path for path in CANDIDATES if path and os.path.exists(path))
    proc = subprocess.run(
        [sys.executable, "-m", "whitesky_emulator.gen_params", "--spec", spec, "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_one_entry_per_operation_of_the_one_table_in_its_order():
    assert list(spec_params.OPERATIONS) == list(OPERATIONS)
    assert params.OPERATIONS is spec_params.OPERATIONS


def test_the_generated_module_carries_no_prose():
    """Its strings are names, types and allowed values: short, one line, no sentence (its docstring aside)."""
    with open(spec_params.__file__, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    docstring = ast.get_docstring(tree, clean=False)
    strings = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value != docstring
    ]
    assert strings
    assert all(len(s) <= 40 and "\n" not in s and ". " not in s for s in strings), [s for s in strings if len(s) > 40]


def test_the_emulators_own_rules_are_in_the_table():
    """What the spec leaves open and the emulator decides: the least values, and os_name taken as free text."""
    for (operation_id, name), least in gen_params.MINIMUMS.items():
        assert spec_params.OPERATIONS[operation_id]["query"][name]["minimum"] == least
    for operation_id, name in gen_params.OPEN_ENUMS:
        assert spec_params.OPERATIONS[operation_id]["query"][name]["enum"] is None


class Query(dict):
    def getlist(self, key):
        value = self.get(key)
        return [] if value is None else [value]


@pytest.mark.parametrize(
    ("query", "where"),
    [
        ({"limit": "-1"}, "limit: must be 0 or more"),
        ({"limit": "x"}, "limit: must be an integer"),
        ({"limit": str(2**63)}, "limit: %d is out of range" % 2**63),
        ({"include_deleted": "maybe"}, "include_deleted: must be true or false"),
    ],
)
def test_a_query_parameter_that_does_not_fit_names_itself(query, where):
    with pytest.raises(params.Invalid, match=where):
        params.validate("listCustomerVGPUS", {"customer_id": "c", "location": "l"}, Query(query), b"")


def test_a_request_that_fits_comes_out_typed():
    path, args, body = params.validate(
        "deleteVGPU", {"customer_id": "c", "location": "l", "vgpu_id": "v"}, Query(permanently="true"), b""
    )
    assert (path, args, body) == ({"customer_id": "c", "location": "l", "vgpu_id": "v"}, {"permanently": True}, None)
    path, args, body = params.validate(
        "reserveAndAttachVGPUToVM",
        {"customer_id": "c", "cloudspace_id": "cs", "vm_id": "7", "gpu_id": "g"},
        Query(),
        b'{"vgpu_name": "n"}',
    )
    assert path["vm_id"] == 7 and body == {"vgpu_name": "n"}


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b"", "body: is required"),
        (b"[]", "body: must be a JSON object"),
        (b'{"name": "x", "location": "l", "firewall": {}}', "body.firewall.private: is required"),
        (b'{"name": "x", "location": "l", "firewall": {"private": true}, "x": 1}', "body.x: unknown field"),
        (
            b'{"name": "x", "location": "l", "firewall": {"private": true, "custom": {"type": "OS/2"}}}',
            "body.firewall.custom.type: must be one of",
        ),
    ],
)
def test_a_body_that_does_not_fit_names_the_field(raw, where):
    with pytest.raises(params.Invalid, match=where):
        params.validate("createCloudspace", {"customer_id": "c"}, Query(), raw)
