"""The CNI request as the agent reads it: the CNI variables and the network configuration (an object the plugin
has decoded and checked), read into typed records (:class:`NetConf`, :class:`PrevResult`) with every field the
agent uses checked, and anything malformed the spec's error naming the field (never its value).

The plugin checked the framing (``shim.check``); the agent still checks the bounds of what it acts on
(``wire.check_version``, ``wire.check_env``: a ledger file name, an interface name) and that the netns exists.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

from capvco_sriov.ledger import ledger_key
from capvco_sriov.wire import (
    AGENT_COMMANDS,
    INVALID_CONFIG,
    INVALID_ENV,
    CniError,
    check_env,
    check_version,
    shown,
)

if TYPE_CHECKING:
    from capvco_sriov.wire import Route

#: CNI_ARGS, parsed: ``K8S_POD_UID`` and the other ``KEY=VALUE`` pairs the runtime passes (any keys).
CniArgs = dict[str, str]


@dataclass(frozen=True)
class PrevInterface:
    """One of ``prevResult.interfaces``."""

    name: str
    mac: str | None  # lower case
    sandbox: str | None


@dataclass(frozen=True)
class PrevIp:
    """One of ``prevResult.ips``: its address as ``address/prefix`` (normalised) and its interface's index."""

    address: str
    interface: int | None


@dataclass(frozen=True)
class PrevResult:
    """The ``prevResult`` a CHECK compares with the live interface."""

    interfaces: tuple[PrevInterface, ...]
    ips: tuple[PrevIp, ...]
    routes: tuple[str, ...]  # each route's dst, normalised


@dataclass(frozen=True)
class NetConf:
    """The network configuration, as the agent reads it: every field it uses, checked.

    ``prev_result`` is read for CHECK only and ``valid_attachments`` (as ledger keys) for GC only; the fields of
    the plugin itself (``agentSocket``, ``timeoutSeconds``) are the shim's ``check``; any other field is ignored.
    """

    cni_version: str
    name: str | None
    network: str | int | None
    mtu: int | None
    routes: tuple[Route, ...]
    model: str | None
    prev_result: PrevResult | None = None
    valid_attachments: frozenset[str] | None = None


def _invalid(field: str, want: str) -> CniError:
    """A configuration error (7) naming the field and what it must be; never its value (it may be anything)."""
    return CniError(INVALID_CONFIG, "invalid %s: %s" % (field, want))


def _text(value: object, field: str, required: bool = False, limit: int = 253) -> str | None:
    """A string field (absent or null: None, unless required)."""
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value or len(value) > limit:
        raise _invalid(field, "a string of 1 to %d characters%s" % (limit, " (required)" if required else ""))
    return value


def _address(value: object, field: str, kind: Literal["ip", "cidr", "net"]) -> str:
    """An address field, normalised: ``ip`` (an address), ``cidr`` (``address/prefix``), ``net`` (a network)."""
    want = {"ip": "an IP address", "cidr": "an address/prefix (CIDR)", "net": "a network address/prefix (CIDR)"}
    if not isinstance(value, str) or len(value) > 64 or (kind != "ip" and "/" not in value):
        raise _invalid(field, want[kind] + ("" if value is not None else " (required)"))
    try:
        if kind == "ip":
            return str(ipaddress.ip_address(value))
        if kind == "cidr":
            return str(ipaddress.ip_interface(value))
        return str(ipaddress.ip_network(value, strict=False))
    except ValueError:
        raise _invalid(field, want[kind]) from None


def _objects(value: object, field: str) -> list[tuple[str, Mapping[str, Any]]]:
    """A list of objects (absent or null: none), each with its field's name (``field[i]``)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _invalid(field, "a list of objects")
    out: list[tuple[str, Mapping[str, Any]]] = []
    for i, item in enumerate(value):
        where = "%s[%d]" % (field, i)
        if not isinstance(item, dict):
            raise _invalid(where, "an object")
        out.append((where, item))
    return out


def is_mac(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a MAC address: six hexadecimal pairs, colon-separated."""
    parts = value.split(":") if isinstance(value, str) and len(value) == 17 else []
    return len(parts) == 6 and all(len(p) == 2 and all(c in "0123456789abcdefABCDEF" for c in p) for p in parts)


