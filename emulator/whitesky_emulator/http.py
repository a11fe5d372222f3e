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
import importlib.util
import os

from starlette.responses import JSONResponse

from .params import Invalid, validate

#: This checkout's root (the emulator is a development package of the repository, installed editable).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The collection's table of the platform's operations, as a file of this checkout.
API_FILE = os.path.join(ROOT, "plugins", "module_utils", "platform", "api.py")


def load_api():
    """The project's one table of operations (``module_utils/platform/api.py``: operationId -> method, path, ...).

    Imported from the collection when it is on the path (``make link``); else the copy a built emulator carries
    (``pip install ./emulator``: emulator/setup.py packs it as ``_api``); else (an editable install without the
    link) read from this checkout's file, which imports nothing of the collection.
    """
    try:
        from ansible_collections.whitesky.capvco.plugins.module_utils.platform import api

        return api
    except ImportError:
        pass
    try:
        from . import _api  # only in a built emulator

        return _api
    except ImportError:
        pass
    spec = importlib.util.spec_from_file_location("whitesky_emulator._capvco_api", API_FILE)
    if spec is None or spec.loader is None:
        raise ImportError("the table of the API's operations is missing: %s" % API_FILE)
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    return table


API = load_api()
#: operationId -> (method, path template, query names, body names) of every operation the project knows
OPERATIONS = API.OPERATIONS
#: a request's rate-limit class (read or mutating), by the collection's one rule
request_class = API.request_class


class HTTPError(Exception):
    def __init__(self, status, message, headers=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def found(row, message):
    """The row, or a 404 with the message."""
    if not row:
        raise HTTPError(404, message)
    return row


class Ctx:
    """One request, as a handler sees it: typed path and query arguments, the validated body."""

    def __init__(self, emu, request, path, args, body):
        self.emu = emu
        self.store = emu.store
        self.request = request
        self.path = path
        self.args = args
        self.body = body

    def arg(self, name, default=None):
        return self.args.get(name, default)

    def customer(self):
        return self.emu.customer(self.path["customer_id"])

    def target_vm(self):
        """(customer, cloudspace row, VM row) of a VM-scoped path; 404 for what does not exist."""
        cid = self.customer()
        cs = self.emu.cloudspace(cid, self.path["cloudspace_id"])
        return cid, cs, self.emu.vm(cs["cloudspace_id"], self.path["vm_id"])


def op(operation_id, mutating=False):
    """Mark a handler as one operation of the spec (``routes.operations()`` lists the marked handlers); its method
    and path are the operation's in the one table (``OPERATIONS``, the collection's ``api.py``)."""
    if operation_id not in OPERATIONS:
        raise KeyError(
            "%s is not in plugins/module_utils/platform/api.py's OPERATIONS: declare it there" % operation_id
        )
    method, path = OPERATIONS[operation_id][:2]

    def wrap(func):
        func.operation = (method, path, operation_id, mutating)
        return func

    return wrap


def bearer(request):
    """The bearer token a request carries ("" if none)."""
    header = request.headers.get("authorization", "")
    return header[7:] if header.startswith("Bearer ") else ""


def rate_limit(emu, request, cls):
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


def make_endpoint(emu, operation_id, mutating, func):
    cls = request_class(OPERATIONS[operation_id][0])

    async def endpoint(request):
        emu.stats.requests += 1
        emu.stats.in_flight += 1
        emu.stats.max_in_flight = max(emu.stats.max_in_flight, emu.stats.in_flight)
        try:
            return await answer(request)
        finally:
            emu.stats.in_flight -= 1

    async def answer(request):
        stats = emu.stats.ops[operation_id]
        stats["count"] += 1
        stats["query"].update(request.query_params.keys())
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
                stats["body"].update(body.keys())
            await emu.inject(operation_id)
            result = await func(Ctx(emu, request, path, args, body))
        except HTTPError as exc:
            stats["statuses"][exc.status] += 1
            return JSONResponse({"message": exc.message}, status_code=exc.status, headers=exc.headers)
        stats["statuses"][200] += 1
        if emu.drop_now(operation_id, mutating):
            return emu.dropped_response()
        return JSONResponse(result)

    return endpoint
