"""SR-IOV NICs per pod: the node agent's logic (pure Python, no netlink, no sockets).

``agent`` wraps this with the unix socket, ``netlink`` (pyroute2) and ``pods``
(the Kubernetes client); everything that decides lives here, on the
collection's own platform client and NIC operations:

- CNI request validation and results, per the CNI spec 1.0.0 / 1.1.0: the network
  configuration and ``prevResult`` are read into typed records (:class:`NetConf`,
  :class:`PrevResult`), and anything malformed is the spec's error naming the field;
- NIC identity by address: the agent chooses a free address (:class:`Addresses`)
  and attaches at it, so its NIC is the VM's NIC at that address, whatever else
  is on the network; one platform mutation per ADD, then one read for the MAC;
- a ledger on disk, ``(container id, ifname) -> (pod, netns, network, ip, mac)``,
  written atomically at each step of an ADD ("chosen", "sent", "attached",
  "ready"), so a crash at any point is settled on restart or by the reclaimer, by
  what each state proves (:func:`settle_decision`); an entry goes only when the
  platform shows its NIC gone, and one whose NIC cannot be proven the agent's is
  kept and reported for a person;
- one lock per VM around each platform mutation (not the reads): concurrent pods
  queue, none fails for contention;
- rollback when anything fails halfway, and the reclaimer for pods that went
  away without a DEL.

``netlink`` is any object with ``wait_for(mac, timeout)``, ``configure(mac,
netns, ifname, address, prefixlen, mtu, routes)``, ``release(netns, ifname,
mac)``, ``inspect(netns, ifname)``; ``pods`` is a callable returning the set
of pod UIDs on this node (or None when unknown).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NoReturn, NotRequired, Protocol, TypedDict, TypeGuard
from urllib.parse import quote

from ansible_collections.whitesky.capvco.plugins.module_utils.machines import nics
from ansible_collections.whitesky.capvco.plugins.module_utils.platform import documents
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError, LogicError, WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.files import write_whole
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.retry import RETRY_STATUSES
from capvco_sriov.shim import (
    CHECK_MISMATCH,
    INVALID_CONFIG,
    INVALID_ENV,
    IO_FAILURE,
    PLUGIN_NOT_AVAILABLE,
    TRY_AGAIN_LATER,
    UNKNOWN_CONTAINER,
    VERSIONS,
    Refusal,
    check,
    error,
    plain,
    shown,
)

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from capvco_sriov.shim import CniConfig, Route

LOG = logging.getLogger("capvco-sriov-agent")

#: CNI_ARGS, parsed: ``K8S_POD_UID`` and the other ``KEY=VALUE`` pairs the runtime passes (any keys).
CniArgs = dict[str, str]
#: A CNI result (or an empty answer), as the plugin prints it.
CniResult = dict[str, Any]

#: Where an attachment is (see :func:`settle_decision` and docs/sriov.md):
#:
#: - ``chosen``: the address is chosen and written down; the attach is not sent yet (it waits for the VM's lock);
#: - ``sent``: the attach call is sent (written once the VM's lock is held, right before the call); no answer yet;
#: - ``attached``: the platform answered; ``mac`` is the MAC it gave for the NIC at the address then;
#: - ``ready``: the pod's interface is configured: the node saw that MAC.
State = Literal["chosen", "sent", "attached", "ready"]
#: What settling an entry does: ``drop`` (nothing of the agent's is attached: the entry goes), ``detach`` (the NIC
#: is the agent's: detached, then the entry goes), ``wait`` (an attach that may still land: kept, settled later),
#: ``hold`` (a NIC that may or may not be the agent's: kept, reported, left for a person).
Decision = Literal["drop", "detach", "wait", "hold"]


class LedgerEntry(TypedDict):
    """One attachment in the ledger (a JSON object on disk): a pod's NIC, from the chosen address to the ready
    interface (``state``, :data:`State`)."""

    state: State
    pod_uid: str | None
    netns: str
    ifname: str
    network: str | int  # as the configuration names it
    network_id: int  # the platform's external network id
    config_name: str | None  # the configuration's name: GC's scope
    since: float
    prefixlen: int
    routes: list[Route]  # each with its gw
    mtu: int | None
    ip: str  # the address the agent chose
    mac: NotRequired[str]  # the NIC's MAC, as the platform gave it after the attach
    sent_at: NotRequired[float]  # when the attach call was sent (the clock's time)
    held: NotRequired[str]  # why settling it is left for a person (reported)


class LinkState(TypedDict):
    """A pod's interface as netlink finds it (``inspect``): its MAC, ``address/prefix`` list and route list."""

    mac: str
    addresses: list[str]
    routes: list[str]


