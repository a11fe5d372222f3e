"""What tests switch on per run: faults, the request statistics, the VM locks (none of it is persisted)."""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .http import HTTPError
from .ratelimit import CLASSES, Levels, Limits, RateLimiter, normalize


class DropResponse(Response):
    """Commit happened; the response is lost: send a partial body and cut the connection."""

    def __init__(self) -> None:
        super().__init__(b"", status_code=200)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"64")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"vgpu', "more_body": True})
        raise ConnectionAbortedError("emulator: response dropped after commit (fault injection)")


class Faults:
    """Per-test fault injection, set through ``POST /_emulator/faults``.

    The fields are what a POST gave (JSON, unchecked but for ``rate_limit``): their types are what tests send.
    """

    FIELDS: ClassVar[dict[str, Any]] = {
        "latency_ms": 0.0,  # added to every API request
        "error_rates": {},  # {"503": 0.2, "429": 0.1}: answered before processing
        "retry_after": 1,  # seconds, in the Retry-After header of a 429
        "operations": None,  # limit error_rates / drop_rate to these operationIds
        "drop_after_commit": {},  # {"operationId": N}: the next N responses are lost after commit
        "drop_rate": 0.0,  # fraction of mutating responses lost after commit
        "fail_next": {},  # {"operationId": [status, N]}: the next N calls fail before processing
        "vm_op_seconds": 0.0,  # how long one VM mutation holds the VM's lock
        "page_cap": 0,  # the most items a paginated list returns, whatever limit asks (0: no cap)
        "no_count": False,  # paginated lists leave pagination.count out
        "rate_limit": None,  # per-credential token buckets (ratelimit.py): "default" or {"mutating"|"read": ...}
        "seed": None,
    }

    latency_ms: float
    error_rates: dict[str, float]
    retry_after: int
    operations: list[str] | None
    drop_after_commit: dict[str, int]
    drop_rate: float
    fail_next: dict[str, list[int]]
    vm_op_seconds: float
    page_cap: int
    no_count: bool
    rate_limit: Limits | None
    seed: int | str | None
    rng: random.Random

    def __init__(self) -> None:
        self.defaults: dict[str, Any] = dict(self.FIELDS)
        self.rate_limit = None
        self.limiter = RateLimiter()
        self.set({})

    def set_defaults(self, **values: Any) -> None:
        """What the command line set (``--rate-limit``): a field's value when a POST leaves it out, and on DELETE."""
        unknown = set(values) - set(self.FIELDS)
        if unknown:
            raise ValueError("unknown fault field(s): %s" % sorted(unknown))
        if "rate_limit" in values:
            values["rate_limit"] = normalize(values["rate_limit"])
        self.defaults.update(values)
        self.set({})

    def set(self, cfg: Mapping[str, Any]) -> None:
        """Replace the whole configuration: a field ``cfg`` leaves out gets its default. Nothing changes on a 400."""
        unknown = set(cfg) - set(self.FIELDS)
        if unknown:
            raise HTTPError(400, "unknown fault field(s): %s; valid: %s" % (sorted(unknown), sorted(self.FIELDS)))
        try:
            rate_limit = normalize(cfg["rate_limit"]) if "rate_limit" in cfg else self.defaults["rate_limit"]
        except ValueError as exc:
            raise HTTPError(400, str(exc)) from None
        refill = "rate_limit" in cfg or rate_limit != self.rate_limit
        for key, default in self.defaults.items():
            value = rate_limit if key == "rate_limit" else cfg.get(key, default)
            setattr(self, key, json.loads(json.dumps(value)))
        self.rng = random.Random(self.seed)
        if refill:  # naming rate_limit, or changing it, (re)fills every bucket
            self.limiter.configure(self.rate_limit)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.FIELDS}

    def applies(self, op: str) -> bool:
        return self.operations is None or op in self.operations


@dataclass
class OpStats:
    """One operation's requests since the last reset: how many, their statuses, the query and body keys seen."""

    count: int = 0
    statuses: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    query: set[str] = field(default_factory=set)
    body: set[str] = field(default_factory=set)

    def as_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "statuses": dict(self.statuses),
            "query": sorted(self.query),
            "body": sorted(self.body),
        }


class Stats:
    def __init__(self) -> None:
        self.limiter: RateLimiter | None = None  # the faults' RateLimiter, for "tokens" (app.build_app wires it)
        self.reset()

    def reset(self) -> None:
        self.ops: defaultdict[str, OpStats] = defaultdict(OpStats)
        self.faults: defaultdict[str, int] = defaultdict(int)
        self.vm_lock_conflicts = 0
        self.requests = 0  # API requests received
        self.in_flight = 0  # API requests received and not yet answered
        self.max_in_flight = 0  # the most at once since the last reset: how concurrent a client was
        # seconds spent answering API requests (from the request's arrival at its handler to its answer, hooks and
        # injected faults included, requests at once counted each): the platform's own time, as a benchmark takes
        # it out of a client's
        self.seconds = 0.0
        self.rate_limited = dict.fromkeys(CLASSES, 0)  # 429s answered by the rate limit, per class

    def tokens(self) -> Levels | None:
        return self.limiter.levels() if self.limiter is not None else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "operations": {op: s.as_dict() for op, s in self.ops.items()},
            "faults": dict(self.faults),
            "vm_lock_conflicts": self.vm_lock_conflicts,
            "requests": self.requests,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "seconds": self.seconds,
            "rate_limited": dict(self.rate_limited),
            # the buckets of the (first) credential now; null while the rate limit is off
            "tokens": self.tokens(),
        }


class VmLock:
    """The lock of one VM for one operation: ``async with``; a 409 when another operation holds it."""

    def __init__(self, locks: VmLocks, vm_id: int) -> None:
        self.locks = locks
        self.vm_id = vm_id

    async def __aenter__(self) -> None:
        locks, vm_id = self.locks, self.vm_id
        if vm_id in locks.held:
            locks.stats.vm_lock_conflicts += 1
            raise HTTPError(409, "virtual machine %s is locked by another operation" % vm_id)
        locks.held.add(vm_id)
        if locks.faults.vm_op_seconds:
            try:
                await asyncio.sleep(locks.faults.vm_op_seconds)
            except BaseException:
                locks.held.discard(vm_id)
                raise

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.locks.held.discard(self.vm_id)


class VmLocks:
    """One mutating operation per VM at a time; a second one is refused with 409 while the VM is locked."""

    def __init__(self, stats: Stats, faults: Faults) -> None:
        self.held: set[int] = set()
        self.stats = stats
        self.faults = faults

    def __contains__(self, vm_id: object) -> bool:
        return vm_id in self.held

    def __call__(self, vm_id: int) -> VmLock:
        return VmLock(self, vm_id)
