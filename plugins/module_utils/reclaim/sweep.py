# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a location's reservations say: the report of ``vgpu_info``, and the sweeps of ``vgpu_reclaim`` (plain Python,
no Ansible).

A sweep releases only what decodes as this cluster's (``scope=cluster``), or
what is owned but whose machine no longer exists, after a grace period
(``scope=orphans``).  A name that does not decode is never touched.

A reviewed reclaim (``reclaim_plan``) is the same sweep in two steps: :func:`write_plan` writes what it would
release to a file, and :func:`apply_plan` releases exactly that file's reservations that still match, through the
same :func:`release`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from functools import partial
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
from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.ops import Ops
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, PartialFailure
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import Beside, run_parallel
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.scrub import LIMIT, scrub
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import planfile
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim.orphans import (
    OrphanCheck,
    machines_in_location,
    select,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.world.changes import names_diff
from ansible_collections.whitesky.capvco.plugins.module_utils.world.reservations import (
    Inventory,
    attached_to,
    deleted,
    listing,
    owner_of,
    view,
)
from ansible_collections.whitesky.capvco.plugins.module_utils.world.vms import check_owned

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient
    from ansible_collections.whitesky.capvco.plugins.module_utils.world.records import VM, Reservation


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


def reclaim(
    client: WhiteskyClient,
    *,
    location: str,
    scope: str | None = None,
    cluster: str | None = None,
    grace_period: float = 900,
    permanently: bool = True,
    parallel: int = 32,
    only: Collection[str] | None = None,
    plan: str | None = None,
    plan_file: str | None = None,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Core of ``vgpu_reclaim``: release what a cluster owns, or what escaped (orphans).  The reads, then
    :func:`select` (pure), then check mode returns the selection, or :func:`release` carries it out.

    ``only`` (the ids a caller planned to release, a teardown's) narrows the candidates: a reservation made since
    that plan is never released by it.  The reservations are listed before the VMs: a reservation needs its VM to
    exist, so one that a concurrent run makes is never taken for an orphan.

    ``plan_file`` (check mode only) writes what would be released to that file for review (:func:`write_plan`);
    ``plan`` releases exactly such a plan's reservations that still match (:func:`apply_plan`)."""
    if plan is not None:
        if plan_file is not None:
            raise InputError("plan (apply a reviewed plan) and plan_file (write one) are exclusive")
        return apply_plan(
            client, location=location, path=plan, scope=scope, cluster=cluster, parallel=parallel, check_mode=check_mode
        )
    if scope is None:
        raise InputError("scope is required (cluster or orphans), unless plan is given")
    if scope == "cluster" and not cluster:
        raise InputError("scope=cluster needs cluster (the cluster whose reservations to release)")
    if grace_period < 0:
        raise InputError("grace_period must be 0 or more seconds, got %r" % grace_period)
    if cluster:
        naming.cluster_part(cluster)
    if plan_file is not None:
        planfile.check_new(plan_file, check_mode)
    inventory = Inventory(client, location)
    candidates = inventory.owned(cluster)
    if only is not None:
        candidates = [i for i in candidates if i["vgpu_id"] in only]
    orphan = OrphanCheck(machines_in_location(client, location) if scope == "orphans" else set())
    chosen, kept = select(candidates, scope, orphan, grace_period, permanently, time.time())
    if cluster:  # a reservation of the cluster's on a VM that is not the cluster's is refused, as vgpu refuses it
        _refuse_foreign_vms(client, chosen, cluster, parallel)
    price = client.prices(location) if chosen else {}
    per_hour = price_per_hour(price)
    result: dict[str, Any] = {
        "changed": bool(chosen),
        "released": [view(i) for i in chosen],
        "kept": kept,
        "ignored": len(inventory.items) - len(candidates),
        "saved_per_hour": times(sum(1 for i in chosen if not deleted(i) or permanently), per_hour),
        "currency": currency_of(price),
        "diff": names_diff(
            "vgpu",
            sorted(i["vgpu_name"] for i in candidates),
            sorted(i["vgpu_name"] for i in candidates if i not in chosen),
        ),
    }
    if plan_file is not None:
        planned = planfile.scope_of(scope, location, cluster, grace_period if scope == "orphans" else 0, permanently)
        result.update(write_plan(client, plan_file, planned, chosen, "whitesky.capvco.vgpu_reclaim", kept))
    elif not check_mode and chosen:
        release(client, location, chosen, permanently, parallel)
    return result


def _refuse_foreign_vms(client: WhiteskyClient, chosen: Iterable[Reservation], cluster: str, parallel: int) -> None:
    """Refuse, before anything is released, a reservation of ``cluster``'s attached to a VM that is not its own."""
    for cs, vms in sorted(_attached_vms(chosen).items()):
        check_owned(client, cs, list(vms.values()), cluster, parallel)


def write_plan(
    client: WhiteskyClient,
    path: str,
    scope: planfile.PlanScope,
    items: Sequence[Reservation],
    made_by: str,
    kept: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Write the plan of releasing ``items`` (owned reservations) under ``scope`` to the file ``path``, each with
    its cost (one read of the consumption report and the prices), and, for a plan of orphans, those of ``kept``
    left out for the grace period; ``{plan_file, reclaim_plan}`` for the result."""
    now = time.time()
    billed = [Billed(i["vgpu_id"], attached_to(i), None, owner_of(i).created) for i in items]
    figures, currency, per_hour = costs(client, scope["location"], billed, now)
    entries = [planfile.entry(i, figures.get(i["vgpu_id"]), per_hour, currency) for i in items]
    plan = planfile.build(scope, entries, made_by, now, kept)
    written = planfile.write(path, plan)
    return {"plan_file": written, "reclaim_plan": _plan_view(written, plan)}


def _plan_view(path: str, plan: planfile.Plan) -> dict[str, Any]:
    """What a result says of a plan file: where, its digest, when and under what it was made, its totals, and (a
    plan of orphans as written) the orphans it left out for the grace period."""
    out = {
        "path": path,
        "digest": plan["digest"],
        "created": plan["created"],
        "made_by": plan["made_by"],
        "scope": dict(plan["scope"]),
        "summary": dict(plan["summary"]),
    }
    if "left_out" in plan:
        out["left_out"] = dict(plan["left_out"])
    return out


def apply_plan(
    client: WhiteskyClient,
    *,
    location: str,
    path: str,
    scope: str | None = None,
    cluster: str | None = None,
    parallel: int = 32,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Release exactly the reservations of the reviewed plan in file ``path`` that still match
    (``planfile.match``), through :func:`release`; report those skipped and why.

    The plan is read and checked whole first (its digest, its location, ``scope`` and ``cluster`` when given):
    refused before anything is read from the platform.  Then the same reads as :func:`reclaim` (the listing before
    the VMs), and the same refusal of a reservation of the plan's cluster attached to a VM the cluster does not
    own.  A reservation that is not in the plan is never released.  Applied twice, the second run releases
    nothing (every entry is skipped as gone)."""
    plan = planfile.read(path, location)
    planned = plan["scope"]
    if scope is not None and scope != planned["kind"]:
        raise InputError(
            "reclaim plan %s is a plan of scope %s, not %s; nothing was released"
            % (planfile.resolve(path), planned["kind"], scope)
        )
    if cluster and cluster != planned["cluster"]:
        raise InputError(
            "reclaim plan %s is a plan of %s, not of cluster %r; nothing was released"
            % (
                planfile.resolve(path),
                "cluster %r" % planned["cluster"] if planned["cluster"] else "every cluster's orphans",
                cluster,
            )
        )
    inventory = Inventory(client, location)
    orphan = OrphanCheck(machines_in_location(client, location) if planned["kind"] == "orphans" else set())
    chosen, skipped = planfile.match(plan, inventory.items, orphan)
    planned_ids = {e["vgpu_id"] for e in plan["entries"]}
    if planned["cluster"]:
        _refuse_foreign_vms(client, chosen, planned["cluster"], parallel)
    price = client.prices(location) if chosen else {}
    still = sorted(i["vgpu_name"] for i in chosen) + sorted(
        s["vgpu_name"] for s in skipped if s["reason"] != planfile.GONE
    )
    result: dict[str, Any] = {
        "changed": bool(chosen),
        "released": [view(i) for i in chosen],
        "not_released": skipped,
        "kept": [],
        "ignored": sum(1 for i in inventory.items if i["vgpu_id"] not in planned_ids),
        "saved_per_hour": times(
            sum(1 for i in chosen if not deleted(i) or planned["permanently"]), price_per_hour(price)
        ),
        "currency": currency_of(price),
        "reclaim_plan": _plan_view(planfile.resolve(path), plan),
        "diff": names_diff(
            "vgpu", sorted(still), sorted(s["vgpu_name"] for s in skipped if s["reason"] != planfile.GONE)
        ),
    }
    live = _live_machines(chosen) if planned["kind"] == "cluster" else []
    if live:
        result["warnings"] = [
            "reclaim plan %s is a teardown of cluster %r, and %d of its reservations are attached to machines that "
            "exist (%s): %s"
            % (
                planfile.resolve(path),
                planned["cluster"],
                sum(1 for i in chosen if attached_to(i) is not None),
                ", ".join(live[:10]) + (" and %d more" % (len(live) - 10) if len(live) > 10 else ""),
                "applying it would take their vGPUs from them (check mode: nothing was released)"
                if check_mode
                else "their vGPUs were taken from them",
            )
        ]
    if not check_mode and chosen:
        try:
            release(client, location, chosen, planned["permanently"], parallel)
        except PartialFailure as exc:
            exc.details["not_released"] = skipped
            raise
    return result


def _live_machines(chosen: Iterable[Reservation]) -> list[str]:
    """The names of the VMs the reservations are attached to (VMs that exist: the listing names them)."""
    names = set()
    for item in chosen:
        vm = item.get("virtual_machine")
        if vm:
            names.add(str(vm.get("name")))
    return sorted(names)


def release_cluster(
    client: WhiteskyClient,
    *,
    location: str,
    cluster: str,
    parallel: int = 32,
    only: Collection[str] | None = None,
    check_mode: bool = False,
) -> dict[str, Any]:
    """A teardown's last step: every reservation ``cluster`` owns released (or, with ``only``, those planned); one
    that is kept (in the recycle bin already, with ``permanently``) fails the call, naming it."""
    swept = reclaim(
        client,
        location=location,
        scope="cluster",
        cluster=cluster,
        grace_period=0,
        parallel=parallel,
        only=only,
        check_mode=check_mode,
    )
    if swept["kept"]:
        raise PartialFailure(
            "%d reservation(s) of cluster %r were not released: %s"
            % (len(swept["kept"]), cluster, ", ".join(k["vgpu_name"] for k in swept["kept"])),
            {"released": swept["released"], "kept": swept["kept"]},
        )
    return swept


def _attached_vms(items: Iterable[Reservation]) -> dict[str, dict[int, VM]]:
    """``{cloudspace id: {vm id: {vm_id, name}}}`` of the VMs the reservations are attached to."""
    on_vms: dict[str, dict[int, VM]] = {}
    for item in items:
        vm = item.get("virtual_machine")
        if vm and attached_to(item) is not None and vm.get("cloudspace_id"):
            on_vms.setdefault(vm["cloudspace_id"], {})[vm["id"]] = {"vm_id": vm["id"], "name": vm["name"]}
    return on_vms


def release(
    client: WhiteskyClient, location: str, items: Sequence[Reservation], permanently: bool, parallel: int
) -> None:
    """Release the reservations: one VM's in turn (its lock), different VMs at once."""
    ops = Ops(client, location, permanently=permanently)
    groups: dict[int | str, list[Reservation]] = {}
    for item in items:
        groups.setdefault(attached_to(item) or item["vgpu_id"], []).append(item)
    _done, errors = run_parallel({k: partial(_release_all, ops, g) for k, g in groups.items()}, parallel)
    if errors:
        failed = {i["vgpu_id"] for k in errors for i in groups[k]}
        raise PartialFailure(
            "%d of %d release(s) failed: %s" % (len(failed), len(items), "; ".join(str(e) for e in errors.values())),
            {"released": [view(i) for i in items if i["vgpu_id"] not in failed], "not_released": sorted(failed)},
        )


def _release_all(ops: Ops, items: Iterable[Reservation]) -> list[bool]:
    """Release one VM's reservations in turn (its lock)."""
    return [ops.release(i) for i in items]
