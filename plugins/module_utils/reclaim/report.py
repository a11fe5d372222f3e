# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a location's reservations say: the report of ``vgpu_info`` (plain Python, no Ansible), streamed page by
page, decoded, with the orphan rule's verdict (``orphans``) and their cost (``gpu.billing``), and its lines for a
person (:func:`report_lines`, scrubbed)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.billing import (
    Billed,
    Figures,
    Streamed,
    add,
    costs,
    currency_of,
    detached_cost,
    fetch,
    oldest,
    price_per_hour,
    shown,
    times,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import Beside
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import LIMIT, scrub
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.orphans import OrphanCheck, machines_in_location
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import (
    attached_to,
    deleted,
    listing,
    view,
)

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import Reservation


def info(
    client: WhiteskyClient,
    *,
    location: str,
    cluster: str | None = None,
    machine: str | None = None,
    orphans_only: bool = False,
    with_cost: bool = False,
    max_rows: int | None = None,
) -> dict[str, Any]:
    """Core of ``vgpu_info``: reservations, decoded, optionally only orphans, optionally with cost.

    The listing is streamed page by page: each reservation is decoded, counted into the summary and kept only as
    a small record for the costs; rows are returned for all of them, or for the first ``max_rows``.
    """
    if machine and not cluster:
        raise InputError("machine needs cluster: names encode the machine per cluster")
    if max_rows is not None and max_rows < 0:
        raise InputError("max_rows must be 0 or more, got %r" % max_rows)
    now = time.time()
    with Beside(2) as beside:  # what does not depend on the listing is read while it streams
        vms = beside.start(machines_in_location, client, location) if (orphans_only or cluster) else None
        stream: Iterator[Reservation] = listing(client, location)
        first = next(stream, None)
        early: tuple[float, Future[Figures]] | None = None
        streamed: Streamed | None = None
        if with_cost and first is not None:  # the listing is oldest first: the report can start there
            owner = first["owner"]
            start = oldest([Billed(first["vgpu_id"], None, None, owner.created if owner else None)], now)
            early = (start, beside.start(fetch, client, location, start, now))
            streamed = Streamed(*early)
        head = [first] if first is not None else []
        summary, rows, billed = scan(
            itertools.chain(head, stream),
            vms,
            cluster=cluster,
            machine=machine,
            max_rows=max_rows,
            orphans_only=orphans_only,
            keep=streamed.keep if streamed is not None else None,
        )
    result: dict[str, Any] = {"reservations": rows, "summary": summary, "truncated": summary["count"] - len(rows)}
    if with_cost:
        fetched = (early[0], early[1].result()) if early else None
        figures, currency, per_hour = costs(client, location, billed, now, fetched)
        if streamed is not None and streamed.count and fetched is not None:  # what streamed: priced by that report
            currency, per_hour = currency_of(fetched[1].price), price_per_hour(fetched[1].price)
            for name, cost in streamed.by_cluster.items():
                summary["by_cluster"][name]["cost"] = cost
        for row in rows:
            row["vgpu_seconds"], row["cost"] = figures.get(row["vgpu_id"]) or (
                detached_cost(fetched[1], row["vgpu_id"]) if fetched is not None and not row["vm_id"] else (0.0, 0.0)
            )
        for record in billed:
            if record.cluster is not None:
                per = summary["by_cluster"][record.cluster]
                per["cost"] = add(per.get("cost", 0.0), figures.get(record.vgpu_id, (0.0, 0.0))[1])
        result["currency"] = currency
        result["cost_per_hour"] = times(summary["count"], per_hour)
        total: float | None = streamed.total if streamed is not None else 0.0
        for _s, cost in figures.values():
            total = add(total, cost)
        result["total_cost"] = total
    result["report"] = report_lines(rows, result)
    return result


def scan(
    listing: Iterable[Reservation],
    vms: Future[set[str]] | None,
    *,
    cluster: str | None = None,
    machine: str | None = None,
    max_rows: int | None = None,
    orphans_only: bool = False,
    keep: Callable[[Billed], bool] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[Billed]]:
    """Stream the listing (decoded: :func:`~world.reservations.listing`) into ``(summary, rows, billed)``; ``vms`` is
    the future of the location's VM names."""
    orphan = OrphanCheck(vms.result()) if vms is not None else None
    now = time.time()
    summary: dict[str, Any] = {
        "count": 0,
        "owned": 0,
        "orphans": 0,
        "attached": 0,
        "in_recycle_bin": 0,
        "by_cluster": {},
    }
    rows: list[dict[str, Any]] = []
    billed: list[Billed] = []
    clusters: dict[str, str] = {}  # one string per cluster, however many reservations name it
    for item in listing:
        owner = item["owner"]
        if cluster and (owner is None or not naming.owned_by(owner, cluster, machine)):
            continue
        is_orphan_now = bool(owner is not None and orphan is not None and orphan(owner))
        if orphans_only and not is_orphan_now:
            continue
        summary["count"] += 1
        summary["attached"] += attached_to(item) is not None
        summary["in_recycle_bin"] += deleted(item)
        if owner is not None:
            summary["owned"] += 1
            summary["orphans"] += is_orphan_now
            per = summary["by_cluster"].setdefault(owner.cluster, {"count": 0})
            per["count"] += 1
        cluster_name = clusters.setdefault(owner.cluster, owner.cluster) if owner is not None else None
        record = Billed(item["vgpu_id"], attached_to(item), cluster_name, owner.created if owner else None)
        if keep is None or keep(record):  # else its cost was added up as it streamed
            billed.append(record)
        if max_rows is None or len(rows) < max_rows:
            row = view(item)
            if owner is not None:
                row["age"] = int(now - owner.created)
                if orphan is not None:
                    row["orphan"] = is_orphan_now
            rows.append(row)
    return summary, rows, billed


REPORT_ROW = "%-36s %-12s %-18s %4s %9s %-16s %12s"


def report_lines(rows: Sequence[dict[str, Any]], totals: dict[str, Any]) -> list[str]:
    """A plain-text table of reservations (for the orphan check and the summaries), each line scrubbed (a VM's name
    or the currency is the platform's)."""
    lines = [REPORT_ROW % ("vgpu_name", "cluster", "machine", "slot", "age(s)", "attached VM", "cost so far")]
    for r in rows:
        lines.append(
            REPORT_ROW
            % (
                r["vgpu_name"],
                r.get("cluster", "-"),
                r.get("machine", "-"),
                r.get("slot", "-"),
                r.get("age", "-"),
                r.get("vm_name") or "-",
                shown(r["cost"], None) if "cost" in r else "-",
            )
        )
    if totals.get("truncated"):
        lines.append("... and %d more" % totals["truncated"])
    summary = "%d reservation(s)" % (len(rows) + totals.get("truncated", 0))
    if "cost_per_hour" in totals and (totals.get("currency") or totals["cost_per_hour"] is None):
        summary += ", costing %s per hour, %s so far" % (
            shown(totals["cost_per_hour"], totals.get("currency")),
            shown(totals["total_cost"], totals.get("currency")),
        )
    # a line is never cut short of its own length (an escape lengthens a character to at most 6)
    return [scrub(line, max(LIMIT, 6 * len(line))) for line in lines + [summary]]
