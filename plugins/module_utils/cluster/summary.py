# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a person reads of a plan and of a run, at Ansible's default verbosity: one short line of what changes and
what it costs per hour, whole and by unit of the location's price list, and the pools at zero with their price per
machine (pure); each line scrubbed (``scrub``: a currency, a profile or a name the platform gave is shown with its
controls escaped).

    plan: create 3 machines (web-cp-0, web-gpu-0, web-gpu-1), reserve 2 x NVIDIA A100 (nvidia-a100-40c):
          +2.64 EUR/h, 2.64 EUR/h after (vcu 0.30, mu 0.34, su 0.00, piu 0.00, vgu 2.00)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import scrub

#: The longest line a person reads of a plan (``scrub``: what the platform said in it has its controls escaped).
LINE_LIMIT = 2048

#: How many names a line shows before it says "and N more".
SHOWN = 5


def money(amount: float | None, currency: str | None, per_hour: bool = True) -> str:
    """``2.00 EUR/h``; ``unknown`` when the price is not known (never shown as free)."""
    if amount is None:
        return "unknown price"
    return "%.2f%s%s" % (amount, " " + currency if currency else "", "/h" if per_hour else "")


def by_unit(price: Mapping[str, Any], amounts: bool = False) -> str:
    """What the units held after cost per hour, each named by its key in the price list: ``vcu 0.30, mu 0.34,
    vgu 2.00`` (``amounts``: ``vcu 18 vCPU 0.30, ...``); the units the cluster holds none of are left out."""
    shown = []
    for unit, line in (price.get("units") or {}).items():
        if not line.get("after") and line.get("after") is not None:
            continue
        cost = line.get("hourly_after")
        what = " %s" % amount(line.get("after"), line.get("size")) if amounts else ""
        shown.append("%s%s %s" % (unit, what, "unknown" if cost is None else "%.2f" % cost))
    return ", ".join(shown)


def amount(value: float | None, size: object) -> str:
    """``18 vCPU``, ``72 GiB of memory``; ``unknown GiB of boot disk`` when the amount is not known."""
    number = "unknown" if value is None else ("%.4f" % value).rstrip("0").rstrip(".")
    return "%s %s" % (number, size)


def price_lines(price: Mapping[str, Any], side: str) -> list[str]:
    """A diff side's price (``side``: ``before`` or ``after``): the whole, then each unit held on that side with its
    amount and what it costs per hour (before: at today's prices)."""
    currency = price.get("currency")
    lines = ["%s" % money(price.get("hourly_" + side), currency)]
    for unit, line in (price.get("units") or {}).items():
        held = line.get(side)
        if held == 0:
            continue
        rate = line.get("per_hour")
        cost = None if held is None or rate is None else held * rate
        lines.append("%s %s %s" % (unit, amount(held, line.get("size")), money(cost, currency)))
    return lines


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (", and %d more" % (len(names) - SHOWN) if len(names) > SHOWN else "")


def _count(n: int, what: str) -> str:
    return "%d %s%s" % (n, what, "" if n == 1 else "s")


def _reserve(reserve: Iterable[Mapping[str, Any]]) -> str:
    """``2 x NVIDIA A100 (nvidia-a100-20c)``, per type and profile."""
    by = Counter((str(r.get("type")), str(r.get("profile"))) for r in reserve)
    return ", ".join("%d x %s (%s)" % (n, t, p) for (t, p), n in sorted(by.items()))


def converge_lines(view: Mapping[str, Any], check_mode: bool) -> list[str]:
    """The lines of a converge's plan (``check_mode``: what it would do) or of what it did, with the price."""
    price = view["price"]
    currency = price.get("currency")
    steps = []
    if view["cloudspace"].get("create"):
        steps.append("create cloudspace %s" % view["cloudspace"]["name"])
    if view["create"]:
        steps.append(
            "create %s (%s)" % (_count(len(view["create"]), "machine"), _names([c["name"] for c in view["create"]]))
        )
    if view["delete"]:
        steps.append("delete %s (%s)" % (_count(len(view["delete"]), "machine"), _names(list(view["delete"]))))
    if view["reserve"]:
        steps.append("reserve " + _reserve(view["reserve"]))
    if view["release"]:
        steps.append("release %s" % _count(len(view["release"]), "vGPU"))
    if view["attach"]:
        steps.append("attach %s again" % _count(len(view["attach"]), "vGPU"))
    added = (price.get("hourly_added") or 0) if price.get("hourly_added") is not None else None
    removed = (price.get("hourly_removed") or 0) if price.get("hourly_removed") is not None else None
    change = None if added is None or removed is None else added - removed
    head = ("plan: " if check_mode else "done: ") + (", ".join(steps) if steps else "no change")
    if steps:
        sign = "" if change is None else ("+" if change >= 0 else "-")
        delta = money(None if change is None else abs(change), currency)
        head += ": %s%s, %s after" % (sign, delta, money(price.get("hourly_after"), currency))
    else:
        head += ": %s, %s" % (
            _count(int(price.get("vgpus_after") or 0), "vGPU"),
            money(price.get("hourly_after"), currency),
        )
    units = by_unit(price)
    lines = [head + (" (%s)" % units if units else "")]
    for pool in view.get("pools") or []:
        if not pool.get("replicas"):
            lines.append(
                "pool %s at 0 machines: nothing billed; %s a machine of %s when scaled up"
                % (pool["name"], money(pool.get("per_machine_hourly"), currency), machine_size(pool))
            )
    return [scrub(line, LINE_LIMIT) for line in lines]


