"""Write ``spec_params.py``, the table of what each operation accepts, from the platform's Swagger spec.

    python -m whitesky_emulator.gen_params [--spec SPEC.json] [--check]

For every operation of the collection's one table (``api_table.OPERATIONS``), in its order: each path and query
parameter's type, whether it is required and its allowed values, and the request body's closed schema (nested
objects included), as the spec declares them.  Nothing of the spec's prose is copied.  The spec is not shipped
(nor needed to run the emulator): the generated module is committed, and ``tests/unit/emulator/test_emulator_params.py``
checks that it is what this writes from the spec.  Where the emulator decides what the spec leaves open, the
rules are here (:data:`MINIMUMS`, :data:`OPEN_ENUMS`), not in the generated file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .api_table import OPERATIONS as API_OPERATIONS
from .api_table import ROOT
from .paramtypes import KINDS, Body, Field, OperationParams, QueryRule, body, q

#: The emulator's own rule where the spec gives none: the least value of these integer query parameters.
MINIMUMS = {
    ("listCustomerVGPUS", "limit"): 0,
    ("listCustomerVGPUS", "start_after"): 0,
    ("readFile", "size"): 0,
    ("readFile", "seek"): 0,
}
#: Query parameters whose allowed values the emulator does not enforce: createVirtualMachine's ``os_name`` (the
#: spec lists operating system names; the emulator takes any name, as it always has).
OPEN_ENUMS = {("createVirtualMachine", "os_name")}
#: Where the spec is looked for when ``--spec`` is not given (as ``tests/spec.py`` does).
SPEC_CANDIDATES = (
    os.environ.get("WHITESKY_SPEC", ""),
    os.path.join(os.path.dirname(ROOT), "shared", "reference", "whitesky-api.json"),
)
#: The generated module.
OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spec_params.py")
#: ruff's line length (pyproject.toml): the generated module is formatted as ``ruff format`` leaves it.
LINE = 120
#: The names the generated module writes the spec's types with (``paramtypes``).
KIND_NAMES = {"integer": "INT", "string": "STR", "boolean": "BOOL", "array": "ARRAY", "object": "OBJECT"}

Json = Mapping[str, Any]


# -- the table ---------------------------------------------------------------------------------------------------
def operation_parameters(spec: Json, operation_id: str) -> list[Json]:
    """The operation's parameters (its path's and its own), headers left out."""
    for item in spec["paths"].values():
        for method, operation in item.items():
            if method != "parameters" and operation.get("operationId") == operation_id:
                params = list(item.get("parameters", [])) + list(operation.get("parameters", []))
                return [p for p in params if p["in"] != "header"]
    raise KeyError("%s is not an operation of the spec" % operation_id)


def definition_of(spec: Json, schema: Json) -> Json | None:
    """The definition a schema refers to (``$ref``, or an ``allOf`` of one ``$ref``), or None."""
    ref = schema.get("$ref") or (schema.get("allOf") or [{}])[0].get("$ref")
    if not ref:
        return None
    found: Json = spec["definitions"][ref.split("/")[-1]]
    return found


def _kind(where: str, declared: object) -> str:
    if declared not in KINDS:
        raise ValueError("%s: type %r is not one the emulator validates (%s)" % (where, declared, ", ".join(KINDS)))
    return str(declared)


def body_schema(spec: Json, definition: Json, optional: bool, where: str) -> Body:
    """A body definition as a closed schema, nested objects included."""
    if definition.get("additionalProperties") is not False:
        raise ValueError("%s: the spec's schema is open; the emulator validates closed ones only" % where)
    properties: dict[str, Field] = {}
    enums: dict[str, list[str]] = {}
    for name, prop in definition["properties"].items():
        nested = definition_of(spec, prop)
        if nested is not None:
            properties[name] = body_schema(spec, nested, False, "%s.%s" % (where, name))
            continue
        properties[name] = _kind("%s.%s" % (where, name), prop.get("type"))
        if prop.get("enum"):
            enums[name] = list(prop["enum"])
    return body(properties, required=definition.get("required") or (), optional=optional, enum=enums)


def operation_params(spec: Json, operation_id: str) -> OperationParams:
    """What one operation accepts, as the spec declares it (and :data:`MINIMUMS`, :data:`OPEN_ENUMS`)."""
    path: dict[str, str] = {}
    query: dict[str, QueryRule] = {}
    bodies: list[Json] = []
    for p in operation_parameters(spec, operation_id):
        name, where = p["name"], "%s %s" % (operation_id, p["name"])
        if p["in"] == "path":
            kind = _kind(where, p.get("type"))
            if name == "customer_id":
                if kind != "string":
                    raise ValueError("%s: every path's customer_id is a string" % where)
                continue
            path[name] = kind
        elif p["in"] == "query":
            enum = None if (operation_id, name) in OPEN_ENUMS else p.get("enum")
            query[name] = q(
                _kind(where, p.get("type")),
                required=bool(p.get("required")),
                enum=enum,
                minimum=MINIMUMS.get((operation_id, name)),
            )
        elif p["in"] == "body":
            bodies.append(p)
        else:
            raise ValueError("%s: parameters in %r are not validated by the emulator" % (where, p["in"]))
    out: OperationParams = {"path": path, "query": query}
    if bodies:
        definition = definition_of(spec, bodies[0].get("schema", {}))
        if definition is None:
            raise ValueError("%s: a body without a definition" % operation_id)
        out["body"] = body_schema(spec, definition, not bodies[0].get("required"), "%s body" % operation_id)
    return out


def table(spec: Json, operation_ids: Iterable[str]) -> dict[str, OperationParams]:
    return {operation_id: operation_params(spec, operation_id) for operation_id in operation_ids}


# -- the module ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Code:
    """An expression of the generated module: an atom (``text``), or a bracketed sequence of parts (each already
    ``name=``- or ``key: ``-prefixed) that is written on one line when it fits, else one part a line."""

    text: str = ""
    opening: str = ""
    closing: str = ""
    parts: tuple[tuple[str, Code], ...] = ()
    single_comma: bool = False  # a one-item tuple: "(x,)"

    def flat(self) -> str:
        if not self.opening:
            return self.text
        inner = ", ".join(prefix + code.flat() for prefix, code in self.parts)
        return self.opening + inner + ("," if self.single_comma else "") + self.closing

    def lines(self, indent: int, prefix: str = "", suffix: str = "") -> list[str]:
        pad = " " * indent
        one = pad + prefix + self.flat() + suffix
        if len(one) <= LINE or not self.parts:
            return [one]
        out = [pad + prefix + self.opening]
        for part_prefix, code in self.parts:
            out += code.lines(indent + 4, part_prefix, ",")
        return [*out, pad + self.closing + suffix]


def atom(value: object) -> Code:
    return Code(text=json.dumps(value) if isinstance(value, str) else repr(value))


def call(name: str, args: Sequence[Code], kwargs: Sequence[tuple[str, Code]] = ()) -> Code:
    parts = [("", a) for a in args] + [(key + "=", value) for key, value in kwargs]
    return Code(opening=name + "(", closing=")", parts=tuple(parts))


def mapping(items: Mapping[str, Code]) -> Code:
    return Code(opening="{", closing="}", parts=tuple((json.dumps(key) + ": ", code) for key, code in items.items()))


def strings(values: Sequence[str]) -> Code:
    return Code(opening="(", closing=")", parts=tuple(("", atom(v)) for v in values), single_comma=len(values) == 1)


def kind_code(kind: str) -> Code:
    return Code(text=KIND_NAMES[kind])


def rule_code(rule: QueryRule) -> Code:
    kwargs: list[tuple[str, Code]] = []
    if rule["required"]:
        kwargs.append(("required", atom(True)))
    if rule["enum"]:
        kwargs.append(("enum", strings(rule["enum"])))
    if rule["minimum"] is not None:
        kwargs.append(("minimum", atom(rule["minimum"])))
    return call("q", [kind_code(rule["type"])], kwargs)


def body_code(schema: Body) -> Code:
    fields = {
        name: body_code(kind) if isinstance(kind, dict) else kind_code(kind)
        for name, kind in schema["properties"].items()
    }
    kwargs: list[tuple[str, Code]] = []
    if schema["required"]:
        kwargs.append(("required", strings(schema["required"])))
    if schema["optional"]:
        kwargs.append(("optional", atom(True)))
    if schema["enum"]:
        kwargs.append(("enum", mapping({name: strings(values) for name, values in schema["enum"].items()})))
    return call("body", [mapping(fields)], kwargs)


def operation_code(params: OperationParams) -> Code:
    parts: dict[str, Code] = {
        "path": mapping({name: kind_code(kind) for name, kind in params["path"].items()}),
        "query": mapping({name: rule_code(rule) for name, rule in params["query"].items()}),
    }
    if "body" in params:
        parts["body"] = body_code(params["body"])
    return mapping(parts)


HEADER = '''"""What each operation the emulator serves accepts, generated from the platform's Swagger spec: do not edit.

