"""SR-IOV NICs per pod: the node agent's logic (pure Python, no netlink, no sockets).

``agent`` wraps this with the unix socket, ``netlink`` (pyroute2) and ``pods``
(the Kubernetes client); everything that decides lives here, on the
collection's own platform client and NIC operations:

- CNI request validation and results, per the CNI spec 1.0.0 / 1.1.0;
- NIC identity by address: the agent chooses a free address (:class:`Addresses`)
  and attaches at it, so its NIC is the VM's NIC at that address, whatever else
  is on the network; one platform mutation per ADD, then one read for the MAC;
- a ledger on disk, ``(container id, ifname) -> (pod, netns, network, ip, mac)``,
  written atomically *before* the attach call (intent, with the chosen address)
  and when the pod's interface is ready, so a crash at any point is resolved on
  restart or by the reclaimer;
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
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, NotRequired, Protocol, TypedDict
from urllib.parse import quote

from ansible_collections.whitesky.capvco.plugins.module_utils import nics
from ansible_collections.whitesky.capvco.plugins.module_utils.errors import ApiError, WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.transport import RETRY_STATUSES
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
)

if TYPE_CHECKING:
    from ansible_collections.whitesky.capvco.plugins.module_utils.client import WhiteskyClient
    from capvco_sriov.shim import CniConfig, Route

#: CNI_ARGS, parsed: ``K8S_POD_UID`` and the other ``KEY=VALUE`` pairs the runtime passes (any keys).
CniArgs = dict[str, str]
#: A CNI result (or an empty answer), as the plugin prints it.
CniResult = dict[str, Any]


class LedgerEntry(TypedDict):
    """One attachment in the ledger (a JSON object on disk): a pod's NIC, from the intent to the ready interface.

    ``cmd_add`` writes the intent ("attaching", with the chosen ``ip``) before the attach call, then, with the
    NIC's ``mac``, the entry "ready".  The keys that are not required may be missing from an entry an earlier
    agent wrote: its intent had no ``ip`` but ``before`` (the MACs on the network then), and no ``config_name``.
    """

    state: Literal["attaching", "ready"]
    pod_uid: str | None
    netns: str
    ifname: str
    network: str | int  # as the configuration names it
    network_id: int  # the platform's external network id
    since: float
    config_name: NotRequired[str | None]
    prefixlen: NotRequired[int]
    routes: NotRequired[list[Route]]  # each with its gw
    mtu: NotRequired[int | None]
    ip: NotRequired[str]
    mac: NotRequired[str]
    before: NotRequired[list[str]]


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
    ) -> None: ...

    def release(self, netns: str, ifname: str, mac: str | None) -> None: ...

    def inspect(self, netns: str, ifname: str) -> LinkState | None: ...


#: ``pods()``: the UIDs of the pods on this node, or None when unknown (``pods.KubePods``).
Pods = Callable[[], set[str] | None]


class CniError(Refusal):
    """A CNI error with the spec's code, from the agent (the shim's :class:`Refusal`, as a document too)."""

    def to_dict(self, version: str = VERSIONS[-1]) -> dict[str, Any]:
        return error(self.code, self.msg, self.details, version)


class CniRequest:
    """One validated CNI invocation: the environment and the network configuration."""

    def __init__(
        self, command: str, container_id: str, netns: str, ifname: str, args: CniArgs, config: CniConfig
    ) -> None:
        self.command = command
        self.container_id = container_id
        self.netns = netns
        self.ifname = ifname
        self.args = args
        self.config = config

    @property
    def version(self) -> str:
        return self.config.get("cniVersion", VERSIONS[-1])

    @property
    def key(self) -> str:
        return ledger_key(self.container_id, self.ifname)

    @property
    def pod_uid(self) -> str | None:
        return self.args.get("K8S_POD_UID")


def parse_request(env: Mapping[str, str], stdin: str) -> CniRequest:
    """Validate the CNI environment and stdin; raise :class:`CniError` with the spec's code.

    What the request alone decides is the shim's ``check`` (one place); the rest needs the configuration's
    meaning or this host.
    """
    try:
        config = check(env, stdin)
    except Refusal as exc:
        raise CniError(exc.code, exc.msg, exc.details) from None
    command = env.get("CNI_COMMAND", "")
    if command != "STATUS" and not config.get("network"):
        raise CniError(INVALID_CONFIG, "the network configuration needs 'network' (an external network name or id)")
    if "mtu" in config and (not isinstance(config["mtu"], int) or not 576 <= config["mtu"] <= 9216):
        raise CniError(INVALID_CONFIG, "invalid mtu %r: an integer from 576 to 9216" % (config["mtu"],))
    routes = config.get("routes") or []
    if not isinstance(routes, list):
        raise CniError(INVALID_CONFIG, "invalid routes %r: a list of {dst, gw}" % (routes,))
    for route in routes:
        try:
            if not isinstance(route.get("dst"), str):
                raise ValueError(route)
            ipaddress.ip_network(route["dst"], strict=False)
        except (ValueError, AttributeError):
            raise CniError(INVALID_CONFIG, "invalid route %r: needs 'dst' as an address/prefix" % (route,)) from None
        if route["dst"].endswith("/0"):
            raise CniError(INVALID_CONFIG, "a default route is not allowed: the primary CNI owns it")
    args: CniArgs = {}
    for pair in filter(None, env.get("CNI_ARGS", "").split(";")):
        if "=" in pair:
            key, value = pair.split("=", 1)
            args[key] = value
    container_id = env.get("CNI_CONTAINERID", "")
    netns = env.get("CNI_NETNS", "")
    ifname = env.get("CNI_IFNAME", "")
    if command in ("ADD", "CHECK") and not os.path.exists(netns):
        raise CniError(INVALID_ENV, "CNI_NETNS %r does not exist" % netns)
    return CniRequest(command, container_id, netns, ifname, args, config)


def ledger_key(container_id: str, ifname: str) -> str:
    """The ledger's key of an attachment, injective: a container id (validated: letters, digits, ``_ . -``) never
    holds ``@``, and the interface name is percent-encoded (``@``, ``%`` and ``/`` included), so no two
    (container, ifname) pairs share a key, and a key is a file name."""
    return "%s@%s" % (container_id, quote(ifname, safe=""))


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
        """Replace the entry atomically: one fsync (the new file's data) before the rename.  A journaling file
        system (ext4, xfs) commits the rename with its journal; an agent that is killed loses nothing."""
        tmp = self._path(key) + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(entry, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self._path(key))

    def get(self, key: str) -> LedgerEntry | None:
        try:
            with open(self._path(key), encoding="utf-8") as fh:
                entry: LedgerEntry = json.load(fh)
                return entry
        except FileNotFoundError:
            return None

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(key))

    def migrate(self) -> dict[str, str]:
        """Rename entries an earlier agent keyed ``<container id>.<ifname>`` to :func:`ledger_key`, reading the
        interface name from the entry; return ``{old: new}``.  Without it a DEL would not find them and a GC
        would take them for attachments the runtime no longer lists."""
        moved: dict[str, str] = {}
        for name in sorted(os.listdir(self.dir)):
            if not name.endswith(".json") or "@" in name:
                continue
            old = name[:-5]
            entry = self.get(old)
            if entry is None:
                continue
            ifname = entry.get("ifname") or ""
            suffix = "." + ifname.replace("/", "_")
            if not ifname or not old.endswith(suffix) or len(old) == len(suffix):
                continue
            new = ledger_key(old[: -len(suffix)], ifname)
            self.put(new, entry)
            self.delete(old)
            moved[old] = new
        return moved

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


class Addresses:
    """The addresses this agent may choose on each external network: what the platform last listed as free
    (``getExternalNetworkAddresses``), less what this agent has chosen since.  The list is read once per
    network and again only when it runs dry or an address turns out taken, so an ADD costs no read for it.
    The choice is random, so agents on different nodes rarely choose the same address at once."""

    def __init__(self, client: WhiteskyClient, location: str, rng: random.Random | None = None) -> None:
        self.client = client
        self.location = location
        self.rng = rng or random.SystemRandom()
        self._lock = threading.Lock()
        self._free: dict[int, set[str]] = {}  # network id -> set of addresses

    def choose(self, net_id: int, refresh: bool = False) -> str:
        with self._lock:  # one read for a burst of first ADDs
            free = self._free.get(net_id)
            if free is None or refresh or not free:
                free = self._free[net_id] = set(self.client.free_addresses(self.location, net_id))
            if not free:
                raise CniError(TRY_AGAIN_LATER, "no free address on external network %s" % net_id)
            ip = self.rng.choice(sorted(free, key=ipaddress.ip_address))
            free.discard(ip)
            return ip

    def give_back(self, net_id: int, ip: str) -> None:
        """An address this agent released is free again (as far as it knows)."""
        with self._lock:
            if ip and net_id in self._free:
                self._free[net_id].add(ip)


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
        except ValueError as exc:
            raise CniError(INVALID_CONFIG, str(exc)) from None
        return net

    @staticmethod
    def platform_error(exc: WhiteskyError) -> CniError:
        """A platform failure as a CNI error: try again later (11) when the platform said "not now"."""
        status = getattr(exc, "status", None)
        later = isinstance(exc, ApiError) and (status is None or status == 409 or status in RETRY_STATUSES)
        return CniError(TRY_AGAIN_LATER if later else IO_FAILURE, "platform call failed", exc)

    def _detach(self, entry: LedgerEntry) -> bool:
        """Detach the NIC at the entry's address, but only if it is the one the entry recorded: its MAC when the
        entry has one, else (an attach whose answer never came) the NIC at the address this agent chose."""
        nic = nics.nic_at(self.client, self.cloudspace_id, self.vm_id, entry["ip"], entry["network_id"])
        if nic is None or (entry.get("mac") and nic["mac_address"] != entry["mac"]):
            return False
        with self.vm_lock:
            nics.detach(self.client, self.cloudspace_id, self.vm_id, entry["ip"], entry["network_id"])
        self.addresses.give_back(entry["network_id"], entry["ip"])
        return True

    def result(self, req: CniRequest, entry: LedgerEntry) -> CniResult:
        net = ipaddress.ip_network("%s/%s" % (entry["ip"], entry["prefixlen"]), strict=False)
        routes = [{"dst": r["dst"], **({"gw": r["gw"]} if r.get("gw") else {})} for r in entry.get("routes", [])]
        return {
            "cniVersion": req.version,
            "interfaces": [{"name": req.ifname, "mac": entry["mac"], "sandbox": entry["netns"]}],
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
        if existing and existing.get("state") == "ready":
            if self.still_in_place(req, existing):
                return self.result(req, existing)
            self.release(req.key, existing)  # a stale entry (a new netns, the old one gone): a fresh attach
        elif existing:
            self.settle(req.key, existing)  # what an earlier ADD of this attachment left halfway
        net = self.network(req.config["network"])
        prefixlen = ipaddress.ip_network("0.0.0.0/%s" % net["subnet_mask"]).prefixlen
        routes: list[Route] = [
            {"dst": r["dst"], "gw": r.get("gw") or net["gateway"]} for r in req.config.get("routes") or []
        ]
        entry: LedgerEntry = {
            "state": "attaching",
            "pod_uid": req.pod_uid,
            "netns": req.netns,
            "ifname": req.ifname,
            "network": req.config["network"],
            "config_name": req.config.get("name"),
            "network_id": net["external_network_id"],
            "since": self.clock(),
            "prefixlen": prefixlen,
            "routes": routes,
            "mtu": req.config.get("mtu"),
        }
        nic = self.attach(req.key, entry, req.config.get("model") or self.model)
        entry["mac"] = nic["mac_address"]
        try:
            if not self.netlink.wait_for(entry["mac"], self.wait_timeout):
                raise CniError(IO_FAILURE, "the NIC %s did not appear within %ss" % (entry["mac"], self.wait_timeout))
            self.netlink.configure(entry["mac"], req.netns, req.ifname, entry["ip"], prefixlen, entry["mtu"], routes)
        except Exception as exc:
            self.rollback(req.key, entry)
            if isinstance(exc, CniError):
                raise
            raise CniError(IO_FAILURE, "configuring the pod's interface failed; the NIC was released", exc) from None
        entry["state"] = "ready"
        self.ledger.put(req.key, entry)
        return self.result(req, entry)

    def attach(self, key: str, entry: LedgerEntry, model: str) -> dict[str, Any]:
        """Choose an address, write the intent with it, attach there; another address when it is taken.

        A refusal (the platform answered, nothing attached) drops the intent.  An outcome that is not known
        (no answer, or the read of the new NIC failed) is settled at once when the platform answers, else left
        to the reclaimer: the intent holds the address, which is all it needs.
        """
        net_id = entry["network_id"]
        refresh = False
        for _ in range(ADDRESS_TRIES):
            try:
                entry["ip"] = self.addresses.choose(net_id, refresh=refresh)
            except WhiteskyError as exc:
                raise self.platform_error(exc) from None
            self.ledger.put(key, entry)  # intent, with the address, before the call
            try:
                nic: dict[str, Any] = nics.attach_at(
                    self.client, self.cloudspace_id, self.vm_id, net_id, entry["ip"], model=model, lock=self.vm_lock
                )
                return nic
            except nics.AddressTaken:
                self.ledger.delete(key)
                refresh = True  # the list was stale: read it again for the next choice
            except ApiError as exc:
                if exc.status is not None and exc.method == "POST":
                    self.ledger.delete(key)  # refused: nothing was attached
                else:
                    with contextlib.suppress(WhiteskyError):
                        self.settle(key, entry)
                raise self.platform_error(exc) from None
            except WhiteskyError as exc:
                with contextlib.suppress(WhiteskyError):
                    self.settle(key, entry)
                raise self.platform_error(exc) from None
        raise CniError(
            TRY_AGAIN_LATER,
            "the platform refused %d free-looking addresses on external network %s in turn" % (ADDRESS_TRIES, net_id),
        )

    def still_in_place(self, req: CniRequest, entry: LedgerEntry) -> bool:
        """Whether a saved result is still true: the same netns, with the entry's NIC in it under the ifname."""
        if entry.get("netns") != req.netns:
            return False
        try:
            live = self.netlink.inspect(req.netns, req.ifname)
        except Exception:  # cannot tell (netlink trouble): the saved result stands, as before
            return True
        return live is not None and live.get("mac") == entry.get("mac")

    def rollback(self, key: str, entry: LedgerEntry) -> None:
        """Undo a half-done ADD: the interface back to the node, the NIC detached, the entry gone."""
        try:
            self.netlink.release(entry["netns"], entry["ifname"], entry.get("mac"))
        finally:
            self._detach(entry)
            self.ledger.delete(key)

    def cmd_del(self, req: CniRequest) -> CniResult:
        entry = self.ledger.get(req.key)
        if entry is None:
            return {}  # never ours, already released, or a late DEL after the NIC was reclaimed
        self.release(req.key, entry)
        return {}

    def release(self, key: str, entry: LedgerEntry) -> None:
        """Detach the pod's NIC from the VM: the hot-unplug takes the device out of the pod's netns with it."""
        try:
            if entry.get("ip"):
                self._detach(entry)
        except ApiError as exc:
            raise self.platform_error(exc) from None
        self.ledger.delete(key)
        self._gone_since.pop(key, None)

    def cmd_check(self, req: CniRequest) -> CniResult:
        entry = self.ledger.get(req.key)
        if entry is None or entry.get("state") != "ready":
            raise CniError(
                UNKNOWN_CONTAINER, "no attachment for container %s, ifname %s" % (req.container_id, req.ifname)
            )
        prev = req.config.get("prevResult") or {}
        live = self.netlink.inspect(req.netns, req.ifname)
        if live is None:
            raise CniError(CHECK_MISMATCH, "interface %s is missing in %s" % (req.ifname, req.netns))
        want_mac = {i.get("mac") for i in prev.get("interfaces", []) if i.get("name") == req.ifname} or {entry["mac"]}
        if live["mac"] not in want_mac:
            raise CniError(
                CHECK_MISMATCH, "interface %s has MAC %s, expected %s" % (req.ifname, live["mac"], sorted(want_mac))
            )
        for ip in prev.get("ips", []) or [{"address": "%s/%s" % (entry["ip"], entry["prefixlen"])}]:
            if ip["address"] not in live["addresses"]:
                raise CniError(CHECK_MISMATCH, "address %s is missing on %s" % (ip["address"], req.ifname))
        for route in prev.get("routes", []):
            if route["dst"] not in live["routes"]:
                raise CniError(CHECK_MISMATCH, "route %s is missing in %s" % (route["dst"], req.netns))
        if "0.0.0.0/0" in live["routes"]:
            raise CniError(CHECK_MISMATCH, "a default route points at %s; the primary CNI owns it" % req.ifname)
        return {}

    def cmd_gc(self, req: CniRequest) -> CniResult:
        """Release the attachments of this network configuration (by its ``name``, as the spec scopes GC) that the
        runtime no longer lists; other configurations' attachments, on the same platform network or not, stay."""
        valid = {
            ledger_key(str(a.get("containerID")), a.get("ifname") or "")  # a missing id: "None", as before
            for a in req.config.get("cni.dev/valid-attachments") or []
        }
        for key, entry in self.ledger.items().items():
            if key in valid or entry["state"] != "ready":
                continue
            if "config_name" in entry:
                mine = entry["config_name"] == req.config.get("name")
            else:  # an entry written before the name was kept: by its network, as then
                mine = entry.get("network") == req.config.get("network")
            if mine:
                self.release(key, entry)
        return {}

    def cmd_status(self, req: CniRequest) -> CniResult:
        try:
            self.client.external_networks(self.location)
        except ApiError as exc:
            raise CniError(PLUGIN_NOT_AVAILABLE, "the platform is not reachable", exc) from None
        return {}

    # -- crash recovery and reclamation ----------------------------------------
    def recover(self) -> list[str]:
        """Resolve what a crash left halfway: settle every entry that never became ready."""
        self.ledger.migrate()
        resolved: list[str] = []
        for key, entry in self.ledger.items().items():
            if entry["state"] != "ready":
                self.settle(key, entry)
                resolved.append(key)
        return resolved

    def settle(self, key: str, entry: LedgerEntry) -> None:
        """Release what an ADD left halfway: the interface back to the node, the NIC at the entry's address
        detached (it is the one this agent chose), the entry gone."""
        if not entry.get("ip") and entry["state"] == "attaching":
            self._settle_legacy(entry)
        with contextlib.suppress(Exception):
            self.netlink.release(entry["netns"], entry["ifname"], entry.get("mac"))
        if entry.get("ip"):
            self._detach(entry)
        self.ledger.delete(key)

    def _settle_legacy(self, entry: LedgerEntry) -> None:
        """An intent written by an agent before addresses were chosen: its NIC is the one on the network that
        was not there before (the list it wrote down) and no other entry claims."""
        claimed = {e.get("mac") for e in self.ledger.items().values() if e.get("mac")}
        for nic in nics.on_network(self.client.nics(self.cloudspace_id, self.vm_id), entry["network_id"]):
            if nic["mac_address"] not in entry.get("before", []) and nic["mac_address"] not in claimed:
                entry.update({"mac": nic["mac_address"], "ip": nic["ip_address"]})
                return

    def gone(self, entry: LedgerEntry, uids: set[str] | None) -> str | None:
        if not os.path.exists(entry["netns"]):
            return "netns %s is gone" % entry["netns"]
        if uids is not None and entry.get("pod_uid") and entry["pod_uid"] not in uids:
            return "pod %s is no longer on this node" % entry["pod_uid"]
        return None

    def reclaim_once(self) -> list[Reclaimed]:
        """Release ready NICs whose pod has been gone for the grace period; return what was released."""
        uids = self.pods() if self.pods else None
        now = self.clock()
        released: list[Reclaimed] = []
        for key, entry in self.ledger.items().items():
            if entry["state"] != "ready":
                with self.key_lock(key, blocking=False) as free:
                    current = self.ledger.get(key) if free else None
                    if current is not None and current["state"] != "ready":  # no ADD is on it: a leftover
                        self.settle(key, current)
                        released.append({"key": key, "reason": "an ADD left it halfway", "ip": current.get("ip")})
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
