"""The emulator's per-credential rate limit: token buckets per class, 429 with Retry-After, configuration, stats.

Raw httpx requests (the project's client retries 429s by itself); the emulator is a real process.
"""

from __future__ import annotations

import time

import httpx
import pytest

from whitesky_emulator.__main__ import parse_args
from whitesky_emulator.ratelimit import DEFAULT_LIMITS, RateLimiter, credential_key

from helpers import CUSTOMER, TOKEN, Emulator, wait_for

LOC = "be-gen-1"
CS = "cs-demo"
#: so slow that no token comes back during a test
FROZEN = {"rate": 0.01, "burst": 2}


class Api:
    """Raw requests to one emulator's /api/1 (no retries)."""

    def __init__(self, emulator, token=TOKEN):
        self.http = httpx.Client(
            base_url=emulator.url + "/customers/" + CUSTOMER, headers={"Authorization": "Bearer " + token}, timeout=30
        )

    def read(self):
        return self.http.get("/locations/%s/gpus" % LOC)

    def create_vm(self, name):
        params = {"name": name, "description": "rate limit test", "vcpus": 1, "memory": 512}
        return self.http.post("/cloudspaces/%s/vms" % CS, params=params)

    def note(self):
        return self.http.post("/cloudspaces/%s/notes" % CS, json={"title": "t", "content": "c"})


@pytest.fixture
def api(emulator):
    client = Api(emulator)
    yield client
    client.http.close()


def vm_names(emulator):
    return sorted(vm["name"] for vm in emulator.snapshot()["vms"])


def assert_limited(resp, cls):
    assert resp.status_code == 429, resp.text
    retry_after = resp.headers["Retry-After"]
    assert retry_after.isdigit() and int(retry_after) >= 1, retry_after
    assert set(resp.json()) == {"message"} and cls in resp.json()["message"]
    return int(retry_after)


def test_off_by_default(emulator, api):
    assert emulator.admin("GET", "/faults")["rate_limit"] is None
    assert all(api.note().status_code == 200 for _ in range(12))
    stats = emulator.stats()
    assert stats["rate_limited"] == {"mutating": 0, "read": 0} and stats["tokens"] is None


def test_burst_then_429_for_mutations_while_reads_pass(emulator, api):
    emulator.faults(rate_limit={"mutating": FROZEN, "read": {"rate": 0.01, "burst": 50}})
    before = vm_names(emulator)
    assert api.create_vm("rl-1").status_code == 200
    assert api.create_vm("rl-2").status_code == 200
    refused = api.create_vm("rl-3")
    # at 0.01 tokens/s the next token is ~100 s away
    assert assert_limited(refused, "mutating") >= 90
    assert api.note().status_code == 429
    # a refused create made nothing
    assert vm_names(emulator) == sorted([*before, "rl-1", "rl-2"])
    # reads have their own bucket
    assert all(api.read().status_code == 200 for _ in range(5))
    stats = emulator.stats()
    assert stats["rate_limited"] == {"mutating": 2, "read": 0}
    ops = stats["operations"]
    assert ops["createVirtualMachine"]["statuses"] == {"200": 2, "429": 1}
    assert ops["createCloudspaceNote"]["statuses"] == {"429": 1}
    assert ops["listAvailableGPUProfiles"]["statuses"] == {"200": 5}
    assert stats["tokens"]["mutating"] < 1 and 44 <= stats["tokens"]["read"] <= 46
    emulator.reset_stats()
    stats = emulator.stats()
    assert stats["rate_limited"] == {"mutating": 0, "read": 0} and stats["operations"] == {}
    # resetting the statistics leaves the buckets as they are
    assert api.note().status_code == 429


