"""What each operation the emulator serves accepts, and the validation of a request against it.

Written for the emulator from the platform's published contract (where a
parameter goes, its type, whether it is required, its allowed values, and
the request body's fields); ``tests/unit/test_contract.py`` checks this table
against the Swagger spec itself.  A request that does not fit gets a 400 that
names the parameter or field; no input reaches a handler untyped, so none can
make it fail with a 500.

Query parameters the operation does not declare are ignored, as the
platform's framework does; body fields it does not declare are refused where
the body's schema is closed (all of them here).
"""

from __future__ import annotations

import json

INT, STR, BOOL, ARRAY, OBJECT = "integer", "string", "boolean", "array", "object"
#: The platform's integers are 64-bit.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
NIC_MODELS = ("ne2k_pci", "i82551", "i82557b", "i82559er", "rtl8139", "e1000", "pcnet", "virtio")
NETWORK_TYPES = ("external", "cloudspace")
OS_TYPES = ("Linux", "Windows", "Unix", "BSD", "Darwin", "Other")


class Invalid(ValueError):
    """A request does not fit its operation: ``where`` names the parameter or field."""

    def __init__(self, where, message):
        super().__init__("%s: %s" % (where, message))
        self.where = where


def q(kind, required=False, enum=None, minimum=None):
    return {"type": kind, "required": required, "enum": enum, "minimum": minimum}


def body(properties, required=(), optional=False, enum=None):
    """A closed object body: ``{"field": type or nested body}``; ``enum``: ``{"field": allowed values}``."""
    return {"properties": properties, "required": tuple(required), "optional": optional, "enum": dict(enum or {})}


VGPU_NAME_BODY = body({"vgpu_name": STR}, required=["vgpu_name"])
NOTE_BODY = body({"title": STR, "content": STR}, required=["title", "content"])
#: createCloudspace's ``firewall`` (the spec's CreateCloudspaceFirewall, ``private`` required) and its ``custom``.
CUSTOM_FIREWALL = body(
    {"image_id": INT, "cdrom_id": INT, "type": STR, "disk_size": INT, "vcpus": INT, "memory": INT},
    enum={"type": OS_TYPES},
)
FIREWALL = body(
    {"private": BOOL, "external_network_id": INT, "parent_cloudspace_id": STR, "custom": CUSTOM_FIREWALL},
    required=["private"],
)

