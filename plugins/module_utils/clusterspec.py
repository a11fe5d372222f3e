# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster spec: one typed contract, written once (pure Python).

The spec is what a user writes (``cluster``, ``control_plane``, ``pools``, ``sriov``, ``first_boot``).  It is
checked whole here, for every entry that takes it: the cluster playbooks (through the ``cluster`` module), the AWX
surveys (whose answers become a spec) and the controller (the CRDs' OpenAPI schemas are tested against
:func:`openapi`).  Every error names its path (``pools[1].gpu.count``); unknown keys are refused with a
suggestion; an integer is an integer (``"2"`` is read as 2, ``"two"`` or ``1.5`` never); every name is matched
whole (``fullmatch``: a final newline is not a name's end).  docs/lifecycle.md's reference is generated from
:data:`SPEC` by :func:`reference`.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.errors import InputError

#: What a field without a default has, and what a parser gives back for a value it refused.
_MISSING = object()

#: DNS-label-like names: the cluster, its pools, a NetworkAttachmentDefinition, a location.
LABEL = r"[a-z0-9]([a-z0-9-]*[a-z0-9])?"
CLOUDSPACE = r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?"
#: A Debian package, optionally pinned (``name=1.2*``); the first boot passes it to apt as written.
PACKAGE = r"[a-z0-9][a-z0-9+.:=~*-]*"
#: An NVIDIA driver branch (550) or version (550.127.05); empty: the image has the driver.
DRIVER_VERSION = r"([0-9]+(\.[0-9]+)*)?"
#: A GPU type as the platform's profiles name it (vendor and model): printable words, matched without case.
GPU_TYPE = r"[A-Za-z0-9]([A-Za-z0-9 ._-]*[A-Za-z0-9])?"
#: The control plane's pool name (so no pool may take it).
CONTROL_PLANE = "cp"
MAX_REPLICAS = 100
MAX_POOLS = 20


class Field:
    """One field of the spec: its kind, bounds, default and documentation."""

    def __init__(self, kind: str, doc: str, **kw: Any) -> None:
        self.kind = kind  # int, str, bool, object, list
        self.doc = doc
        self.required: bool = kw.pop("required", False)
        self.default: Any = kw.pop("default", _MISSING)
        self.minimum: int | None = kw.pop("minimum", None)
        self.maximum: int | None = kw.pop("maximum", None)
        self.pattern: str | None = kw.pop("pattern", None)
        self.min_length: int | None = kw.pop("min_length", 1 if kind == "str" and self.default != "" else None)
        self.max_length: int | None = kw.pop("max_length", None)
        # an object's fields and a list's items (None for the other kinds, which never read them)
        self.fields: dict[str, Field] = kw.pop("fields", None)
        self.items: Field = kw.pop("items", None)
        self.min_items: int | None = kw.pop("min_items", None)
        self.max_items: int | None = kw.pop("max_items", None)
        self.secret: bool = kw.pop("secret", False)
        self.numeric_text: bool = kw.pop("numeric_text", False)  # a str that YAML may give as a number (550)
        # a further check of a str: its error text, or None
        self.check: Callable[[str], str | None] | None = kw.pop("check", None)
        if kw:
            raise TypeError("unknown field options %s" % sorted(kw))
        self.regex = re.compile(self.pattern) if self.pattern else None


def _int(doc: str, minimum: int, maximum: int | None = None, **kw: Any) -> Field:
    return Field("int", doc, minimum=minimum, maximum=maximum, **kw)


def _cidr(value: str) -> str | None:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return "is not a CIDR (such as 203.0.113.0/24)"
    return None if "/" in value else "is not a CIDR (such as 203.0.113.0/24): it has no prefix length"


_GPU = Field(
    "object",
    "vGPUs by type on every machine of the pool: the type is resolved against the location's profiles.",
    fields={
        "type": Field(
            "str",
            "The GPU type, for example NVIDIA A100 (case and spacing aside).",
            required=True,
            pattern=GPU_TYPE,
            max_length=64,
        ),
        "count": _int("vGPUs per machine.", 1, 16, default=1),
        "driverVersion": Field(
            "str",
            "The NVIDIA driver branch (550) or version (550.127.05) the first boot installs, pinned, and verifies; "
            "empty verifies a driver the image has.",
            pattern=DRIVER_VERSION,
            max_length=32,
            default="",
            numeric_text=True,
        ),
    },
)


def machine_fields(vcpus: int | None = None, memory: int | None = None) -> dict[str, Field]:
    """What a machine is made of (the control plane, each pool, and the VCOMachine CRD): without defaults,
    vcpus and memory are required."""
    size: dict[str, Any] = {"default": vcpus} if vcpus else {"required": True}
    mem: dict[str, Any] = {"default": memory} if memory else {"required": True}
    return {
        "vcpus": _int("Virtual CPUs of each machine.", 1, 256, **size),
        "memory": _int("Memory of each machine, in MiB.", 512, 4194304, **mem),
        "image": _int("The platform image id to boot.", 0),
        "diskSize": _int("Boot disk size in GiB.", 1, 65536),
    }


_NETWORK = Field(
    "object",
    "An external network pods may ask for.",
    fields={
        "name": Field("str", "The NetworkAttachmentDefinition's name.", required=True, pattern=LABEL, max_length=63),
        "network": Field("str", "The platform's external network, by name or id.", required=True, max_length=128),
        "namespace": Field("str", "The NetworkAttachmentDefinition's namespace.", pattern=LABEL, max_length=63),
        "mtu": _int("The pod interface's MTU.", 576, 9216),
        "routes": Field(
            "list",
            "Routes to add in the pod through this NIC.",
            items=Field(
                "object",
                "A route.",
                fields={"dst": Field("str", "A CIDR.", required=True, max_length=64, check=_cidr)},
            ),
            max_items=64,
        ),
    },
)

#: The first boot's retry settings when none are given: written here once (the schema, the modules' options and
#: the script's renderer all take them from here).
RETRIES = {"attempts": 5, "delay": 5, "lock_timeout": 600}

FIRST_BOOT = {
    "packages": Field(
        "list",
        "Debian packages the first boot installs (retried), as name or name=version.",
        items=Field("str", "A package.", pattern=PACKAGE, max_length=128),
        max_items=100,
        default=[],
    ),
    "attempts": _int("Attempts of each install before the first boot fails.", 1, 20, default=RETRIES["attempts"]),
    "delay": _int("Seconds before the first retry (doubled each time).", 0, 600, default=RETRIES["delay"]),
    "lock_timeout": _int("Seconds to wait for the dpkg lock.", 0, 7200, default=RETRIES["lock_timeout"]),
}

SRIOV = {
    "enabled": Field("bool", "Deploy the SR-IOV NICs-per-pod add-on.", default=False),
    "networks": Field("list", "The external networks pods may ask for.", items=_NETWORK, max_items=32, default=[]),
    "credential": Field("str", "The node agent's own platform token (never the cluster's).", secret=True),
    "credentialSecretRef": Field(
        "object",
        "A Secret with the node agent's token, instead of credential.",
        fields={
            "name": Field("str", "The Secret's name.", required=True, max_length=253),
            "key": Field("str", "The key that holds the token.", default="token", max_length=253),
        },
    ),
    "kubeconfig": Field(
        "str",
        "The workload cluster's kubeconfig file (an absolute path where the playbook runs): the add-on is deployed "
        "there, never to the default kubeconfig's cluster. The cluster playbooks require it with sriov.enabled "
        "unless they only render the manifests (capvco_render_dir).",
        max_length=4096,
        check=lambda value: None if value.startswith("/") else "is not an absolute path",
    ),
}

#: The whole cluster spec: the playbooks' top-level variables.
SPEC = Field(
    "object",
    "The cluster spec.",
    fields={
        "cluster": Field(
            "object",
            "Who the cluster is and where it lives.",
            required=True,
            fields={
                "name": Field(
                    "str",
                    "The cluster's name: the owner in its machines' markers and its vGPU reservations' names.",
                    required=True,
                    pattern=LABEL,
                    max_length=32,
                ),
                "location": Field(
                    "str", "The whitesky.cloud location, e.g. be-gen-1.", required=True, pattern=LABEL, max_length=64
                ),
                "cloudspace": Field(
                    "str",
                    "The cloudspace of the machines, by name; created (and recorded as the cluster's) when missing. "
                    "Default: the cluster's name.",
                    pattern=CLOUDSPACE,
                    max_length=64,
                ),
            },
        ),
        "control_plane": Field(
            "object",
            "The control plane's machines (pool cp).",
            default={},
            fields=dict(
                {"replicas": _int("How many machines.", 0, MAX_REPLICAS, default=1)}, **machine_fields(2, 4096)
            ),
        ),
        "pools": Field(
            "list",
            "The worker pools; a pool that is no longer listed is scaled to zero (its machines deleted).",
            default=[],
            max_items=MAX_POOLS,
            items=Field(
                "object",
                "A pool of identical machines.",
                fields=dict(
                    {
                        "name": Field("str", "The pool's name (not cp).", required=True, pattern=LABEL, max_length=20),
                        "replicas": _int("How many machines.", 0, MAX_REPLICAS, required=True),
                    },
                    **machine_fields(),
                    gpu=_GPU,
                ),
            ),
        ),
        "sriov": Field("object", "The SR-IOV add-on.", default={}, fields=SRIOV),
        "first_boot": Field("object", "What every machine's first boot installs.", default={}, fields=FIRST_BOOT),
    },
)


def _kind_name(value: object) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)


