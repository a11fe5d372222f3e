"""The ledger: one JSON file per attachment, ``(container id, ifname) -> the pod's NIC``, replaced atomically at
each step of an ADD, so that a crash at any point is settled on restart or by the reclaimer (``settle``)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict, TypeGuard
from urllib.parse import quote

from ansible_collections.whitesky.capvco.plugins.module_utils.platform import documents
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.files import write_whole

if TYPE_CHECKING:
    from capvco_sriov.wire import Route

LOG = logging.getLogger("capvco-sriov-agent")

#: Where an attachment is (see ``settle.settle_decision`` and docs/sriov.md):
#:
#: - ``chosen``: the address is chosen and written down; the attach is not sent yet (it waits for the VM's lock);
#: - ``sent``: the attach call is sent (written once the VM's lock is held, right before the call); no answer yet;
#: - ``attached``: the platform answered; ``mac`` is the MAC it gave for the NIC at the address then;
#: - ``ready``: the pod's interface is configured: the node saw that MAC.
State = Literal["chosen", "sent", "attached", "ready"]
STATES = ("chosen", "sent", "attached", "ready")


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
    release_failed: NotRequired[str]  # why moving its NIC back to the node failed: tried again (DEL, reclaimer)


def ledger_key(container_id: str, ifname: str) -> str:
    """The ledger's key of an attachment, injective: a container id (validated: letters, digits, ``_ . -``) never
    holds ``@``, and the interface name is percent-encoded (``@``, ``%`` and ``/`` included), so no two
    (container, ifname) pairs share a key, and a key is a file name."""
    return "%s@%s" % (container_id, quote(ifname, safe=""))


def stray_key(key: str, ip: str) -> str:
    """Where an entry that an ADD found still unsettled is kept aside, so that the ADD may go on under ``key``:
    ``#`` is in neither a container id nor a percent-encoded interface name, so no attachment's key is a stray's."""
    return "%s#%s" % (key, ip)


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
        and obj.get("state") in STATES
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

    def put(self, key: str, entry: LedgerEntry, durable: bool = True) -> None:
        """Replace the entry atomically (``files.write_whole``): one fsync (the new file's data) before the rename.
        A journaling file system (ext4, xfs) commits the rename with its journal; an agent that is killed loses
        nothing.  ``durable`` off: no fsync (an entry that a crash may lose without harm: one that proves nothing,
        such as an address chosen and not yet sent)."""
        write_whole(self._path(key), json.dumps(entry), sync=durable)

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