class Reclaimed(TypedDict):
    """What one reclaimer pass released: the ledger key, why, and the address."""

    key: str
    reason: str
    ip: str | None


class NetlinkOps(Protocol):
    """What the agent needs of netlink (``netlink.Netlink``; the tests' fakes)."""

    def wait_for(self, mac: str, timeout: float) -> bool: ...

    def configure(
        self, mac: str, netns: str, ifname: str, address: str, prefixlen: int, mtu: int | None, routes: list[Route]
    ) -> bool: ...

    def release(self, netns: str, ifname: str, mac: str | None) -> None: ...

    def inspect(self, netns: str, ifname: str) -> LinkState | None: ...


#: ``pods()``: the UIDs of the pods on this node, or None when unknown (``pods.KubePods``).
Pods = Callable[[], set[str] | None]


class CniError(Refusal):
    """A CNI error with the spec's code, from the agent (the shim's :class:`Refusal`, as a document too)."""

    def to_dict(self, version: str = VERSIONS[-1]) -> dict[str, Any]:
        return error(self.code, self.msg, self.details, version)


# -- the network configuration, typed -----------------------------------------------------------------------------


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


def parse_config(raw: CniConfig, command: str) -> NetConf:
    """The network configuration (a JSON object whose ``cniVersion`` the shim's ``check`` accepted), typed."""
    fields: Mapping[str, Any] = raw
    return NetConf(
        cni_version=raw["cniVersion"],
        name=_text(fields.get("name"), "name"),
        network=_network(fields.get("network"), required=command != "STATUS"),
        mtu=_mtu(fields.get("mtu")),
        routes=_routes(fields.get("routes")),
        model=_text(fields.get("model"), "model", limit=32),
        prev_result=parse_prev_result(fields.get("prevResult")) if command == "CHECK" else None,
        valid_attachments=_valid_attachments(fields.get("cni.dev/valid-attachments")) if command == "GC" else None,
    )


class CniRequest:
    """One validated CNI invocation: the environment and the network configuration."""

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


def parse_request(env: Mapping[str, str], stdin: str) -> CniRequest:
    """Validate the CNI environment and stdin; raise :class:`CniError` with the spec's code.

    What the request alone decides is the shim's ``check`` (one place); the rest (:func:`parse_config`) needs the
    configuration's meaning or this host.
    """
    try:
        raw = check(env, stdin)
    except Refusal as exc:
        raise CniError(exc.code, exc.msg, exc.details) from None
    command = env.get("CNI_COMMAND", "")
    conf = parse_config(raw, command)
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


def ledger_key(container_id: str, ifname: str) -> str:
    """The ledger's key of an attachment, injective: a container id (validated: letters, digits, ``_ . -``) never
    holds ``@``, and the interface name is percent-encoded (``@``, ``%`` and ``/`` included), so no two
    (container, ifname) pairs share a key, and a key is a file name."""
    return "%s@%s" % (container_id, quote(ifname, safe=""))


#: The fields of an entry that settling it and answering with it read, and their types.
_ENTRY_FIELDS: dict[str, type | tuple[type, ...]] = {
    "netns": str,
    "ifname": str,
    "network_id": int,
    "since": (int, float),
    "prefixlen": int,
    "routes": list,
    "ip": str,
}


def _an_entry(obj: object) -> TypeGuard[LedgerEntry]:
    """Whether a JSON document read from the ledger is an entry this agent can settle."""
    return (
        isinstance(obj, dict)
        and obj.get("state") in ("chosen", "sent", "attached", "ready")
        and all(isinstance(obj.get(k), t) for k, t in _ENTRY_FIELDS.items())
        and isinstance(obj.get("mac", ""), str)
    )