def _show(value: object, field: Field | None = None) -> str:
    if field is not None and field.secret:
        return "(hidden)"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _Errors(list[str]):
    def add(self, path: str, text: str) -> None:
        self.append("%s: %s" % (path or "spec", text))


def _suggest(key: object, known: Iterable[str]) -> str | None:
    if not isinstance(key, str):
        return None
    folded = {k.lower().replace("_", ""): k for k in known}
    hit = folded.get(key.lower().replace("_", "").replace("-", ""))
    if hit:
        return hit
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return close[0] if close else None


def _parse_int(value: Any, field: Field, path: str, errors: _Errors) -> Any:
    if isinstance(value, bool):
        errors.add(path, "must be an integer, got %s %s" % (_kind_name(value), _show(value)))
        return _MISSING
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,12}", value):
        value = int(value)
    if not isinstance(value, int):
        errors.add(path, "must be an integer, got %s %s" % (_kind_name(value), _show(value)))
        return _MISSING
    return _bounds(value, field, path, errors)


def _bounds(value: int, field: Field, path: str, errors: _Errors) -> Any:
    if field.minimum is not None and value < field.minimum:
        errors.add(path, "must be %s or more, got %s" % (field.minimum, value))
        return _MISSING
    if field.maximum is not None and value > field.maximum:
        errors.add(path, "must be %s or less, got %s" % (field.maximum, value))
        return _MISSING
    return value