def test_a_refused_request_takes_no_token_and_the_bucket_refills(emulator, api):
    emulator.faults(rate_limit={"mutating": {"rate": 2, "burst": 2}})
    # drain it: at 2 tokens/s, requests that answer in well under half a second get a 429 soon
    deadline = time.monotonic() + 10
    while (resp := api.note()).status_code == 200:
        assert time.monotonic() < deadline, "never limited"
    assert assert_limited(resp, "mutating") == 1
    low = emulator.stats()["tokens"]["mutating"]
    assert low < 1
    # the bucket fills again over time (a 429 costs nothing, so polling does not starve it)
    assert wait_for(lambda: emulator.stats()["tokens"]["mutating"] >= 1, timeout=10)
    assert wait_for(lambda: api.note().status_code == 200, timeout=10)
    # never above its burst
    assert wait_for(lambda: emulator.stats()["tokens"]["mutating"] == 2.0, timeout=10)
    # an unlimited class
    assert emulator.stats()["tokens"]["read"] is None and api.read().status_code == 200


def test_latency_delays_the_429_too(emulator, api):
    emulator.faults(rate_limit={"mutating": {"rate": 0.01, "burst": 1}}, latency_ms=300)
    assert api.note().status_code == 200
    started = time.monotonic()
    assert_limited(api.note(), "mutating")
    assert time.monotonic() - started >= 0.3


def test_admin_endpoints_and_bad_tokens_are_never_limited(emulator, api):
    # the emulator accepts one token, so per-credential separation shows in test_buckets_are_per_credential
    emulator.faults(rate_limit={"mutating": {"rate": 0.01, "burst": 1}, "read": {"rate": 0.01, "burst": 1}})
    assert api.note().status_code == 200 and api.read().status_code == 200
    assert api.note().status_code == 429 and api.read().status_code == 429
    for _ in range(3):
        emulator.stats()
        emulator.ledger()
        emulator.snapshot()
        emulator.admin("GET", "/health")
        emulator.admin("GET", "/hooks")
        emulator.admin("POST", "/seed-vgpu", {"location": LOC, "gpu_id": "nvidia-l4-24q", "vgpu_name": "adm"})
    # a bad token is refused before the limit (401, not 429), and takes no token
    bad = Api(emulator, token="not-the-token")
    try:
        assert bad.note().status_code == 401 and bad.read().status_code == 401
    finally:
        bad.http.close()
    assert emulator.stats()["rate_limited"] == {"mutating": 1, "read": 1}


def test_buckets_are_per_credential_and_keep_no_token():
    now = [100.0]
    limiter = RateLimiter({"mutating": {"rate": 1.0, "burst": 2}, "read": None}, clock=lambda: now[0])
    assert [limiter.take("alice-secret", "mutating") for _ in range(3)] == [0, 0, 1]
    assert limiter.take("bob-secret", "mutating") == 0  # bob has his own bucket
    assert limiter.take("alice-secret", "read") == 0  # unlimited class
    now[0] += 0.5
    assert limiter.take("alice-secret", "mutating") == 1  # half a token: a whole second, rounded up
    now[0] += 0.5
    assert limiter.take("alice-secret", "mutating") == 0
    assert set(limiter.buckets) == {credential_key("alice-secret"), credential_key("bob-secret")}
    assert "secret" not in repr(limiter.buckets)
    slow = RateLimiter({"mutating": {"rate": 0.3, "burst": 1}}, clock=lambda: now[0])
    assert slow.take("t", "mutating") == 0 and slow.take("t", "mutating") == 4  # ceil(1 / 0.3)


#: (a bad rate_limit, what the 400's message names)
BAD_RATE_LIMITS = [
    ("fast", "'fast'"),
    (5, "5"),
    ({"write": {"rate": 1, "burst": 1}}, "write"),
    ({"mutating": {"rate": 0, "burst": 5}}, "rate_limit.mutating.rate: 0"),
    ({"mutating": {"rate": -1, "burst": 5}}, "rate_limit.mutating.rate: -1"),
    ({"read": {"rate": "5", "burst": 5}}, "rate_limit.read.rate: '5'"),
    ({"read": {"rate": True, "burst": 5}}, "rate_limit.read.rate: True"),
    ({"mutating": {"rate": 5, "burst": 0}}, "rate_limit.mutating.burst: 0"),
    ({"mutating": {"rate": 5, "burst": 2.5}}, "rate_limit.mutating.burst: 2.5"),
    ({"mutating": {"rate": 5, "burst": 10**12}}, "rate_limit.mutating.burst: 1000000000000"),
    ({"mutating": {"rate": 5}}, "rate_limit.mutating: keys ['rate']"),
    ({"mutating": {"rate": 5, "burst": 5, "extra": 1}}, "'extra'"),
    ({"mutating": [5, 50]}, "rate_limit.mutating: [5, 50]"),
]


