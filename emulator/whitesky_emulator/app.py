"""The whitesky.cloud emulator: the Starlette app, assembled from the resource families and the admin API.

It serves the subset of the platform's API that the collection uses, at the
same paths, with parameters in the same places (query vs. body), the same
envelopes and the same status codes; ``params`` validates every request
against its operation.  Under ``/_emulator`` (outside ``/api/1``) it has what
tests need.  The parts:

- ``routes/``: the operations, one module per resource family;
- ``http``: errors, the operation registry, the endpoint that validates;
- ``params``: what each operation accepts;
- ``state``: the emulator's state and its views; ``faults``: faults, statistics, VM locks;
- ``ratelimit``: the per-credential token buckets (off unless configured);
- ``store/``: the persisted state, one store per resource, returning typed rows; ``metering``: the billing
  maths; ``addressing``: the choice of a NIC's address and MAC; ``admin``: the admin API.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .admin import admin_routes
from .http import Endpoint, make_endpoint
from .routes import operations
from .state import Emulator

__all__ = ["API", "OPS", "Emulator", "build_app"]

API = "/api/1"


def method_router(handlers: Mapping[str, Endpoint]) -> Endpoint:
    """One route's endpoint for several methods: a method it does not serve gets 405 with every allowed one."""
    allowed = ", ".join(sorted(handlers))

    async def endpoint(request: Request) -> Response:
        handler = handlers.get(request.method)
        if handler is None:
            return JSONResponse(
                {"message": "method %s is not allowed here; allowed: %s" % (request.method, allowed)},
                status_code=405,
                headers={"Allow": allowed},
            )
        return await handler(request)

    return endpoint


async def not_found(request: Request, exc: Exception) -> Response:
    """A path that names no operation: the platform's JSON error, not a plain-text page."""
    return JSONResponse({"message": "no such resource: %s" % request.url.path[:200]}, status_code=404)


class RefuseEncodedSlash:
    """A path parameter may not hide a '/' (as %2F): it would name another resource. 400, never a reroute."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and b"%2f" in scope.get("raw_path", b"").lower():
            response = JSONResponse({"message": "invalid request: a path parameter contains an encoded '/'"}, 400)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


#: (method, path, operationId, mutating, handler) of every operation the emulator serves
OPS = operations()


def build_app(emu: Emulator) -> RefuseEncodedSlash:
    emu.stats.limiter = emu.faults.limiter  # the statistics show the rate limit's buckets ("tokens")
    by_path: defaultdict[str, dict[str, Endpoint]] = defaultdict(dict)
    for method, path, operation_id, mutating, func in OPS:
        by_path[path][method] = make_endpoint(emu, operation_id, mutating, func)
    api = [
        Route(path, method_router(handlers), methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
        for path, handlers in by_path.items()
    ]
    app = Starlette(
        routes=[Mount(API, routes=api), Mount("/_emulator", routes=admin_routes(emu))],
        exception_handlers={404: not_found},
    )
    app.state.emulator = emu
    return RefuseEncodedSlash(app)
