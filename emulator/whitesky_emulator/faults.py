"""What tests switch on per run: faults, the request statistics, the VM locks (none of it is persisted)."""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict

from starlette.responses import Response

from .http import HTTPError
from .ratelimit import CLASSES, RateLimiter, normalize


class DropResponse(Response):
    """Commit happened; the response is lost: send a partial body and cut the connection."""

    def __init__(self):
        super().__init__(b"", status_code=200)

    async def __call__(self, scope, receive, send):
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
    """Per-test fault injection, set through ``POST /_emulator/faults``."""

    FIELDS = {
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

    def __init__(self):
        self.defaults = dict(self.FIELDS)
        self.rate_limit = None
        self.limiter = RateLimiter()
        self.set({})

    def set_defaults(self, **values):
        """What the command line set (``--rate-limit``): a field's value when a POST leaves it out, and on DELETE."""
        unknown = set(values) - set(self.FIELDS)
        if unknown:
            raise ValueError("unknown fault field(s): %s" % sorted(unknown))
        if "rate_limit" in values:
            values["rate_limit"] = normalize(values["rate_limit"])
        self.defaults.update(values)
        self.set({})

    def set(self, cfg):
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

    def as_dict(self):
        return {k: getattr(self, k) for k in self.FIELDS}

    def applies(self, op):
        return self.operations is None or op in self.operations


class Stats:
    def __init__(self):
        self.limiter = None  # the faults' RateLimiter, for "tokens" (app.build_app wires it)
        self.reset()

    def reset(self):
        self.ops = defaultdict(lambda: {"count": 0, "statuses": defaultdict(int), "query": set(), "body": set()})
        self.faults = defaultdict(int)
        self.vm_lock_conflicts = 0
        self.requests = 0  # API requests received
        self.in_flight = 0  # API requests received and not yet answered
        self.max_in_flight = 0  # the most at once since the last reset: how concurrent a client was
        self.rate_limited = dict.fromkeys(CLASSES, 0)  # 429s answered by the rate limit, per class

    def as_dict(self):
        return {
            "operations": {
                op: {
                    "count": s["count"],
                    "statuses": dict(s["statuses"]),
                    "query": sorted(s["query"]),
                    "body": sorted(s["body"]),
                }
                for op, s in self.ops.items()
            },
            "faults": dict(self.faults),
            "vm_lock_conflicts": self.vm_lock_conflicts,
            "requests": self.requests,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "rate_limited": dict(self.rate_limited),
            # the buckets of the (first) credential now; null while the rate limit is off
            "tokens": self.limiter.levels() if self.limiter is not None else None,
        }


class VmLocks:
    """One mutating operation per VM at a time; a second one is refused with 409 while the VM is locked."""

    def __init__(self, stats, faults):
        self.held = set()
        self.stats = stats
        self.faults = faults

    def __contains__(self, vm_id):
        return vm_id in self.held

    def __call__(self, vm_id):
        locks = self

        class _Lock:
            async def __aenter__(self):
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

            async def __aexit__(self, *exc):
                locks.held.discard(vm_id)

        return _Lock()