class Ledger:
    """``(container id, ifname) -> attachment``, one JSON file each, replaced atomically."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        os.makedirs(directory, mode=0o700, exist_ok=True)

    def _path(self, key: str) -> str:
        if "/" in key or key.startswith("."):
            raise ValueError("not a ledger key: %r" % key)
        return os.path.join(self.dir, key + ".json")

    def put(self, key: str, entry: LedgerEntry) -> None:
        """Replace the entry atomically (``files.write_whole``): one fsync (the new file's data) before the rename.
        A journaling file system (ext4, xfs) commits the rename with its journal; an agent that is killed loses
        nothing."""
        write_whole(self._path(key), json.dumps(entry))

    def get(self, key: str) -> LedgerEntry | None:
        """The entry, or None: none there, or one that is not an entry (logged, and left on disk for a person)."""
        try:
            with open(self._path(key), "rb") as fh:
                entry = documents.loads(fh.read(), "a ledger entry")
        except FileNotFoundError:
            return None
        except documents.NotJson as exc:
            LOG.warning("ledger entry %s is unreadable, left alone: %s", key, exc)
            return None
        if not _an_entry(entry):
            LOG.warning("ledger entry %s is not an attachment's, left alone", key)
            return None
        return entry

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(key))

    def items(self) -> dict[str, LedgerEntry]:
        out: dict[str, LedgerEntry] = {}
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(".json"):
                entry = self.get(name[:-5])
                if entry is not None:
                    out[name[:-5]] = entry
        return out


#: How many addresses one ADD tries when the platform says the chosen one is taken (by another VM's agent, an
#: operator, the platform itself) before it answers "try again later".
ADDRESS_TRIES = 5
#: The oldest free-address list an ADD confirms its choice against, once it holds the VM's lock (seconds): one read
#: per agent in that time at most, and a list no older than that when many agents share a network.
FRESH_SECONDS = 2.0


def stray_key(key: str, ip: str) -> str:
    """Where an entry that an ADD found still unsettled is kept aside, so that the ADD may go on under ``key``:
    ``#`` is in neither a container id nor a percent-encoded interface name, so no attachment's key is a stray's."""
    return "%s#%s" % (key, ip)


class Addresses:
    """The addresses this agent may choose on each external network: what the platform last listed as free
    (``getExternalNetworkAddresses``), less what this agent has chosen since, and less the addresses of entries it
    keeps unsettled (:meth:`keep`: an attach that may still land, a NIC left for a person).  The list is read once
    per network and again only when it runs dry or an address turns out taken, so an ADD costs no read for it.
    The choice is random, so agents on different nodes rarely choose the same address at once; an ADD confirms its
    choice once it holds the VM's lock (:meth:`confirm`), against a list at most :data:`FRESH_SECONDS` old, so that
    the choices of many agents sharing a network meet the platform's list as it is, not as it was when the ADDs
    arrived (a taken address costs a refused attach: a mutating call of the credential's budget)."""

    def __init__(self, client: WhiteskyClient, location: str, rng: random.Random | None = None) -> None:
        self.client = client
        self.location = location
        self.rng = rng or random.SystemRandom()
        self._lock = threading.Lock()
        self._free: dict[int, set[str]] = {}  # network id -> set of addresses
        self._read_at: dict[int, float] = {}  # network id -> when its list was read (time.monotonic)
        #: network id -> {address chosen by an ADD not yet confirmed: when the list it came from was read}; such an
        #: address is never chosen again
        self._pending: dict[int, dict[str, float]] = {}
        self._kept: dict[int, set[str]] = {}  # network id -> addresses of unsettled entries: never chosen

    def _read(self, net_id: int) -> set[str]:
        self._read_at[net_id] = time.monotonic()
        listed = self.client.free_addresses(self.location, net_id)
        free: set[str] = set()
        for ip in listed if isinstance(listed, list) else []:
            with contextlib.suppress(ValueError, TypeError):  # what is no address is not a free one
                free.add(str(ipaddress.ip_address(ip)))
        return free

    def choose(self, net_id: int, refresh: bool = False) -> str:
        """An address for an ADD that has just arrived (it is confirmed once the ADD holds the VM's lock)."""
        with self._lock:  # one read for a burst of first ADDs
            ip = self._choose(net_id, refresh)
            self._pending.setdefault(net_id, {})[ip] = self._read_at[net_id]
            return ip

    def confirm(self, net_id: int, ip: str) -> str:
        """The address to attach at, for an ADD that chose ``ip`` and now holds the VM's lock: the agent's list is
        read again when it is older than :data:`FRESH_SECONDS`; ``ip`` stands when that list is the one it was
        chosen from, or has it free; else another choice from it."""
        with self._lock:
            chosen_from = self._pending.get(net_id, {}).pop(ip, None)
            read_at = self._read_at.get(net_id)
            if read_at is None or time.monotonic() - read_at > FRESH_SECONDS:
                self._free[net_id] = self._read(net_id)
            elif chosen_from == read_at:  # chosen from this very list, which is fresh
                return ip
            free = self._free[net_id]
            if ip in free and ip not in self._kept.get(net_id, set()):
                free.discard(ip)
                return ip
            return self._choose(net_id, False)

    def _choose(self, net_id: int, refresh: bool) -> str:
        kept = self._kept.get(net_id, set()) | set(self._pending.get(net_id, ()))
        free = self._free.get(net_id)
        if free is None or refresh or not free - kept:
            free = self._free[net_id] = self._read(net_id)
        candidates = free - kept
        if not candidates:
            raise CniError(TRY_AGAIN_LATER, "no free address on external network %s" % net_id)
        ip = self.rng.choice(sorted(candidates, key=ipaddress.ip_address))
        free.discard(ip)
        return ip

    def give_back(self, net_id: int, ip: str) -> None:
        """An address this agent released is free again (as far as it knows)."""
        with self._lock:
            if ip and net_id in self._free:
                self._free[net_id].add(ip)

    def keep(self, net_id: int, ip: str, kept: bool = True) -> None:
        """Never choose ``ip`` while an unsettled entry holds it (``kept=False``: settled, choosable again)."""
        with self._lock:
            if kept:
                self._kept.setdefault(net_id, set()).add(ip)
            else:
                self._kept.get(net_id, set()).discard(ip)


def settle_decision(
    entry: LedgerEntry, nic: Mapping[str, Any] | None, now: float, in_flight: float
) -> tuple[Decision, str]:
    """What settling an entry may do, by what its state proves and the NIC the platform shows at its address now
    (``nic``; None: none there); with the reason, for the log.

    - ``chosen``: the attach was never sent, so nothing at the address is the agent's: drop (a NIC there is
      someone else's, and stays).
    - ``sent``: no answer came.  No NIC there: drop, once the attach can no longer land (``in_flight`` seconds
      after it was sent), else wait.  A NIC there may be the agent's or one that someone attached at that address
      while the agent's attach never arrived: nothing the platform says tells them apart, so hold.
    - ``attached``: the platform answered the agent's attach at this address, so the NIC there was the agent's
      then.  No MAC recorded yet (the read after the answer failed): the first read names it: detach.  The recorded
      MAC there: detach; no NIC: drop; another MAC: hold (the platform gave two MACs for one attach: which NIC is
      the agent's cannot be told).
    - ``ready``: the node saw the recorded MAC.  There: detach; no NIC, or another MAC (the agent's NIC went, and
      the address to another NIC): drop.
    """
    ip, state = entry["ip"], entry["state"]
    if state == "chosen":
        return "drop", "the attach at %s was never sent" % ip
    if nic is None:
        if state == "sent" and now - entry.get("sent_at", entry["since"]) < in_flight:
            return "wait", "the attach at %s was sent and may still land" % ip
        return "drop", "no NIC is at %s" % ip
    seen, mac = nic.get("mac_address"), entry.get("mac")
    same = isinstance(seen, str) and mac is not None and seen.lower() == mac.lower()
    if state == "sent":
        return "hold", (
            "the attach at %s was sent and its answer never came; the NIC there (MAC %s) may be this agent's or "
            "another's attached at that address" % (ip, seen)
        )
    if mac is None or same:
        return "detach", "the NIC at %s (MAC %s) is this agent's" % (ip, seen)
    if state == "ready":
        return "drop", "its NIC (MAC %s) is gone; the NIC at %s now (MAC %s) is another's" % (mac, ip, seen)
    return "hold", (
        "the platform gave MAC %s for the NIC at %s after the attach, and now %s: which one is this agent's cannot "
        "be told" % (mac, ip, seen)
    )


class NicAgent:
    """Attach, configure, release and reclaim pod NICs for one VM."""

    def __init__(
        self,
        client: WhiteskyClient,
        location: str,
        cloudspace_id: str,
        vm_id: int,
        ledger: Ledger,
        netlink: NetlinkOps,
        pods: Pods | None = None,
        model: str = "virtio",
        grace_period: float = 30.0,
        wait_timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        in_flight: float | None = None,
    ) -> None:
        self.client = client
        self.location = location
        self.cloudspace_id = cloudspace_id
        self.vm_id = vm_id
        self.ledger = ledger
        self.netlink = netlink
        self.pods = pods
        self.model = model
        self.grace_period = grace_period
        self.wait_timeout = wait_timeout
        self.clock = clock
        #: How long after it was sent an attach with no answer may still land: twice the most a call may take.
        self.in_flight = in_flight if in_flight is not None else 2 * (client.timeout + client.retry_budget)
        self.vm_lock = threading.Lock()  # every platform mutation of this VM, in turn
        self.addresses = Addresses(client, location, rng)
        self._key_guard = threading.Lock()
        # ledger key -> [lock, users]: one operation per attachment at a time
        self._key_locks: dict[str, list[Any]] = {}
        self._networks: list[Any] | None = None
        self._gone_since: dict[str, float] = {}

    # -- helpers -----------------------------------------------------------
    def network(self, wanted: str | int) -> dict[str, Any]:
        if self._networks is None:
            self._networks = self.client.external_networks(self.location)
        try:
            net: dict[str, Any] = nics.find_network(self._networks, wanted, self.location)
        except ValueError:  # its message shows the name as given: this one shows only a plain one
            name = str(wanted)
            names = ", ".join("%s (%s)" % (n.get("name"), n.get("external_network_id")) for n in self._networks)
            raise CniError(
                INVALID_CONFIG,
                "external network %s not found in location %s"
                % (shown(name) if plain(name) else "(a name not shown)", shown(self.location)),
                "it has: %s" % (names or "none"),
            ) from None
        return net

    @staticmethod
    def platform_error(exc: WhiteskyError) -> CniError:
        """A platform failure as a CNI error: try again later (11) when the platform said "not now"."""
        status = getattr(exc, "status", None)
        later = isinstance(exc, ApiError) and (status is None or status == 409 or status in RETRY_STATUSES)
        return CniError(TRY_AGAIN_LATER if later else IO_FAILURE, "platform call failed", exc)

    def result(self, req: CniRequest, entry: LedgerEntry) -> CniResult:
        net = ipaddress.ip_network("%s/%s" % (entry["ip"], entry["prefixlen"]), strict=False)
        routes = [{"dst": r["dst"], **({"gw": r["gw"]} if r.get("gw") else {})} for r in entry["routes"]]
        return {
            "cniVersion": req.version,
            "interfaces": [{"name": req.ifname, "mac": entry.get("mac"), "sandbox": entry["netns"]}],
            "ips": [{"address": "%s/%d" % (entry["ip"], net.prefixlen), "interface": 0}],
            "routes": routes,
            "dns": {},
        }

    # -- CNI commands --------------------------------------------------------
    def handle(self, req: CniRequest) -> CniResult:
        """Run one CNI command (the shim has already refused any other); an attachment's commands one at a time."""
        commands: dict[str, Callable[[CniRequest], CniResult]] = {
            "ADD": self.cmd_add,
            "DEL": self.cmd_del,
            "CHECK": self.cmd_check,
            "GC": self.cmd_gc,
            "STATUS": self.cmd_status,
        }
        run = commands[req.command]
        if req.command in ("ADD", "DEL", "CHECK"):
            with self.key_lock(req.key):  # a runtime retrying a slow ADD waits, then gets the same outcome
                return run(req)
        return run(req)

    @contextlib.contextmanager
    def key_lock(self, key: str, blocking: bool = True) -> Iterator[bool]:
        """One operation per attachment at a time; yields False (and holds nothing) when ``blocking`` is off
        and another operation holds it."""
        with self._key_guard:
            held = self._key_locks.setdefault(key, [threading.Lock(), 0])
            held[1] += 1
        got = held[0].acquire(blocking)
        try:
            yield got
        finally:
            if got:
                held[0].release()
            with self._key_guard:
                held[1] -= 1
                if not held[1]:
                    del self._key_locks[key]

    def cmd_add(self, req: CniRequest) -> CniResult:
        existing = self.ledger.get(req.key)
        if existing is not None:
            if existing["state"] == "ready" and self.still_in_place(req, existing):
                return self.result(req, existing)
            self.clear(req.key, existing)  # a stale entry (a new netns, the old one gone), or an ADD's leftover
        net = self.network(req.conf.network or "")
        prefixlen = ipaddress.ip_network("0.0.0.0/%s" % net["subnet_mask"]).prefixlen
        routes: list[Route] = [{"dst": r["dst"], "gw": r.get("gw") or net["gateway"]} for r in req.conf.routes]
        entry: LedgerEntry = {
            "state": "chosen",
            "pod_uid": req.pod_uid,
            "netns": req.netns,
            "ifname": req.ifname,
            "network": req.conf.network or "",
            "config_name": req.conf.name,
            "network_id": net["external_network_id"],
            "since": self.clock(),
            "prefixlen": prefixlen,
            "routes": routes,
            "mtu": req.conf.mtu,
            "ip": "",
        }
        self.attach(req.key, entry, req.conf.model or self.model)
        mac = entry["mac"]
        try:
            if not self.netlink.wait_for(mac, self.wait_timeout):
                raise CniError(IO_FAILURE, "the NIC %s did not appear within %ss" % (mac, self.wait_timeout))
            if not self.netlink.configure(mac, req.netns, req.ifname, entry["ip"], prefixlen, entry["mtu"], routes):
                LOG.warning("%s: %s is up but not running (no carrier) after the wait: answered anyway", req.key, mac)
        except Exception as exc:
            released = self.rollback(req.key, entry)
            kept = "the NIC could not be shown released: it stays in the ledger, reported"
            if isinstance(exc, CniError):
                raise CniError(exc.code, exc.msg + ("" if released else "; " + kept), exc.details) from None
            outcome = "the NIC was released" if released else kept
            raise CniError(IO_FAILURE, "configuring the pod's interface failed; " + outcome, exc) from None
        entry["state"] = "ready"
        self.ledger.put(req.key, entry)
        return self.result(req, entry)

    def clear(self, key: str, entry: LedgerEntry) -> None:
        """Make room under ``key`` for a fresh ADD: release a stale ready entry, settle an ADD's leftover, and keep
        aside (:func:`stray_key`) one that stays unsettled, for the reclaimer."""
        decision, _why = self.release(key, entry)
        if decision in ("wait", "hold"):
            current = self.ledger.get(key) or entry
            self.ledger.put(stray_key(key, current["ip"]), current)
            self.ledger.delete(key)

    @contextlib.contextmanager
    def _sending(self, key: str, entry: LedgerEntry) -> Iterator[str]:
        """The VM's lock around the attach call: once it is held, the address is confirmed against a fresh list
        (:meth:`Addresses.confirm`; another one when it was taken meanwhile), and "sent" is written with it, right
        before the call, which attaches at the address yielded; once the platform has answered, the entry is
        "attached" (in memory; written with the MAC)."""
        with self.vm_lock:
            try:
                entry["ip"] = self.addresses.confirm(entry["network_id"], entry["ip"])
            except (WhiteskyError, CniError) as exc:  # nothing was sent: the choice is dropped
                self.ledger.delete(key)
                raise self.platform_error(exc) if isinstance(exc, WhiteskyError) else exc from None
            entry["state"] = "sent"
            entry["sent_at"] = self.clock()
            self.ledger.put(key, entry)
            yield entry["ip"]
            entry["state"] = "attached"

    def attach(self, key: str, entry: LedgerEntry, model: str) -> None:
        """Choose an address, write it down ("chosen"), attach there ("sent", then "attached" with the NIC's MAC);
        another address when it is taken.

        A refusal (the platform answered, nothing attached) drops the entry.  An outcome that is not known (no
        answer, or the read of the new NIC failed) is settled at once when the platform answers, else left to the
        reclaimer, by what the entry's state proves (:func:`settle_decision`).
        """
        net_id = entry["network_id"]
        refresh = False
        for _ in range(ADDRESS_TRIES):
            try:
                entry["ip"] = self.addresses.choose(net_id, refresh=refresh)
            except WhiteskyError as exc:
                raise self.platform_error(exc) from None
            entry["state"] = "chosen"
            entry.pop("sent_at", None)
            self.ledger.put(key, entry)  # the choice, before waiting for the VM's lock
            try:
                nic = nics.attach_at(
                    self.client,
                    self.cloudspace_id,
                    self.vm_id,
                    net_id,
                    entry["ip"],
                    model=model,
                    lock=self._sending(key, entry),
                )
            except nics.AddressTaken:
                self.ledger.delete(key)
                refresh = True  # the list was stale: read it again for the next choice
                continue
            except WhiteskyError as exc:
                self.unknown_outcome(key, entry, exc)
            mac = nic.get("mac_address") if isinstance(nic, dict) else None
            if not is_mac(mac):  # as a read that failed: the first read that gives one names the NIC
                self.unknown_outcome(key, entry, LogicError("the platform gave no MAC for the NIC at %s" % entry["ip"]))
            entry["mac"] = mac.lower()
            self.ledger.put(key, entry)  # "attached", with the MAC
            return
        raise CniError(
            TRY_AGAIN_LATER,
            "the platform refused %d free-looking addresses on external network %s in turn" % (ADDRESS_TRIES, net_id),
        )

    def unknown_outcome(self, key: str, entry: LedgerEntry, exc: WhiteskyError) -> NoReturn:
        """The attach failed: a refusal (an answer to the POST) drops the entry; anything else is settled now if the
        platform answers, else by the reclaimer."""
        if isinstance(exc, ApiError) and exc.status is not None and exc.method == "POST":
            self.ledger.delete(key)  # refused: nothing was attached
        else:
            if entry["state"] == "attached":
                self.ledger.put(key, entry)  # the platform answered: write that down before anything else
            with contextlib.suppress(WhiteskyError):
                self.settle(key, entry)
        raise self.platform_error(exc) from None

    def still_in_place(self, req: CniRequest, entry: LedgerEntry) -> bool:
        """Whether a saved result is still true: the same netns, with the entry's NIC in it under the ifname."""
        if entry.get("netns") != req.netns:
            return False
        try:
            live = self.netlink.inspect(req.netns, req.ifname)
        except Exception:  # cannot tell (netlink trouble): the saved result stands, as before
            return True
        return live is not None and live.get("mac") == entry.get("mac")

    def rollback(self, key: str, entry: LedgerEntry) -> bool:
        """Undo a half-done ADD: the interface back to the node, the NIC detached, the entry gone; True when so.
        An entry whose NIC the platform cannot be shown to have let go stays, for the reclaimer (False)."""
        try:
            decision, _why = self.settle(key, entry)
        except WhiteskyError:
            return False
        return decision in ("drop", "detach")

    def cmd_del(self, req: CniRequest) -> CniResult:
        entry = self.ledger.get(req.key)
        if entry is None:
            return {}  # never ours, already released, or a late DEL after the NIC was reclaimed
        self.release(req.key, entry)
        return {}

    def release(self, key: str, entry: LedgerEntry) -> tuple[Decision, str]:
        """Detach the pod's NIC from the VM (the hot-unplug takes the device out of the pod's netns with it), as far
        as the entry's state proves it the agent's (:meth:`settle`); a platform failure is a CNI error."""
        try:
            return self.settle(key, entry)
        except ApiError as exc:
            raise self.platform_error(exc) from None

    def cmd_check(self, req: CniRequest) -> CniResult:
        entry = self.ledger.get(req.key)
        if entry is None or entry["state"] != "ready":
            raise CniError(
                UNKNOWN_CONTAINER, "no attachment for container %s, ifname %s" % (req.container_id, req.ifname)
            )
        prev = req.conf.prev_result or PrevResult((), (), ())
        live = self.netlink.inspect(req.netns, req.ifname)
        if live is None:
            raise CniError(CHECK_MISMATCH, "interface %s is missing in %s" % (req.ifname, req.netns))
        want_mac = {i.mac for i in prev.interfaces if i.name == req.ifname and i.mac} or {entry.get("mac", "")}
        if str(live["mac"]).lower() not in want_mac:
            raise CniError(
                CHECK_MISMATCH,
                "interface %s has MAC %s, expected %s" % (req.ifname, live["mac"], sorted(map(str, want_mac))),
            )
        mine = [
            ip.address for ip in prev.ips if ip.interface is None or prev.interfaces[ip.interface].name == req.ifname
        ]
        for address in mine if prev.ips else ["%s/%s" % (entry["ip"], entry["prefixlen"])]:
            if address not in live["addresses"]:
                raise CniError(CHECK_MISMATCH, "address %s is missing on %s" % (address, req.ifname))
        for dst in prev.routes:
            if dst not in live["routes"]:
                raise CniError(CHECK_MISMATCH, "route %s is missing in %s" % (dst, req.netns))
        if "0.0.0.0/0" in live["routes"]:
            raise CniError(CHECK_MISMATCH, "a default route points at %s; the primary CNI owns it" % req.ifname)
        return {}

    def cmd_gc(self, req: CniRequest) -> CniResult:
        """Release the attachments of this network configuration (by its ``name``, as the spec scopes GC) that the
        runtime no longer lists; other configurations' attachments, on the same platform network or not, stay."""
        valid = req.conf.valid_attachments
        if valid is None:  # parse_request refuses a GC without the list; never read its absence as "none valid"
            raise CniError(INVALID_CONFIG, "invalid cni.dev/valid-attachments: a list of objects")
        for key, entry in self.ledger.items().items():
            if key not in valid and entry["state"] == "ready" and entry["config_name"] == req.conf.name:
                self.release(key, entry)
        return {}

    def cmd_status(self, req: CniRequest) -> CniResult:
        try:
            self.client.external_networks(self.location)
        except ApiError as exc:
            raise CniError(PLUGIN_NOT_AVAILABLE, "the platform is not reachable", exc) from None
        return {}

    # -- settling, crash recovery and reclamation ----------------------------------
    def settle(self, key: str, entry: LedgerEntry) -> tuple[Decision, str]:
        """Settle an entry by :func:`settle_decision` on a fresh read of its address: detach what is proven the
        agent's, drop what the platform shows gone, keep (and, for a person, report) the rest.  An entry goes only
        when the platform shows its NIC gone.  A platform failure propagates; the entry stays as it was."""
        if entry["state"] not in ("chosen", "ready"):  # the interface back to the node, if it went anywhere
            with contextlib.suppress(Exception):
                self.netlink.release(entry["netns"], entry["ifname"], entry.get("mac"))
        nic = None
        if entry["state"] != "chosen":
            nic = nics.nic_at(self.client, self.cloudspace_id, self.vm_id, entry["ip"], entry["network_id"])
        decision, why = settle_decision(entry, nic, self.clock(), self.in_flight)
        net_id, ip = entry["network_id"], entry["ip"]
        if decision == "detach":
            with self.vm_lock:
                nics.detach(self.client, self.cloudspace_id, self.vm_id, ip, net_id)
        if decision in ("detach", "drop"):
            self.ledger.delete(key)
            self._gone_since.pop(key, None)
            self.addresses.keep(net_id, ip, kept=False)
            if nic is None or decision == "detach":
                self.addresses.give_back(net_id, ip)
            return decision, why
        self.addresses.keep(net_id, ip)
        if decision == "hold" and entry.get("held") != why:
            entry["held"] = why
            LOG.warning("%s: left for a person: %s", key, why)
        if self.ledger.get(key) != entry:
            self.ledger.put(key, entry)
        return decision, why

    def held(self) -> dict[str, str]:
        """The entries left for a person: key -> why."""
        return {key: entry["held"] for key, entry in self.ledger.items().items() if entry.get("held")}

    def recover(self) -> list[str]:
        """Settle what a crash left short of ready; return the keys settled.  What stays (an attach that may still
        land, a NIC left for a person) is kept, its address never chosen, and the reclaimer settles it later."""
        resolved: list[str] = []
        for key, entry in self.ledger.items().items():
            if entry["state"] == "ready":
                continue
            self.addresses.keep(entry["network_id"], entry["ip"])
            try:
                decision, _why = self.settle(key, entry)
            except WhiteskyError as exc:
                LOG.warning("%s: settling it failed, the reclaimer tries again: %s", key, exc)
                continue
            if decision in ("drop", "detach"):
                resolved.append(key)
        for key, why in self.held().items():
            LOG.warning("%s: left for a person: %s", key, why)
        return resolved

    def gone(self, entry: LedgerEntry, uids: set[str] | None) -> str | None:
        if not os.path.exists(entry["netns"]):
            return "netns %s is gone" % entry["netns"]
        if uids is not None and entry.get("pod_uid") and entry["pod_uid"] not in uids:
            return "pod %s is no longer on this node" % entry["pod_uid"]
        return None

    def settle_leftover(self, key: str) -> Reclaimed | None:
        """Settle an entry short of ready that no ADD is working on; what was released, if anything."""
        with self.key_lock(key, blocking=False) as free:
            current = self.ledger.get(key) if free else None
            if current is None or current["state"] == "ready":
                return None  # an ADD is on it, or it is done
            try:
                decision, why = self.settle(key, current)
            except WhiteskyError as exc:
                LOG.warning("%s: settling it failed, tried again next pass: %s", key, exc)
                return None
        if decision not in ("drop", "detach"):
            return None
        return {"key": key, "reason": "an ADD left it short of ready: " + why, "ip": current["ip"]}

    def reclaim_once(self) -> list[Reclaimed]:
        """Settle entries short of ready that no ADD is working on, and release ready NICs whose pod has been gone
        for the grace period; return what was released."""
        uids = self.pods() if self.pods else None
        now = self.clock()
        released: list[Reclaimed] = []
        for key, entry in self.ledger.items().items():
            if entry["state"] != "ready":
                leftover = self.settle_leftover(key)
                if leftover is not None:
                    released.append(leftover)
                continue
            why = self.gone(entry, uids)
            if why is None:
                self._gone_since.pop(key, None)
                continue
            since = self._gone_since.setdefault(key, now)
            if now - since >= self.grace_period:
                self.release(key, entry)
                released.append({"key": key, "reason": why, "ip": entry.get("ip")})
        return released