def test_the_faults_api_refuses_a_bad_rate_limit(emulator):
    emulator.faults(rate_limit="default")
    with httpx.Client(timeout=30) as http:
        for value, named in BAD_RATE_LIMITS:
            resp = http.post(emulator.admin_url + "/faults", json={"rate_limit": value, "latency_ms": 5})
            assert resp.status_code == 400, (value, resp.text)
            message = resp.json()["message"]
            assert named in message and "valid" in message, (value, message)
    # nothing changed
    faults = emulator.admin("GET", "/faults")
    assert faults["rate_limit"] == DEFAULT_LIMITS and faults["latency_ms"] == 0


def test_the_faults_api_normalizes_and_refills(emulator, api):
    assert emulator.faults(rate_limit="default")["rate_limit"] == {
        "mutating": {"rate": 5.0, "burst": 50},
        "read": {"rate": 20.0, "burst": 100},
    }
    cfg = emulator.faults(rate_limit={"mutating": {"rate": 0.01, "burst": 1}})["rate_limit"]
    assert cfg == {"mutating": {"rate": 0.01, "burst": 1}, "read": None}
    assert api.note().status_code == 200 and api.note().status_code == 429
    # naming rate_limit again fills the buckets
    emulator.faults(rate_limit={"mutating": {"rate": 0.01, "burst": 1}})
    assert api.note().status_code == 200 and api.note().status_code == 429
    # a POST that leaves rate_limit out goes back to the default: off
    assert emulator.faults(latency_ms=0)["rate_limit"] is None
    assert api.note().status_code == 200


def test_the_command_line_option(tmp_path):
    assert parse_args([]).rate_limit is None
    assert parse_args(["--rate-limit", "off"]).rate_limit is None
    assert parse_args(["--rate-limit", "default"]).rate_limit == DEFAULT_LIMITS
    assert parse_args(["--rate-limit", "mutating=5:50,read=20:100"]).rate_limit == DEFAULT_LIMITS
    assert parse_args(["--rate-limit", "mutating=2.5:10"]).rate_limit == {
        "mutating": {"rate": 2.5, "burst": 10},
        "read": None,
    }
    assert parse_args(["--rate-limit", "read=1:3"]).rate_limit == {"mutating": None, "read": {"rate": 1.0, "burst": 3}}
    # started with it: on from the first request, and what DELETE /_emulator/faults returns to
    emu = Emulator(tmp_path / "state", extra_args=["--rate-limit", "mutating=0.01:1"]).start()
    api = Api(emu)
    try:
        assert emu.admin("GET", "/faults")["rate_limit"] == {"mutating": {"rate": 0.01, "burst": 1}, "read": None}
        assert api.note().status_code == 200 and api.note().status_code == 429
        emu.faults(latency_ms=0)  # leaves rate_limit out: the command line's value stays, and so do the buckets
        assert api.note().status_code == 429
        emu.admin("DELETE", "/faults")
        assert emu.admin("GET", "/faults")["rate_limit"]["mutating"] == {"rate": 0.01, "burst": 1}
        assert api.read().status_code == 200
    finally:
        api.http.close()
        emu.stop()


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("fast", "'fast' is not valid"),
        ("mutating=5", "'mutating=5' is not valid"),
        ("write=1:1", "'write=1:1' is not valid"),
        ("mutating=0:5", "rate: 0.0 is not valid"),
        ("mutating=5:0", "burst: 0 is not valid"),
        ("mutating=x:5", "RATE must be a number"),
        ("mutating=5:1.5", "BURST an integer"),
        ("mutating=1:1,mutating=2:2", "given twice"),
    ],
)
def test_the_command_line_option_refuses_a_bad_value(capsys, value, complaint):
    with pytest.raises(SystemExit) as exc:
        parse_args(["--rate-limit", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--rate-limit" in err and complaint in err and "valid" in err, err
