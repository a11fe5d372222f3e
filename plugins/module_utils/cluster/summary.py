# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a person reads of a plan and of a run, at Ansible's default verbosity: one short line of what changes and
what it costs per hour, and the pools at zero with their price per machine (pure).

    plan: create 3 machines (web-cp-0, web-gpu-0, web-gpu-1), reserve 2 x NVIDIA A100 (nvidia-a100-20c):
          +2.00 EUR/h, 2.00 EUR/h after
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: How many names a line shows before it says "and N more".
SHOWN = 5


def money(amount: float | None, currency: str | None, per_hour: bool = True) -> str:
    """``2.00 EUR/h``; ``unknown`` when the price is not known (never shown as free)."""
    if amount is None:
        return "unknown price"
    return "%.2f%s%s" % (amount, " " + currency if currency else "", "/h" if per_hour else "")


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
    lines = [head]
    for pool in view.get("pools") or []:
        if pool.get("gpu") and not pool.get("replicas"):
            lines.append(
                "pool %s at 0 machines: nothing billed; %s a machine of %d x %s%s when scaled up"
                % (
                    pool["name"],
                    money(pool.get("per_machine_hourly"), currency),
                    pool["gpu"]["count"],
                    pool["gpu"]["type"],
                    " (profile %s)" % pool["gpu"]["profile"] if pool["gpu"].get("profile") else "",
                )
            )
    return lines


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
    if view["release"]:
        head += ": -%s, %s after" % (
            money(price.get("hourly_removed"), currency),
            money(price.get("hourly_after"), currency),
        )
    return [head]


def left_billed(machine: str, count: int, per_vgpu_hour: float | None, currency: str | None, location: str) -> str:
    """The warning of a machine deleted by force with its vGPUs: they stay reserved, and what they cost."""
    return (
        "machine %s was deleted by force with %s attached: still reserved and billed (%s) until the orphan check "
        "releases %s (ansible-playbook whitesky.capvco.gpu_orphans -e location=%s -e reclaim=true) or the cluster "
        "is deleted"
        % (
            machine,
            _count(count, "vGPU"),
            money(None if per_vgpu_hour is None else per_vgpu_hour * count, currency),
            "it" if count == 1 else "them",
            location,
        )
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