Written by ``python -m whitesky_emulator.gen_params`` for every operation of the collection's one table of
operations (``plugins/module_utils/platform/api.py``): each path parameter's type (``customer_id``, a string, is
in every path and left out), each query parameter's type, whether it is required, its allowed values and least
value, and the request body's closed schema.  ``params`` validates every request by it.
"""

from __future__ import annotations

from .paramtypes import ARRAY, BOOL, INT, OBJECT, STR, OperationParams, body, q

__all__ = ["ARRAY", "BOOL", "INT", "OBJECT", "OPERATIONS", "STR"]

#: operationId -> what it accepts (``paramtypes.OperationParams``)
'''


def render(operations: Mapping[str, OperationParams]) -> str:
    """The generated module's text."""
    lines = ["OPERATIONS: dict[str, OperationParams] = {"]
    for operation_id, params in operations.items():
        lines += operation_code(params).lines(4, json.dumps(operation_id) + ": ", ",")
    lines.append("}")
    return HEADER + "\n".join(lines) + "\n"


def load_spec(path: str | None) -> Json:
    candidates = [path] if path else [c for c in SPEC_CANDIDATES if c]
    for candidate in candidates:
        if os.path.exists(candidate):
            with open(candidate, encoding="utf-8") as fh:
                spec: Json = json.load(fh)
                return spec
    raise SystemExit("the platform's Swagger spec is not at %s: pass --spec" % " or ".join(candidates))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m whitesky_emulator.gen_params", description=__doc__.split("\n")[0])
    parser.add_argument("--spec", help="the platform's Swagger spec (default: $WHITESKY_SPEC or ../shared/reference)")
    parser.add_argument("--output", default=OUTPUT, help="the module to write (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the module differs")
    args = parser.parse_args(argv)
    text = render(table(load_spec(args.spec), API_OPERATIONS))
    current = ""
    if os.path.exists(args.output):
        with open(args.output, encoding="utf-8") as fh:
            current = fh.read()
    if args.check:
        if current != text:
            print("%s is not what the spec gives: run python -m whitesky_emulator.gen_params" % args.output)
            return 1
        return 0
    if current != text:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
        print("wrote %s" % args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
