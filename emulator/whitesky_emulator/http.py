"""The request plumbing: errors as the platform answers them, the operation registry, and one endpoint per route.

Every API request goes through :func:`make_endpoint`: it counts the request,
checks the bearer token, takes a token of the credential's rate limit (if one
is set; ``ratelimit``), validates the parameters and the body against the
operation (``params``), injects the configured faults, runs the handler with
typed arguments (which checks the customer), and may drop the answer after
the commit.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .api_table import OPERATIONS, request_class
from .params import Invalid, QueryArgs, Scalar, validate

if TYPE_CHECKING:
    from .state import Emulator
    from .store import Cloudspace, Store, Vm

__all__ = ["OPERATIONS", "Ctx", "HTTPError", "Handler", "JsonObject", "Served", "found", "make_endpoint", "op"]

T = TypeVar("T")
#: A JSON object as a handler answers it.
JsonObject = dict[str, Any]
#: An operation's handler: the request, typed, to the JSON object answered.
Handler = Callable[["Ctx"], Awaitable[JsonObject]]
#: An endpoint of the Starlette app.
Endpoint = Callable[[Request], Awaitable[Response]]


class HTTPError(Exception):
    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


def found(row: T | None, message: str) -> T:
    """The row, or a 404 with the message."""
    if not row:
        raise HTTPError(404, message)
    return row


class Ctx:
    """One request, as a handler sees it: typed path and query arguments, the validated body.

    The accessors return what the operation's table (``params``) typed; one that finds another type raises
    TypeError, which only a table that disagrees with its handler can cause.
    """

    def __init__(
        self,
        emu: Emulator,
        request: Request,
        path: Mapping[str, Scalar],
        args: QueryArgs,
        body: JsonObject | None,
    ) -> None:
        self.emu = emu
        self.store: Store = emu.store
        self.request = request
        self.path = path
        self.args = args
        self.body = body

    # -- path parameters ---------------------------------------------------------
    def path_text(self, name: str) -> str:
        return _text(name, self.path[name])

    def path_number(self, name: str) -> int:
        return _number(name, self.path[name])

    # -- query parameters ----------------------------------------------------------
    def flag(self, name: str, default: bool = False) -> bool:
        value = self.args.get(name, default)
        if not isinstance(value, bool):
            raise TypeError("%s: a boolean, got %r" % (name, value))
        return value

    def number(self, name: str, default: int | None = None) -> int:
        """An integer query parameter (``default`` when absent; required when there is none)."""
        return _number(name, self.args.get(name, default))

    def maybe_number(self, name: str) -> int | None:
        value = self.args.get(name)
        return None if value is None else _number(name, value)

    def text(self, name: str, default: str | None = None) -> str:
        """A string query parameter (``default`` when absent; required when there is none)."""
        return _text(name, self.args.get(name, default))

    def maybe_text(self, name: str) -> str | None:
        value = self.args.get(name)
        return None if value is None else _text(name, value)

    def texts(self, name: str) -> list[str] | None:
        """An array query parameter's values (None when absent)."""
        value = self.args.get(name)
        if value is None or isinstance(value, list):
            return value
        raise TypeError("%s: an array, got %r" % (name, value))

    # -- the resources a path names ----------------------------------------------------
    def customer(self) -> str:
        return self.emu.customer(self.path_text("customer_id"), self.request)

    def target_vm(self) -> tuple[str, Cloudspace, Vm]:
        """(customer, cloudspace row, VM row) of a VM-scoped path; 404 for what does not exist."""
        cid = self.customer()
        cs = self.emu.cloudspace(cid, self.path_text("cloudspace_id"))
        return cid, cs, self.emu.vm(cs.cloudspace_id, self.path_number("vm_id"))


def _number(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("%s: an integer, got %r" % (name, value))
    return value


def _text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("%s: a string, got %r" % (name, value))
    return value


@dataclass(frozen=True)
class Served:
    """A handler marked as one operation of the spec (:func:`op`)."""

    method: str
    path: str
    operation_id: str
    mutating: bool
    handler: Handler

    async def __call__(self, ctx: Ctx) -> JsonObject:
        return await self.handler(ctx)


def op(operation_id: str, mutating: bool = False) -> Callable[[Handler], Served]:
    """Mark a handler as one operation of the spec (``routes.operations()`` lists the marked handlers); its method
    and path are the operation's in the one table (``OPERATIONS``, the collection's ``api.py``)."""
    if operation_id not in OPERATIONS:
        raise KeyError(
            "%s is not in plugins/module_utils/platform/api.py's OPERATIONS: declare it there" % operation_id
        )
    method, path = OPERATIONS[operation_id][:2]

    def wrap(func: Handler) -> Served:
        return Served(method, path, operation_id, mutating, func)

    return wrap


def bearer(request: Request) -> str:
    """The bearer token a request carries ("" if none)."""
    header = request.headers.get("authorization", "")
    return header[7:] if header.startswith("Bearer ") else ""


def rate_limit(emu: Emulator, request: Request, cls: str) -> HTTPError | None:
    """Take one token of the credential's ``cls`` bucket, synchronously (atomic under asyncio); a 429 (an HTTPError
    with Retry-After) when the bucket holds less than one. Only ``emu.stats.rate_limited`` changes on a 429."""
    limiter = emu.faults.limiter
    wait = limiter.take(bearer(request), cls)
    if not wait:
        return None
    emu.stats.rate_limited[cls] += 1
    return HTTPError(
        429,
        "rate limit exceeded: %s requests of this credential are limited to %s; retry after %d s"
        % (cls, limiter.describe(cls), wait),
        {"Retry-After": str(wait)},
    )


def make_endpoint(emu: Emulator, operation_id: str, mutating: bool, func: Handler) -> Endpoint:
    cls = request_class(OPERATIONS[operation_id][0])

    async def endpoint(request: Request) -> Response:
        emu.stats.requests += 1
        emu.stats.in_flight += 1
        emu.stats.max_in_flight = max(emu.stats.max_in_flight, emu.stats.in_flight)
        started = time.perf_counter()
        try:
            return await answer(request)
        finally:
            emu.stats.in_flight -= 1
            emu.stats.seconds += time.perf_counter() - started

    async def answer(request: Request) -> Response:
        stats = emu.stats.ops[operation_id]
        stats.count += 1
        stats.query.update(request.query_params.keys())
        try:
            emu.check_auth(request)
            limited = rate_limit(emu, request, cls)  # decided on arrival, before any await
            if limited is not None:
                if emu.faults.latency_ms:  # the injected latency models the network: a 429 has it too
                    await asyncio.sleep(emu.faults.latency_ms / 1000.0)
                raise limited
            raw = await request.body()
            try:
                path, args, body = validate(operation_id, request.path_params, request.query_params, raw)
            except Invalid as exc:
                raise HTTPError(400, "invalid request: %s" % exc) from None
            if isinstance(body, dict):
                stats.body.update(body.keys())
            await emu.inject(operation_id)
            result = await func(Ctx(emu, request, path, args, body))
        except HTTPError as exc:
            stats.statuses[exc.status] += 1
            return JSONResponse({"message": exc.message}, status_code=exc.status, headers=exc.headers)
        stats.statuses[200] += 1
        if emu.drop_now(operation_id, mutating):
            return emu.dropped_response()
        return JSONResponse(result)

    return endpoint