#: operationId -> {"path": {name: type}, "query": {name: q(...)}, "body": body(...) or None}
#: (every path has ``customer_id``, a string, first)
OPERATIONS = {
    "listCustomerLocations": {"path": {}, "query": {}},
    "listAvailableGPUProfiles": {"path": {"location": STR}, "query": {}},
    "reserveVGPU": {"path": {"location": STR, "gpu_id": STR}, "query": {}, "body": VGPU_NAME_BODY},
    "listCustomerVGPUS": {
        "path": {"location": STR},
        "query": {
            "limit": q(INT, minimum=0),
            "start_after": q(INT, minimum=0),
            "only_deleted": q(BOOL),
            "include_deleted": q(BOOL),
        },
    },
    "restoreVGPU": {"path": {"location": STR, "vgpu_id": STR}, "query": {}},
    "deleteVGPU": {"path": {"location": STR, "vgpu_id": STR}, "query": {"detach": q(BOOL), "permanently": q(BOOL)}},
    "reserveAndAttachVGPUToVM": {
        "path": {"cloudspace_id": STR, "vm_id": INT, "gpu_id": STR},
        "query": {},
        "body": VGPU_NAME_BODY,
    },
    "attachVGPUToVM": {"path": {"cloudspace_id": STR, "vm_id": INT, "vgpu_id": STR}, "query": {}},
    "detachVGPUFromVM": {"path": {"cloudspace_id": STR, "vm_id": INT, "vgpu_id": STR}, "query": {}},
    "getCustomerConsumption": {"path": {"location": STR}, "query": {"start": q(INT, True), "end": q(INT, True)}},
    "getCustomerLocationPricing": {"path": {"location": STR}, "query": {}},
    "listCloudspaces": {
        "path": {},
        "query": {
            "include_deleted": q(BOOL),
            "only_deleted": q(BOOL),
            "include_disabled": q(BOOL),
            "locations": q(ARRAY),
            "filter_storage_only": q(BOOL),
        },
    },
    "createCloudspace": {
        "path": {},
        "query": {},
        "body": body(
            {
                "name": STR,
                "host": STR,
                "local_domain": STR,
                "location": STR,
                "private_network": STR,
                "vcpu_quota": INT,
                "vdisk_space_quota": INT,
                "memory_quota": INT,
                "public_ip_quota": INT,
                "firewall": FIREWALL,
            },
            required=["firewall", "location", "name"],
        ),
    },
    "getCloudspaceInfo": {"path": {"cloudspace_id": STR}, "query": {}},
    "deleteCloudspace": {"path": {"cloudspace_id": STR}, "query": {"permanently": q(BOOL), "reason": q(STR)}},
    "getCloudspaceNotes": {"path": {"cloudspace_id": STR}, "query": {}},
    "createCloudspaceNote": {"path": {"cloudspace_id": STR}, "query": {}, "body": NOTE_BODY},
    "updateCloudspaceNote": {"path": {"cloudspace_id": STR, "note_id": STR}, "query": {}, "body": NOTE_BODY},
    "deleteCloudspaceNote": {"path": {"cloudspace_id": STR, "note_id": STR}, "query": {}},
    "listCloudspaceVirtualMachines": {
        "path": {"cloudspace_id": STR},
        "query": {
            "include_deleted": q(BOOL),
            "only_deleted": q(BOOL),
            "include_connected": q(BOOL),
            "exclude_internal": q(BOOL),
        },
    },
    "createVirtualMachine": {
        "path": {"cloudspace_id": STR},
        "query": {
            "name": q(STR, True),
            "hostname": q(STR),
            "description": q(STR, True),
            "data_disks": q(ARRAY),
            "vcpus": q(INT, True),
            "memory": q(INT, True),
            "private_ip": q(STR),
            "user_data": q(STR),
            "start_vm": q(BOOL),
            "tpm_secret": q(STR),
            "image_id": q(INT),
            "disk_size": q(INT),
            "cdrom_id": q(INT),
            "boot_disk_id": q(INT),
            "os_type": q(STR, enum=OS_TYPES),
            "os_name": q(STR),
            "enable_vm_agent": q(BOOL),
            "snapshot_id": q(STR),
            "all_vm_disks": q(BOOL),
            "acronis": q(BOOL),
            "veeam": q(BOOL),
            "boot_type": q(STR, enum=("bios", "uefi", "uefi-secure-boot")),
        },
        "body": body(
            {"userdata": OBJECT, "UserDataParameters": OBJECT, "gpu_id": STR, "vgpu_name": STR}, optional=True
        ),
    },
    "getVirtualMachineInfo": {"path": {"cloudspace_id": STR, "vm_id": INT}, "query": {}},
    "readFile": {
        "path": {"cloudspace_id": STR, "vm_id": INT},
        "query": {
            "size": q(INT, required=True, minimum=0),
            "seek": q(INT, minimum=0),
            "filepath": q(STR, required=True),
        },
    },
    "deleteVirtualMachine": {
        "path": {"cloudspace_id": STR, "vm_id": INT},
        "query": {"permanently": q(BOOL), "detach_disks": q(BOOL), "detach_gpu": q(BOOL)},
    },
    "listExternalNetworks": {"path": {"location": STR}, "query": {}},
    "getExternalNetwork": {"path": {"location": STR, "external_network_id": INT}, "query": {}},
    "getExternalNetworkAddresses": {"path": {"location": STR, "external_network_id": INT}, "query": {}},
    "listExternalNetworksVirtualMachine": {"path": {"cloudspace_id": STR, "vm_id": INT}, "query": {}},
    "getExternalNetworksVirtualMachine": {
        "path": {"cloudspace_id": STR, "vm_id": INT, "external_ip_address": STR},
        "query": {},
    },
    "attachExternalNetworksVirtualMachine": {
        "path": {"cloudspace_id": STR, "vm_id": INT},
        "query": {
            "external_network_id": q(INT, True),
            "external_network_ip": q(STR),
            "model": q(STR, enum=NIC_MODELS),
            "external_network_type": q(STR, enum=NETWORK_TYPES),
            "external_cloudspace_id": q(STR),
        },
    },
    "detachExternalNetworksVirtualMachine": {
        "path": {"cloudspace_id": STR, "vm_id": INT, "external_ip_address": STR},
        "query": {
            "external_network_id": q(INT, True),
            "external_network_type": q(STR, True, enum=NETWORK_TYPES),
            "external_cloudspace_id": q(STR),
        },
    },
}


