"""Client behaviour that needs no server: JWT expiry, secrets, declared operations, nested deadlines."""

from __future__ import annotations

import base64
import json
import threading
import time

import httpx
import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.gpu.ops import Ops
from ansible_collections.whitesky.capvco.plugins.module_utils.platform import client as core
from ansible_collections.whitesky.capvco.plugins.module_utils.platform import errors, transport
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.deadline import Deadlines
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.retry import Retry

from fakes.clients import mock_client


def jwt(claims):
    def enc(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return "%s.%s.%s" % (enc({"alg": "ES384", "typ": "JWT"}), enc(claims), "c2lnbmF0dXJl")


def test_jwt_expiry_decoded():
    assert transport.jwt_expiry(jwt({"exp": 1234567890, "iss": "itsyouonline"})) == 1234567890


def test_non_jwt_passes_through():
    assert transport.jwt_expiry("plain-api-token") is None
    assert transport.jwt_expiry("a.b.c") is None  # three parts, but not base64 JSON
    c = core.WhiteskyClient("http://127.0.0.1:9", "plain-api-token", "cust")
    assert c.transport.base_url == "http://127.0.0.1:9/api/1"


#: What the client read and set of its transport under names of its own (issue 47: ``_Held``, typed ``Any``).
HELD = [
    "base_url",
    "warnings",
    "governor",
    "redact",
    "timeout",
    "retry_budget",
    "wait_until",
    "deadline",
    "inherited_deadline",
    "request",
    "max_attempts",
    "backoff",
    "max_backoff",
    "retries",
    "rate_limited",
    "rate_waited",
]


def test_the_client_reads_its_transport_where_it_is_and_under_no_other_name():
    """Issue 47: ``client.request`` quietly meant ``client.transport.retry.request``, ``client.backoff`` the retry
    loop's, through a descriptor whose every attribute was ``Any`` to mypy.  The client holds its transport, and its
    parts are read (and set) there, each the object of its own class; no name of the client stands for one of them."""
    c = core.WhiteskyClient("http://127.0.0.1:9", "plain-api-token", "cust", backoff=0.25, timeout=7)
    assert [name for name in HELD if hasattr(c, name) or hasattr(core.WhiteskyClient, name)] == []
    assert isinstance(c.transport, transport.Transport)
    assert isinstance(c.transport.retry, Retry) and isinstance(c.transport.deadlines, Deadlines)
    assert c.transport.retry.backoff == 0.25 and c.transport.deadlines.timeout == 7.0
    c.transport.retry.backoff = 0.5  # set where it is read: the retry loop's own
    assert c.transport.retry.delay(1) <= 0.5


def test_expired_jwt_fails_early_without_the_token():
    token = jwt({"exp": int(time.time()) - 60})
    with pytest.raises(errors.ApiError) as err:
        core.WhiteskyClient("http://127.0.0.1:9/api/1", token, "cust")
    assert "expired" in str(err.value)
    assert token not in str(err.value) and token not in repr(err.value)


def test_valid_jwt_accepted_and_never_in_repr():
    token = jwt({"exp": int(time.time()) + 3600})
    c = core.WhiteskyClient("http://127.0.0.1:9/api/1/", token, "cust")
    assert token not in repr(c) and token not in str(vars(c).get("base_url"))


@pytest.mark.parametrize("field,value", [("api_url", ""), ("token", ""), ("customer_id", "")])
def test_missing_connection_option_names_it(field, value):
    args = {"api_url": "http://x", "token": "t", "customer_id": "c", field: value}
    with pytest.raises(errors.InputError) as err:
        core.WhiteskyClient(**args)
    assert {"api_url": "api_url", "token": "api_token", "customer_id": "customer_id"}[field] in str(err.value)


def test_undeclared_parameter_is_refused_before_sending():
    c = core.WhiteskyClient("http://127.0.0.1:9", "t", "cust")
    with pytest.raises(errors.WhiteskyError, match="takes no parameter"):
        c.call("listAvailableGPUProfiles", query={"bogus": 1}, location="x")


def test_backoff_honours_retry_after_and_grows():
    c = core.WhiteskyClient("http://127.0.0.1:9", "t", "cust", backoff=1.0, max_backoff=8.0)
    assert 2.0 <= c.transport.retry.delay(1, retry_after=2.0) <= 2.1
    assert all(0 <= c.transport.retry.delay(4) <= 8.0 for _ in range(100))
    assert max(c.transport.retry.delay(4) for _ in range(200)) > 1.0  # grows past the first step


# -- nested deadlines: an operation's deadline is inherited by what runs inside it ------------------------------
# (the client's own deadline is timeout + retry_budget = 10 + 30 = 40 s after a call or wait starts)


def fake_client(handler=None, **kw):
    """A client on a fake clock (``fakes.clients.mock_client``), with this file's retry settings."""
    kw = dict({"backoff": 1.0, "max_backoff": 1.0, "max_attempts": 1000}, **kw)
    return mock_client(handler, **kw)


def never():
    return False


def test_a_wait_nested_in_an_operation_gives_up_at_the_operations_deadline():
    c, clock = fake_client()
    with c.transport.deadlines.operation(20):
        clock.now = 15  # the operation's earlier steps took 15 s
        with pytest.raises(errors.WhiteskyError, match="gave up waiting for it after 5s"):
            c.transport.deadlines.wait_until(never, "it", interval=1)
    assert 15 < clock.now <= 20, "at the operation's deadline (20 s), not a fresh one (15 + 40 s)"
    assert c.transport.deadlines.inherited() is None, "the block's deadline ends with it"


def test_a_wait_outside_an_operation_keeps_its_own_deadline():
    c, clock = fake_client()
    with pytest.raises(errors.WhiteskyError, match="after 40s"):
        c.transport.deadlines.wait_until(never, "it", interval=1)
    assert 38 <= clock.now <= 40


def test_an_inner_deadline_never_extends_the_outer_one():
    c, _clock = fake_client()
    with c.transport.deadlines.operation(10) as outer:
        assert outer == 10
        with c.transport.deadlines.operation(100) as inner:
            assert inner == 10 and c.transport.deadlines.inherited() == 10
        with c.transport.deadlines.operation(3) as shorter:
            assert shorter == 3 and c.transport.deadlines.inherited() == 3
        assert c.transport.deadlines.inherited() == 10
    assert c.transport.deadlines.inherited() is None


def test_a_request_in_an_operation_retries_only_until_the_operations_deadline():
    sent = []

    def handler(request):
        sent.append(clock.now)
        return httpx.Response(503, json={"message": "busy"})

    c, clock = fake_client(handler)
    with c.transport.deadlines.operation(5), pytest.raises(errors.ApiError, match="deadline of 5s") as err:
        c.get_vm("cs", 1)
    assert err.value.status == 503
    assert clock.now < 5 and sent and max(sent) < 5, "no retry after the operation's deadline (a fresh one is 40 s)"


def test_a_request_after_its_operations_deadline_is_not_sent():
    c, clock = fake_client(lambda request: pytest.fail("sent after the deadline"))
    with c.transport.deadlines.operation(5):
        clock.now = 6
        with pytest.raises(errors.ApiError, match="not sent"):
            c.get_vm("cs", 1)


def test_what_a_request_nests_inherits_its_deadline():
    """A lost answer's ``resolve`` hook waits for the VM within the request's deadline, not a fresh one."""

    def handler(request):
        if request.method == "POST":
            clock.now += 20  # the attach took 20 s before its answer was lost
            return httpx.Response(503, json={"message": "lost"})
        return httpx.Response(200, json={"vm_id": 1, "locked": True})

    def resolve(_exc):
        c.transport.deadlines.wait_until(lambda: not c.get_vm("cs", 1)["locked"], "VM 1 to be unlocked", interval=1)

    c, clock = fake_client(handler)
    with pytest.raises(errors.WhiteskyError, match="VM 1 to be unlocked after 20s"):
        c.attach_vgpu("cs", 1, "vg", resolve=resolve)
    assert clock.now <= 40, "within the attach's deadline (40 s), not the wait's own (20 + 40 s)"


def test_an_attach_that_waits_for_the_vm_lock_ends_within_one_deadline():
    """Ops.attach: detach elsewhere, attach, its answer lost, wait for the lock: all within one deadline."""
    calls = []

    def handler(request):
        calls.append((request.method, request.url.path, clock.now))
        if request.method == "DELETE":  # the detach from the other VM: slow, but answered
            clock.now += 30
            return httpx.Response(200, json={"success": True})
        if request.method == "POST":  # the attach: its answer lost
            return httpx.Response(503, json={"message": "lost"})
        return httpx.Response(200, json={"vm_id": 7, "locked": True, "vgpus": []})  # the VM stays locked

    c, clock = fake_client(handler)
    item = {"vgpu_id": "vg", "virtual_machine": {"id": 6, "cloudspace_id": "cs"}, "status": "ATTACHED"}
    with pytest.raises(errors.WhiteskyError, match="VM 7 to be unlocked"):
        Ops(c, "loc", "cs").attach(item, 7)
    assert [m for m, _p, _t in calls[:2]] == ["DELETE", "POST"]
    assert clock.now <= 40, "the attach's one deadline (40 s), not 30 s more for the attach, nor a fresh wait"


def test_threads_do_not_share_deadlines():
    c, clock = fake_client()
    inside, done = threading.Event(), threading.Event()
    seen = {}

    def other():
        inside.wait(5)
        seen["inherited"] = c.transport.deadlines.inherited()
        try:
            c.transport.deadlines.wait_until(never, "it", interval=1)
        except errors.WhiteskyError as exc:
            seen["gave_up"], seen["message"] = clock.now, str(exc)
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with c.transport.deadlines.operation(5):
        inside.set()
        done.wait(5)
        seen["mine"] = c.transport.deadlines.inherited()
    thread.join(5)
    assert seen["inherited"] is None and seen["mine"] == 5
    assert "after 40s" in seen["message"] and seen["gave_up"] >= 38, "the other thread's wait keeps its own deadline"


def test_a_listings_pages_keep_the_operations_deadline_in_every_thread():
    seen = []

    def handler(request):
        start = int(request.url.params["start_after"])
        seen.append((threading.get_ident(), c.transport.deadlines.inherited()))
        items = [  # pages of 2, whatever is asked
            {"vgpu_id": str(i), "vgpu_name": "v%d" % i, "gpu_id": "g", "status": "RESERVED", "virtual_machine": None}
            for i in range(start, min(start + 2, 7))
        ]
        return httpx.Response(200, json={"data": items, "pagination": {"count": 7}})

    c, _clock = fake_client(handler)
    with c.transport.deadlines.operation(5):
        got = [v["vgpu_id"] for v in c.vgpus("loc")]
    assert got == [str(i) for i in range(7)]
    assert len({ident for ident, _d in seen}) > 1, "pages were fetched in other threads"
    assert {d for _i, d in seen} == {5}, "every page under the operation's deadline, not a fresh one"


def test_a_failed_call_says_which_setting_to_check():
    """No answer names api_url and WHITESKY_API_URL; 401 and 403 name the credential's option and variable; other
    statuses add nothing (the platform's message says what is wrong)."""
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import ApiError

    assert "api_url, or WHITESKY_API_URL" in str(ApiError("GET", "/x", None, "ConnectError: refused"))
    assert "check api_token, or WHITESKY_API_TOKEN)" in str(ApiError("GET", "/x", 401, "unauthorized"))
    assert "WHITESKY_CUSTOMER_ID" in str(ApiError("GET", "/x", 403, "forbidden"))
    assert str(ApiError("GET", "/x", 404, "location 'x' not found")).endswith("HTTP 404: location 'x' not found")