def _parse_str(value: Any, field: Field, path: str, errors: _Errors) -> Any:
    if field.numeric_text and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # driverVersion: 550 (YAML reads it as a number)
    if not isinstance(value, str):
        errors.add(path, "must be a string, got %s %s" % (_kind_name(value), _show(value, field)))
        return _MISSING
    if field.min_length is not None and len(value) < field.min_length:
        errors.add(path, "must not be empty")
        return _MISSING
    if field.max_length is not None and len(value) > field.max_length:
        errors.add(path, "must be at most %d characters, got %d" % (field.max_length, len(value)))
        return _MISSING
    if field.regex is not None and not field.regex.fullmatch(value):
        errors.add(path, "%s does not match %s" % (_show(value, field), _describe_pattern(field.pattern)))
        return _MISSING
    why = field.check(value) if field.check else None
    if why:
        errors.add(path, "%s %s" % (_show(value, field), why))
        return _MISSING
    return value


_PATTERN_WORDS: dict[str | None, str] = {
    LABEL: "lower-case letters, digits and '-' (not at either end)",
    CLOUDSPACE: "letters, digits, '.', '_' and '-' (not at either end)",
    PACKAGE: "a Debian package name, optionally =VERSION (letters a-z, digits, + . : = ~ * -)",
    DRIVER_VERSION: "a driver branch or version such as 550 or 550.127.05 (or empty)",
    GPU_TYPE: "letters, digits, spaces, '.', '_' and '-' (not at either end)",
}


def _describe_pattern(pattern: str | None) -> str:
    return _PATTERN_WORDS.get(pattern, "the pattern %s" % pattern)


def _parse_bool(value: Any, field: Field, path: str, errors: _Errors) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "on", "false", "no", "off"):
        return value.lower() in ("true", "yes", "on")
    errors.add(path, "must be true or false, got %s %s" % (_kind_name(value), _show(value)))
    return _MISSING


def _parse_object(value: Any, field: Field, path: str, errors: _Errors) -> Any:
    if not isinstance(value, dict):
        errors.add(path, "must be a mapping, got %s %s" % (_kind_name(value), _show(value)))
        return _MISSING
    out: dict[str, Any] = {}
    for key in value:
        if key not in field.fields:
            hint = _suggest(key, field.fields)
            where = "%s.%s" % (path, key) if path else str(key)
            errors.add(
                where,
                "unknown key; did you mean %s?" % hint
                if hint
                else "unknown key; valid keys: %s" % ", ".join(sorted(field.fields)),
            )
    for key, sub in field.fields.items():
        where = "%s.%s" % (path, key) if path else key
        got = value.get(key)
        if got is None:
            if sub.required:
                errors.add(where, "is required")
            elif sub.default is not _MISSING:
                out[key] = parse(_copy(sub.default), sub, where, errors) if sub.kind == "object" else _copy(sub.default)
            continue
        parsed = parse(got, sub, where, errors)
        if parsed is not _MISSING:
            out[key] = parsed
    return out


