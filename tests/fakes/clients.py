"""A platform client with no network and a clock that moves only when it sleeps (for the unit tests)."""

from __future__ import annotations

import httpx

from ansible_collections.whitesky.capvco.plugins.module_utils.platform import client as core


class FakeClock:
    """The client's ``clock`` and ``sleep``: time moves only when the client sleeps (or a test moves it)."""

    def __init__(self):
        self.now = 0.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += max(0.0, seconds)


def mock_client(handler=None, token="t", **kw):
    """A client on a fake clock; ``handler(request) -> httpx.Response`` answers its requests (none: it has its own
    HTTP client, never used by a test that gives no handler).  ``kw``: more of the client's parameters."""
    clock = FakeClock()
    kw = dict({"timeout": 10, "retry_budget": 30, "backoff": 0.1, "max_backoff": 0.1}, **kw)
    c = core.WhiteskyClient("http://127.0.0.1:9", token, "cust", sleep=clock.sleep, clock=clock, **kw)
    if handler is not None:
        c.transport._http.close()
        c.transport._http = httpx.Client(transport=httpx.MockTransport(handler))
    return c, clock