def _int(where, raw):
    text = raw.strip()
    if not text.lstrip("-").isdigit() or len(text) > 20:
        raise Invalid(where, "must be an integer, got %r" % raw[:40])
    value = int(text)
    if not INT_MIN <= value <= INT_MAX:
        raise Invalid(where, "%s is out of range (a 64-bit integer)" % text)
    return value


def _bool(where, raw):
    low = raw.lower()
    if low in ("true", "1"):
        return True
    if low in ("false", "0"):
        return False
    raise Invalid(where, "must be true or false, got %r" % raw[:40])


def _scalar(where, kind, raw):
    if kind == INT:
        return _int(where, raw)
    if kind == BOOL:
        return _bool(where, raw)
    return raw


def _check_body(where, schema, value):
    if not isinstance(value, dict):
        raise Invalid(where, "must be a JSON object")
    unknown = sorted(set(value) - set(schema["properties"]))
    if unknown:
        raise Invalid(
            "%s.%s" % (where, unknown[0]),
            "unknown field(s) %s; valid: %s" % (", ".join(unknown), ", ".join(sorted(schema["properties"]))),
        )
    for name in schema["required"]:
        if name not in value:
            raise Invalid("%s.%s" % (where, name), "is required")
    for name, kind in schema["properties"].items():
        if name not in value:
            continue
        field, got = "%s.%s" % (where, name), value[name]
        if isinstance(kind, dict):
            _check_body(field, kind, got)
        elif kind == STR and not isinstance(got, str):
            raise Invalid(field, "must be a string")
        elif kind == INT and (isinstance(got, bool) or not isinstance(got, int) or not INT_MIN <= got <= INT_MAX):
            raise Invalid(field, "must be a 64-bit integer")
        elif kind == BOOL and not isinstance(got, bool):
            raise Invalid(field, "must be a boolean")
        elif kind == OBJECT and not isinstance(got, dict):
            raise Invalid(field, "must be an object")
        _check_enum(field, schema.get("enum", {}).get(name), got)
    return value


def _check_enum(field, allowed, got):
    if allowed and got not in allowed:
        raise Invalid(field, "must be one of %s" % ", ".join(allowed))


def validate(operation_id, path_params, query, raw_body):
    """``(path, query, body)`` typed as the operation declares them; :class:`Invalid` when they do not fit.

    ``query`` is a multi-dict (``getlist``); ``raw_body`` the request's bytes.
    """
    spec = OPERATIONS[operation_id]
    path = {"customer_id": path_params["customer_id"]}
    for name, kind in spec["path"].items():
        path[name] = _scalar(name, kind, path_params[name])
    args = {}
    for name, rule in spec["query"].items():
        values = query.getlist(name)
        if values:
            args[name] = list(values) if rule["type"] == ARRAY else _query_scalar(name, rule, values[-1])
        elif rule["required"]:
            raise Invalid(name, "is a required query parameter")
    return path, args, _body(spec.get("body"), raw_body)


def _query_scalar(name, rule, raw):
    value = _scalar(name, rule["type"], raw)
    if rule["enum"] and value not in rule["enum"]:
        raise Invalid(name, "must be one of %s, got %r" % (", ".join(rule["enum"]), value[:40]))
    if rule["minimum"] is not None and value < rule["minimum"]:
        raise Invalid(name, "must be %d or more, got %d" % (rule["minimum"], value))
    return value


def _body(schema, raw_body):
    """The request's JSON body checked against the operation's schema (None when it takes none)."""
    if schema is None:
        return None
    payload = None
    if raw_body:
        try:
            payload = json.loads(raw_body)
        except ValueError:
            raise Invalid("body", "is not valid JSON") from None
    if payload is None:
        if not schema["optional"]:
            raise Invalid("body", "is required")
    else:
        _check_body("body", schema, payload)
    return payload
