"""What settling a ledger entry may do: a pure decision, by what the entry's state proves and the NIC the platform
shows at its address now (docs/sriov.md, "The ledger: what each state proves")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from capvco_sriov.ledger import LedgerEntry

#: What settling an entry does: ``drop`` (nothing of the agent's is attached: the entry goes), ``detach`` (the NIC
#: is the agent's: detached, then the entry goes), ``wait`` (an attach that may still land: kept, settled later),
#: ``hold`` (a NIC that may or may not be the agent's: kept, reported, left for a person).
Decision = Literal["drop", "detach", "wait", "hold"]


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