def _copy(value: Any) -> Any:
    return (
        {k: _copy(v) for k, v in value.items()}
        if isinstance(value, dict)
        else list(value)
        if isinstance(value, list)
        else value
    )


def _parse_list(value: Any, field: Field, path: str, errors: _Errors) -> Any:
    if not isinstance(value, list):
        errors.add(path, "must be a list, got %s %s" % (_kind_name(value), _show(value)))
        return _MISSING
    if field.max_items is not None and len(value) > field.max_items:
        errors.add(path, "must have at most %d items, got %d" % (field.max_items, len(value)))
        return _MISSING
    if field.min_items is not None and len(value) < field.min_items:
        errors.add(path, "must have at least %d item(s)" % field.min_items)
        return _MISSING
    out: list[Any] = []
    for i, item in enumerate(value):
        parsed = parse(item, field.items, "%s[%d]" % (path, i), errors)
        if parsed is not _MISSING:
            out.append(parsed)
    return out


_PARSERS: dict[str, Callable[[Any, Field, str, _Errors], Any]] = {
    "int": _parse_int,
    "str": _parse_str,
    "bool": _parse_bool,
    "object": _parse_object,
    "list": _parse_list,
}


def parse(value: Any, field: Field, path: str, errors: _Errors) -> Any:
    """``value`` checked against ``field``: the typed value, or ``_MISSING`` with the errors added."""
    return _PARSERS[field.kind](value, field, path, errors)


def check(spec: Mapping[str, Any] | None, variables: Iterable[str] | None = ()) -> dict[str, Any]:
    """The cluster spec, checked whole and with its defaults: a new dict, or :class:`InputError` naming every bad
    field by its path (``pools[1].gpu.driverversion: unknown key; did you mean driverVersion?``).

    ``variables`` are the names of the caller's variables, when the spec was read from variables of its keys' names
    (the playbooks): one close to a key that is not one (``pool``, ``control-plane``) is a typo the caller could not
    see, and is refused the same way.
    """
    errors = _Errors()
    for name in sorted(set(variables or ())):
        hint = _suggest(name, SPEC.fields) if name not in SPEC.fields else None
        if hint and _near(name, hint):
            errors.add(name, "unknown variable of the cluster spec; did you mean %s?" % hint)
    out: dict[str, Any] = parse(spec if spec is not None else {}, SPEC, "", errors)
    if out is not _MISSING and not errors:
        _cross_checks(out, errors)
    if errors:
        raise InputError(
            "the cluster spec is invalid (%d error(s)), nothing was changed: %s" % (len(errors), "; ".join(errors)),
            {"spec_errors": list(errors)},
        )
    return out


def _near(name: str, key: str) -> bool:
    """A variable's name is a spec key misspelt: the same once case, '_' and '-' are set aside, or very close."""
    fold = name.lower().replace("_", "").replace("-", "")
    return fold == key.replace("_", "") or difflib.SequenceMatcher(None, name.lower(), key).ratio() >= 0.8


def secrets(raw: object) -> list[str]:
    """The secret values in a spec as given (checked or not), to be hidden wherever output shows them."""
    out: list[str] = []

    def walk(value: object, field: Field) -> None:
        if field.secret and isinstance(value, (str, int, float)) and not isinstance(value, bool):
            out.append(str(value))
        elif field.kind == "object" and isinstance(value, dict):
            for key, sub in field.fields.items():
                walk(value.get(key), sub)
        elif field.kind == "list" and isinstance(value, list):
            for item in value:
                walk(item, field.items)

    walk(raw, SPEC)
    return out