def _mac(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not is_mac(value):
        raise _invalid(field, "a MAC address (six hexadecimal pairs, colon-separated)")
    return value.lower()


def _routes(value: object) -> tuple[Route, ...]:
    routes: list[Route] = []
    for where, item in _objects(value, "routes"):
        route: Route = {"dst": _address(item.get("dst"), where + ".dst", "net")}
        if route["dst"].endswith("/0"):
            raise CniError(
                INVALID_CONFIG, "invalid %s.dst: a default route is not allowed: the primary CNI owns it" % where
            )
        if item.get("gw") is not None:
            route["gw"] = _address(item["gw"], where + ".gw", "ip")
        routes.append(route)
    return tuple(routes)


def parse_prev_result(value: object) -> PrevResult | None:
    """``prevResult`` (the ADD's result, which CHECK compares with the live interface), every field it reads
    checked: 7 naming the field, never a KeyError."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid("prevResult", "an object (the ADD's result)")
    interfaces = tuple(
        PrevInterface(
            name=_text(item.get("name"), where + ".name", required=True) or "",
            mac=_mac(item.get("mac"), where + ".mac"),
            sandbox=_text(item.get("sandbox"), where + ".sandbox", limit=4096),
        )
        for where, item in _objects(value.get("interfaces"), "prevResult.interfaces")
    )
    ips: list[PrevIp] = []
    for where, item in _objects(value.get("ips"), "prevResult.ips"):
        address = _address(item.get("address"), where + ".address", "cidr")
        index = item.get("interface")
        if index is not None and (
            isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(interfaces)
        ):
            raise _invalid(where + ".interface", "an index into prevResult.interfaces")
        if item.get("gateway") is not None:
            _address(item["gateway"], where + ".gateway", "ip")
        ips.append(PrevIp(address, index))
    routes: list[str] = []
    for where, item in _objects(value.get("routes"), "prevResult.routes"):
        routes.append(_address(item.get("dst"), where + ".dst", "net"))
        if item.get("gw") is not None:
            _address(item["gw"], where + ".gw", "ip")
    return PrevResult(interfaces, tuple(ips), tuple(routes))


def _valid_attachments(value: object) -> frozenset[str]:
    """GC's ``cni.dev/valid-attachments``, as ledger keys.  Only a well-formed list decides what is released (an
    empty one included): absent or null is malformed input (7), never "nothing is valid"."""
    field = "cni.dev/valid-attachments"
    if value is None:
        raise _invalid(field, "a list of objects (GC needs it; an empty list when nothing is attached)")
    return frozenset(
        ledger_key(
            _text(item.get("containerID"), where + ".containerID", required=True) or "",
            _text(item.get("ifname"), where + ".ifname", required=True) or "",
        )
        for where, item in _objects(value, field)
    )


def _network(value: object, required: bool) -> str | int | None:
    if value is None or value == "":
        if required:
            raise CniError(INVALID_CONFIG, "the network configuration needs 'network' (an external network name or id)")
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, str) and len(value) > 253):
        raise _invalid("network", "an external network's name or id")
    return value


def _mtu(value: object) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 576 <= value <= 9216):
        raise _invalid("mtu", "an integer from 576 to 9216")
    return value


def parse_config(fields: Mapping[str, Any], command: str) -> NetConf:
    """The network configuration (a JSON object whose ``cniVersion`` :func:`wire.check_version` accepted), typed."""
    return NetConf(
        cni_version=str(fields["cniVersion"]),
        name=_text(fields.get("name"), "name"),
        network=_network(fields.get("network"), required=command != "STATUS"),
        mtu=_mtu(fields.get("mtu")),
        routes=_routes(fields.get("routes")),
        model=_text(fields.get("model"), "model", limit=32),
        prev_result=parse_prev_result(fields.get("prevResult")) if command == "CHECK" else None,
        valid_attachments=_valid_attachments(fields.get("cni.dev/valid-attachments")) if command == "GC" else None,
    )


class CniRequest:
    """One CNI invocation, as the agent acts on it: the environment and the network configuration, typed."""

    def __init__(self, command: str, container_id: str, netns: str, ifname: str, args: CniArgs, conf: NetConf) -> None:
        self.command = command
        self.container_id = container_id
        self.netns = netns
        self.ifname = ifname
        self.args = args
        self.conf = conf

    @property
    def version(self) -> str:
        return self.conf.cni_version

    @property
    def key(self) -> str:
        return ledger_key(self.container_id, self.ifname)

    @property
    def pod_uid(self) -> str | None:
        return self.args.get("K8S_POD_UID")


def parse_request(env: Mapping[str, str], config: Mapping[str, Any]) -> CniRequest:
    """The request from the CNI variables and the configuration object the plugin sent; :class:`CniError` with the
    spec's code.  The command, the version and the variables are checked for their bounds (the plugin checked them
    too; the agent acts on them: a ledger file name, an interface name, a netns that must exist); the rest
    (:func:`parse_config`) needs the configuration's meaning or this host.
    """
    command = env.get("CNI_COMMAND", "")
    if command not in AGENT_COMMANDS:
        raise CniError(INVALID_ENV, "invalid CNI_COMMAND %s" % shown(command), "valid: %s" % ", ".join(AGENT_COMMANDS))
    check_version(config)
    check_env(command, env)
    conf = parse_config(config, command)
    args: CniArgs = {}
    for pair in filter(None, env.get("CNI_ARGS", "").split(";")):
        if "=" in pair:
            key, value = pair.split("=", 1)
            args[key] = value
    container_id = env.get("CNI_CONTAINERID", "")
    netns = env.get("CNI_NETNS", "")
    ifname = env.get("CNI_IFNAME", "")
    if command in ("ADD", "CHECK") and not os.path.exists(netns):
        raise CniError(INVALID_ENV, "CNI_NETNS %s does not exist" % shown(netns, 128))
    return CniRequest(command, container_id, netns, ifname, args, conf)