def machine_size(pool: Mapping[str, Any]) -> str:
    """A pool's machine for a person: ``8 vCPUs, 32768 MiB, 10 GiB disk, 2 x NVIDIA A100 (profile full, 40 GB)``."""
    parts = []
    if pool.get("vcpus") is not None:
        parts.append(_count(int(pool["vcpus"]), "vCPU"))
    if pool.get("memory") is not None:
        parts.append("%d MiB" % pool["memory"])
    if pool.get("disk_size") is not None:
        parts.append("%d GiB disk" % pool["disk_size"])
    gpu = pool.get("gpu")
    if gpu:
        memory = ", %d GB" % gpu["memory"] if gpu.get("memory") is not None else ""
        shown = " (profile %s%s)" % (gpu["profile"], memory) if gpu.get("profile") else ""
        parts.append("%d x %s%s" % (gpu["count"], gpu["type"], shown))
    return ", ".join(parts) or "its size"


def teardown_lines(view: Mapping[str, Any], check_mode: bool) -> list[str]:
    """The lines of a teardown's plan or of what it did: machines, vGPUs and cloudspaces, and the money it saves."""
    price = view["price"]
    currency = price.get("currency")
    steps = []
    if view["delete"]:
        steps.append("delete %s (%s)" % (_count(len(view["delete"]), "machine"), _names(list(view["delete"]))))
    if view["release"]:
        steps.append("release %s" % _count(len(view["release"]), "vGPU"))
    gone = [c["name"] for c in view["cloudspaces"] if c.get("delete")]
    if gone:
        steps.append("delete cloudspace %s" % ", ".join(gone))
    head = ("plan: " if check_mode else "done: ") + (", ".join(steps) if steps else "nothing to delete")
    if steps:
        head += ": -%s, %s after" % (
            money(price.get("hourly_removed"), currency),
            money(price.get("hourly_after"), currency),
        )
    return [scrub(head, LINE_LIMIT)]


def left_billed(machine: str, count: int, per_vgpu_hour: float | None, currency: str | None, location: str) -> str:
    """The warning of a machine deleted by force with its vGPUs: they stay reserved, and what they cost."""
    return scrub(
        "machine %s was deleted by force with %s attached: still reserved and billed (%s) until the orphan check "
        "releases %s (ansible-playbook whitesky.capvco.gpu_orphans -e location=%s -e reclaim=true) or the cluster "
        "is deleted"
        % (
            machine,
            _count(count, "vGPU"),
            money(None if per_vgpu_hour is None else per_vgpu_hour * count, currency),
            "it" if count == 1 else "them",
            location,
        ),
        LINE_LIMIT,
    )


def found_nothing(
    cluster: str,
    cloudspace: str,
    location: str,
    machine: str | None,
    looked_in: Sequence[str],
    found: Mapping[str, Any] | None,
) -> str:
    """The warning of a delete that found nothing of that name: where it looked (``looked_in``: the ids of the
    cloudspaces of the spec's name it read in the location, none when there is none) and where the customer has a
    cluster (``cloudspaces``, ``reservations``) or machine (``machines``) of that name elsewhere
    (``world.elsewhere``; None: not looked for)."""
    if machine is not None:
        head = "machine %r is in no cloudspace %r of cluster %r: nothing to delete" % (machine, cloudspace, cluster)
    else:
        head = "cluster %r has nothing to delete in location %r, nothing was deleted" % (cluster, location)
    if looked_in:
        looked = "looked in cloudspace %r of location %r" % (cloudspace, location)
    else:
        looked = "looked in location %r, which has no cloudspace %r" % (location, cloudspace)
    if machine is None:
        looked += ", and at that location's vGPU reservations"
    if found is None:  # not looked for elsewhere
        return "%s (%s)" % (head, looked)
    where: list[str] = []
    for cs in found.get("cloudspaces", ()):
        machines = cs["machines"]
        where.append(
            "cloudspace %r in location %r (%s)"
            % (cs["name"], cs["location"], "machines " + _names(machines) if machines else "no machine of it")
        )
    for loc, count in found.get("reservations", {}).items():
        where.append("%s in location %r, billed" % (_count(count, "vGPU reservation"), loc))
    for vm in found.get("machines", ()):
        owner = "its marker names cluster %r" % vm["owner"] if vm["owner"] else "no cluster's marker"
        where.append(
            "VM %r in cloudspace %r of location %r (%s)" % (vm["name"], vm["cloudspace"], vm["location"], owner)
        )
    what = "machine" if machine is not None else "cluster"
    if not where:
        return "%s (%s); the customer has no %s of that name in its other cloudspaces and locations either" % (
            head,
            looked,
            what,
        )
    hint = (
        "give that machine's name with its cluster's spec"
        if machine is not None
        else "give that location and cloudspace as cluster.location and cluster.cloudspace"
    )
    shown = where[:SHOWN] + (["and %d more" % (len(where) - SHOWN)] if len(where) > SHOWN else [])
    return "%s (%s); the customer has a %s of that name elsewhere: %s; %s" % (
        head,
        looked,
        what,
        "; ".join(shown),
        hint,
    )