def _cross_checks(spec: dict[str, Any], errors: _Errors) -> None:
    cluster = spec["cluster"]
    cluster.setdefault("cloudspace", cluster["name"])
    taken = {CONTROL_PLANE: "control_plane"}
    for i, pool in enumerate(spec["pools"]):
        name = pool["name"]
        if name in taken:
            errors.add(
                "pools[%d].name" % i,
                "%r is taken (by %s); pool names are unique and cp is the control plane's" % (name, taken[name]),
            )
        taken[name] = "pools[%d]" % i
    sriov = spec["sriov"]
    seen: dict[tuple[str | None, str], int] = {}
    for i, net in enumerate(sriov["networks"]):
        key = (net.get("namespace"), net["name"])
        if key in seen:
            errors.add("sriov.networks[%d].name" % i, "%r is taken (by sriov.networks[%d])" % (net["name"], seen[key]))
        seen[key] = i
    if sriov.get("enabled"):
        if not sriov["networks"]:
            errors.add("sriov.networks", "is required (at least one network) when sriov.enabled is true")
        if bool(sriov.get("credential")) == bool(sriov.get("credentialSecretRef")):
            errors.add("sriov", "give one of credential and credentialSecretRef when sriov.enabled is true")


def pools(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every pool of a checked spec, the control plane first, with its machines' names: ``[{name, names, vcpus,
    memory, image, diskSize, gpu}]`` (``gpu`` None for a pool without GPUs)."""
    out: list[dict[str, Any]] = []
    name = spec["cluster"]["name"]
    for pool in [dict(spec["control_plane"], name=CONTROL_PLANE)] + spec["pools"]:
        machines = ["%s-%s-%d" % (name, pool["name"], i) for i in range(pool["replicas"])]
        out.append(dict(pool, names=machines, gpu=pool.get("gpu")))
    return out


# --- the schema in other shapes: OpenAPI (the CRDs) and Markdown (docs/lifecycle.md) ---

_OPENAPI_TYPES = {
    "int": "integer",
    "number": "number",
    "str": "string",
    "bool": "boolean",
    "object": "object",
    "list": "array",
}


def openapi(field: Field) -> dict[str, Any]:
    """The OpenAPI v3 schema of a field, as a CRD writes it (no descriptions)."""
    out: dict[str, Any] = {"type": _OPENAPI_TYPES[field.kind]}
    for attr, key in (
        ("minimum", "minimum"),
        ("maximum", "maximum"),
        ("max_length", "maxLength"),
        ("max_items", "maxItems"),
        ("min_items", "minItems"),
    ):
        if getattr(field, attr) is not None:
            out[key] = getattr(field, attr)
    if field.kind == "str" and field.min_length:
        out["minLength"] = field.min_length
    if field.pattern:
        out["pattern"] = "^%s$" % field.pattern
    if field.default is not _MISSING and field.kind not in ("object", "list"):
        out["default"] = field.default
    if field.kind == "object":
        out["properties"] = {k: openapi(v) for k, v in field.fields.items()}
        required = sorted(k for k, v in field.fields.items() if v.required)
        if required:
            out["required"] = required
    if field.kind == "list":
        out["items"] = openapi(field.items)
    return out


def _bounds_text(field: Field) -> str:
    parts: list[str] = []
    if field.minimum is not None or field.maximum is not None:
        parts.append(
            "%s..%s" % ("" if field.minimum is None else field.minimum, "" if field.maximum is None else field.maximum)
        )
    if field.pattern:
        parts.append(_describe_pattern(field.pattern))
    if field.max_length:
        parts.append("at most %d characters" % field.max_length)
    if field.max_items:
        parts.append("at most %d items" % field.max_items)
    if field.kind == "list" and field.items.kind != "object" and _bounds_text(field.items):
        parts.append("each: " + _bounds_text(field.items))
    if field.check is _cidr:
        parts.append("a CIDR")
    return "; ".join(parts)


def _rows(field: Field, path: str) -> Iterator[str]:
    for key, sub in field.fields.items():
        where = "%s.%s" % (path, key) if path else key
        kind = {"list": "list", "object": "mapping"}.get(sub.kind, sub.kind)
        if sub.required:
            need = "required"
        elif sub.default is not _MISSING and sub.kind not in ("object",) and sub.default != []:
            need = "default %s" % ("`%s`" % sub.default if sub.default != "" else '`""`')
        else:
            need = ""
        yield "| `%s` | %s | %s | %s | %s |" % (where, kind, need, _bounds_text(sub), sub.doc)
        if sub.kind == "object":
            yield from _rows(sub, where)
        elif sub.kind == "list" and sub.items.kind == "object":
            yield from _rows(sub.items, where + "[]")


def reference() -> str:
    """The spec's reference, a Markdown table generated from :data:`SPEC` (docs/lifecycle.md embeds it)."""
    head = ["| key | type | required / default | bounds | what |", "|---|---|---|---|---|"]
    return "\n".join(head + list(_rows(SPEC, ""))) + "\n"
