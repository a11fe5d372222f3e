"""The rate governor (``platform/governor.py``): its decisions in a discrete-event simulation of the platform's
token bucket (deterministic, on a simulated clock), then its threads for real (FIFO, the window, deadlines).

The simulation steps :class:`governor.Lane` exactly as :class:`governor.Governor` does for threads: each sender takes
a place in line, polls, sleeps until the time it is told or waits for a change, sends (half the latency to the
platform, where the bucket takes a token or answers 429 with an integer Retry-After, half back), reports the outcome,
and sends a 429'd call again.  Each group of senders is one process: its own governor, its own calls.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
import threading
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.whitesky.capvco.plugins.module_utils.platform import client as core
from ansible_collections.whitesky.capvco.plugins.module_utils.platform import errors
from ansible_collections.whitesky.capvco.plugins.module_utils.platform import governor as gov

from fakes.clients import mock_client  # a client on a fake clock, no network
from properties import examples


class Bucket:
    """The platform's token bucket as the emulator has it (``whitesky_emulator/ratelimit.py``): ``rate`` tokens a
    second up to ``burst``, full at first; an empty bucket answers the whole seconds until a token (at least 1)."""

    def __init__(self, rate, burst):
        self.rate, self.burst, self.tokens, self.last = rate, burst, float(burst), 0.0

    def take(self, now):
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0
        return max(1, math.ceil((1.0 - self.tokens) / self.rate))


class Group:
    """One process: a lane, ``senders`` threads, ``calls`` to make (each until it succeeds)."""

    def __init__(self, lane, senders, calls):
        self.lane, self.senders, self.calls = lane, senders, calls
        self.left = calls  # calls not yet started
        self.ok = 0
        self.attempts = 0
        self.limited = 0
        self.limited_at = []  # when each 429 came back
        self.finished = None  # when the last call succeeded
        self.success_times = []
        self.slept = 0.0
        self.waits = 0


class Sim:
    """A discrete-event simulation: groups of senders sharing one bucket (``rate`` None: no limit)."""

    def __init__(self, rate, burst, latency, groups, seed=0, jitter=0.2):
        self.bucket = Bucket(rate, burst) if rate is not None else None
        self.latency = latency
        self.rng = random.Random(seed)
        self.jitter = jitter
        self.groups = [
            Group(gov.Lane(random.Random(seed * 1000 + i)), senders, calls) for i, (senders, calls) in enumerate(groups)
        ]
        self.events = []
        self.seq = 0
        self.now = 0.0
        self.tickets = {}  # (group, ticket) -> sender, for the waiting ones
        self.trace = []

    def at(self, t, what, *args):
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, what, args))

    def run(self, until=math.inf):
        for g in self.groups:
            for s in range(g.senders):
                self.at(self.rng.uniform(0, 0.001), "start", g, s)
        while self.events:
            t, _seq, what, args = heapq.heappop(self.events)
            if t > until:
                break
            self.now = t
            getattr(self, "_" + what)(*args)
        return self

    def _start(self, g, s):
        """A sender takes its next call, if any is left, and joins the line."""
        if g.left <= 0:
            return
        g.left -= 1
        self._join(g, s)

    def _join(self, g, s):
        ticket = g.lane.join()
        self._poll(g, s, ticket)

    def _poll(self, g, s, ticket):
        verdict, at = g.lane.poll(ticket, self.now)
        if verdict == gov.GO:
            self.tickets.pop((g, ticket), None)
            g.attempts += 1
            lat = self.latency * self.rng.uniform(1 - self.jitter, 1 + self.jitter)
            self.at(self.now + lat / 2, "arrive", g, s, at, lat / 2)
            self._kick(g)
        elif verdict == gov.SLEEP:
            g.slept += at - self.now
            g.waits += 1
            self.tickets.pop((g, ticket), None)
            self.at(at, "wake", g, s, ticket)
        else:
            self.tickets[(g, ticket)] = s

    def _wake(self, g, s, ticket):
        self._poll(g, s, ticket)

    def _kick(self, g):
        """Something changed in the group's lane: the head of its line polls again (as ``notify_all`` does)."""
        line = g.lane._line
        if line and (g, line[0]) in self.tickets:
            self._poll(g, self.tickets[(g, line[0])], line[0])

    def _arrive(self, g, s, sent_at, back):
        ra = self.bucket.take(self.now) if self.bucket is not None else 0
        self.at(self.now + back, "answer", g, s, sent_at, ra)

    def _answer(self, g, s, sent_at, ra):
        if ra:
            g.limited += 1
            g.limited_at.append(self.now)
            g.lane.done(sent_at, gov.LIMITED, self.now, float(ra))
            self._kick(g)
            self._join(g, s)  # the same call again
            return
        g.lane.done(sent_at, gov.OK, self.now)
        g.ok += 1
        g.success_times.append(self.now)
        if g.ok == g.calls:
            g.finished = self.now
        self._kick(g)
        self._start(g, s)

    # -- figures -------------------------------------------------------------------------------------------------
    @property
    def wall(self):
        return max(g.finished for g in self.groups)

    def throughput_ratio(self, rate, burst):
        """Calls a second after the burst, against the limit."""
        calls = sum(g.ok for g in self.groups)
        return (calls - burst) / (self.wall * rate)

    def limited_share(self):
        return sum(g.limited for g in self.groups) / sum(g.attempts for g in self.groups)


def simulate(rate, burst, latency, senders, calls, seed=0, groups=1):
    return Sim(rate, burst, latency, [(senders, calls)] * groups, seed=seed).run()


# -- one process -------------------------------------------------------------------------------------------------

CASES = [
    # (rate, burst, latency, senders, calls): the emulator's default limits (mutating 5/s burst 50, reads 20/s
    # burst 100), with one to 32 threads, and smaller and larger limits
    (5, 50, 0.1, 32, 1000),
    (5, 50, 0.1, 8, 800),
    (5, 50, 0.1, 1, 600),
    (20, 100, 0.1, 32, 3000),
    (20, 100, 0.05, 4, 3000),
    (10, 50, 0.02, 32, 1500),
    (10, 20, 0.02, 32, 1000),
    (3, 30, 0.2, 8, 900),
    (50, 500, 0.1, 32, 8000),
]


@pytest.mark.parametrize("rate,burst,latency,senders,calls", CASES)
def test_one_process_gets_the_limit_with_few_429s(rate, burst, latency, senders, calls):
    """After the burst, at least 0.9 of the limit; at most 5% of the requests answered 429."""
    sim = simulate(rate, burst, latency, senders, calls)
    g = sim.groups[0]
    assert g.ok == calls
    assert sim.throughput_ratio(rate, burst) >= 0.9, g.lane
    assert sim.limited_share() <= 0.05, (g.limited, g.attempts, g.lane)


@pytest.mark.parametrize("rate,burst,latency,senders,calls", [(5, 50, 0.1, 32, 2000), (20, 100, 0.1, 32, 4000)])
def test_the_first_429_costs_a_round_trip_of_requests_and_each_later_cycle_about_one(
    rate, burst, latency, senders, calls
):
    """The requests already sent when the first 429 comes back meet the empty bucket too (at most one per sender);
    after that, a cycle of the sawtooth costs about one 429 (and those of the requests in flight with it)."""
    sim = simulate(rate, burst, latency, senders, calls)
    g = sim.groups[0]
    first = g.limited_at[0]
    early = sum(1 for t in g.limited_at if t <= first + 2 * latency * 1.2)
    assert early <= senders
    assert (g.limited - early) / g.attempts <= 0.02, (g.limited, early, g.attempts)
    assert g.lane.epoch <= 2 + sim.wall / 10, "about one decrease per cycle of 10 s or more"


def test_no_limit_no_waits_and_no_pacing():
    """Never throttled: every call goes at once, the governor adds no wait and no call."""
    sim = simulate(None, 0, 0.1, 32, 640)
    g = sim.groups[0]
    assert g.attempts == 640 and g.limited == 0
    assert g.slept == 0 and g.waits == 0 and g.lane.rate is None and g.lane.window == gov.WINDOW_MAX
    assert sim.wall == pytest.approx(640 / 32 * 0.1, rel=0.25)


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rate=st.sampled_from([3, 5, 8, 10, 20, 30]),
    burst_seconds=st.integers(5, 20),
    latency=st.sampled_from([0.01, 0.05, 0.1, 0.2]),
    senders=st.integers(1, 32),
    seed=st.integers(0, 2**16),
)
def test_any_token_bucket_is_used_to_the_full(rate, burst_seconds, latency, senders, seed):
    """For a bucket of 3 to 30 a second and a burst of 5 to 20 seconds' worth, and enough senders to exceed it: after
    the burst at least 0.9 of the limit, and besides the first round of 429s (one per sender at most) at most 3%.
    (The sawtooth's share of 429s grows as the limit shrinks, the additive increase being absolute: about 1.5% at
    5 a second, 2% at 3, 4% at 2.)"""
    senders = max(senders, math.ceil(2 * rate * latency))  # enough to exceed the limit at all
    burst = rate * burst_seconds
    calls = burst + rate * 150  # a run of two and a half minutes
    sim = simulate(rate, burst, latency, senders, calls, seed=seed)
    g = sim.groups[0]
    assert sim.throughput_ratio(rate, burst) >= 0.9, g.lane
    assert (g.limited - senders) / g.attempts <= 0.03, (g.limited, g.attempts, g.lane)


# -- processes sharing a credential ------------------------------------------------------------------------------


@pytest.mark.parametrize("rate,burst", [(5, 50), (20, 100)])
@pytest.mark.parametrize("processes,senders", [(20, 1), (8, 4), (4, 8), (2, 16), (3, 1)])
def test_processes_sharing_a_credential_converge_to_fair_shares(rate, burst, processes, senders):
    """N processes, each its own governor, one bucket: each one's calls within 1.5x of the mean (measured from
    200 s to 1200 s), all of them together at the limit."""
    sim = Sim(rate, burst, 0.1, [(senders, 10**6)] * processes, seed=0).run(until=1200)
    shares = [sum(1 for t in g.success_times if t > 200) for g in sim.groups]
    mean = statistics.mean(shares)
    assert all(mean / 1.5 <= s <= mean * 1.5 for s in shares), shares
    assert sum(shares) >= 0.97 * rate * 1000


def test_twenty_agents_each_with_a_call_in_flight_all_finish_near_the_floor():
    """The node agents: 20 processes, one call in flight each, 60 calls each, sharing mutating 5/s burst 50: all
    finish, the last within 1.3x of the floor, none after 1.5x the mean finish.  (Finishing before the mean by more
    than 1.5x happens: a process that meets no 429 for a while runs ahead; see the module's notes.)"""
    rate, burst, calls = 5, 50, 60
    sim = Sim(rate, burst, 0.1, [(1, calls)] * 20, seed=5).run()
    finished = [g.finished for g in sim.groups]
    assert all(f is not None for f in finished)
    floor = (20 * calls - burst) / rate
    mean = statistics.mean(finished)
    assert max(finished) <= 1.3 * floor, (max(finished), floor)
    assert max(finished) <= 1.5 * mean and min(finished) >= mean / 2, finished


# -- the governor for threads ------------------------------------------------------------------------------------


def wait_until(predicate, timeout=5.0):
    """Poll ``predicate`` until true, within ``timeout`` seconds (a condition with a deadline, not a sleep)."""
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not met within %ss" % timeout
        time.sleep(0.001)


def test_threads_go_in_the_order_they_came_paced_apart():
    """FIFO: ten threads, each in line before the next comes, go in that order, one paced interval apart."""
    g = gov.Governor(rng=random.Random(1))
    lane = g.lanes[gov.MUTATING]
    lane.rate = 50.0  # 20 ms apart
    went = []

    def one(i):
        permit = g.acquire("POST")
        went.append((i, permit.sent_at))
        g.release(permit, gov.OK)

    threads = []
    with g._cond:  # hold the line while it forms: nobody goes until all ten are in it
        for i in range(10):
            t = threading.Thread(target=one, args=(i,))
            threads.append(t)
            t.start()
            g._cond.release()
            try:
                wait_until(lambda i=i: lane._tickets == i + 1)
            finally:
                g._cond.acquire()
    for t in threads:
        t.join(10)
    assert [i for i, _t in went] == list(range(10))
    gaps = [b - a for (_i, a), (_j, b) in zip(went, went[1:], strict=False)]
    assert all(gap >= 0.02 * (1 - gov.PACING_JITTER) - 0.002 for gap in gaps), gaps
    assert g.waited > 0


def test_the_window_bounds_the_requests_in_flight(monkeypatch):
    monkeypatch.setattr(gov, "WINDOW_MAX", 3)
    g = gov.Governor()
    lane = g.lanes[gov.READ]
    lane.window = 3.0
    state = {"now": 0, "most": 0}
    lock = threading.Lock()
    done = threading.Barrier(13)

    def one():
        permit = g.acquire("GET")
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.01)
        with lock:
            state["now"] -= 1
        g.release(permit, gov.OK)
        done.wait(10)

    for _ in range(12):
        threading.Thread(target=one).start()
    done.wait(10)
    assert state["most"] == 3 and lane.in_flight == 0 and lane.waiting() == 0


def test_a_request_that_would_start_after_its_deadline_is_not_sent():
    g = gov.Governor()
    lane = g.lanes[gov.MUTATING]
    lane.blocked_until = time.monotonic() + 30
    lane.retry_after = 30.0
    t0 = time.monotonic()
    with pytest.raises(gov.Overdue) as err:
        g.acquire("DELETE", deadline=t0 + 2)
    assert time.monotonic() - t0 < 1, "given up at once, not after sleeping"
    assert "rate limit" in str(err.value) and "asked to wait 30s" in str(err.value)
    assert lane.waiting() == 0 and lane.in_flight == 0
    assert g.acquire("GET", deadline=t0 + 2).kind == gov.READ, "reads are another class"


def test_a_thread_waiting_behind_a_sleeping_head_gives_up_at_its_deadline():
    g = gov.Governor()
    lane = g.lanes[gov.MUTATING]
    lane.blocked_until = time.monotonic() + 0.5
    head = threading.Thread(target=lambda: g.release(g.acquire("POST"), gov.OK))
    head.start()
    wait_until(lambda: lane._held is not None)  # the head sleeps until its start
    t0 = time.monotonic()
    with pytest.raises(gov.Overdue):
        g.acquire("POST", deadline=t0 + 0.1)
    assert time.monotonic() - t0 < 0.4
    head.join(5)
    assert lane.waiting() == 0 and lane.in_flight == 0


def test_one_429_per_epoch_halves_the_window_then_ramps_from_one_per_retry_after():
    """Lane decisions on a clock of its own: a first 429 halves the window of what was in flight and holds the class
    back for its Retry-After; then it paces at one request per Retry-After, doubling every RAMP_SECONDS of successes
    until the next 429, which cuts it below what passed since; the 429s of requests sent before a decrease change
    nothing more."""
    lane = gov.Lane(random.Random(0))
    sent = []
    for i in range(40):
        t = lane.join()
        verdict, at = lane.poll(t, i * 0.01)
        assert verdict == gov.GO and at == i * 0.01
        sent.append(at)
    for at in sent[:20]:
        lane.done(at, gov.OK, at + 0.1)
    assert lane.rate is None and lane.in_flight == 20
    lane.done(sent[30], gov.LIMITED, 0.5, retry_after=1.0)
    window, blocked = lane.window, lane.blocked_until
    assert window == 10.0  # half of what was in flight
    assert 1.5 <= blocked <= 1.5 + 0.03 + gov.WAIT_JITTER_ABS
    assert lane.rate == 1.0  # one per Retry-After: the bucket gives at least that
    for at in sent[20:30]:  # sent before the 429'd one, answered during the wait
        lane.done(at, gov.OK, 0.6)
    for at in sent[31:]:  # sent before the decrease: already answered by it
        lane.done(at, gov.LIMITED, 0.65, retry_after=1.0)
    assert (lane.blocked_until, lane.epoch, lane.limited) == (blocked, 1, 10)
    assert lane.window == window + 1  # ten successes: a window's worth
    t = lane.join()
    assert lane.poll(t, 0.7) == (gov.SLEEP, blocked)
    assert lane.poll(t, blocked) == (gov.GO, blocked)
    now = blocked
    for _ in range(3):  # ramping: each RAMP_SECONDS of successes doubles the rate
        now += gov.RAMP_SECONDS
        lane.done(now - 0.01, gov.OK, now)
    assert lane.rate == pytest.approx(8.0, rel=0.1)
    before = lane.rate
    lane.done(now, gov.LIMITED, now + 0.1, retry_after=1.0)  # the next 429 ends the ramp: cut below what passed
    assert lane.epoch == 2 and lane.rate <= before * gov.BETA + 1e-9
    rate = lane.rate
    lane.done(now + 1.5, gov.OK, now + 3.0)
    assert lane.rate < rate * 2, "no more doubling after the ramp's end"


def test_the_rate_grows_by_alpha_per_second_of_sending():
    lane = gov.Lane(random.Random(0))
    lane.rate, lane._grown_at = 4.0, 0.0
    now = 0.0
    for _ in range(40):  # 10 s of sending at about 4 a second
        now += 1.0 / lane.rate
        lane.done(now - 0.1, gov.OK, now)
    assert lane.rate == pytest.approx(4.0 + (gov.ALPHA + gov.ALPHA_SHARE * 4.5) * now, rel=0.05)


# -- the governor in the transport -------------------------------------------------------------------------------


def fake_client(handler, **kw):
    """A client on a fake clock (``test_hostile``'s), with a token that must never show."""
    return mock_client(handler, token="t0ken-never-shown", **kw)


def limited(retry_after="2"):
    return httpx.Response(429, headers={"Retry-After": retry_after}, json={"message": "slow down"})


def test_429s_are_waited_out_in_the_governor_and_do_not_count_as_attempts():
    answers = [limited(), limited(), limited(), httpx.Response(200, json={"vm_id": 1})]
    c, clock = fake_client(lambda request: answers.pop(0), max_attempts=2)
    assert c.get_vm("cs", 1) == {"vm_id": 1}
    assert answers == []
    assert c.transport.retry.rate_limited == 3 and c.transport.retry.retries == 3
    # each Retry-After waited out (with its jitter), or the pace of one request per Retry-After (with its own)
    # each Retry-After is waited out at least; after the first, the lane paces at one request per Retry-After, cut by
    # BETA at the next 429 (a pace may be longer than the Retry-After)
    most = 2.0 / gov.BETA * (1 + gov.PACING_JITTER + gov.WAIT_JITTER) + gov.WAIT_JITTER_ABS
    assert 6.0 <= c.transport.retry.rate_waited <= 3 * most
    assert clock.slept and all(2.0 <= s <= most for s in clock.slept)
    assert c.transport.governor.limited == 3 and c.transport.governor.lanes[gov.MUTATING].limited == 0


def test_a_retry_after_past_the_deadline_gives_up_with_what_it_waited_on():
    sent = []

    def handler(request):
        sent.append(clock.now)
        return limited("100")

    c, clock = fake_client(handler)
    with pytest.raises(errors.ApiError) as err:
        c.get_vm("cs", 1)
    text = str(err.value)
    assert err.value.status == 429 and len(sent) == 1 and clock.now < 1
    assert "gave up after 1 attempt(s)" in text and "rate limit" in text and "asked to wait 100s" in text
    assert "t0ken" not in text


def test_a_call_waits_for_another_calls_retry_after_within_its_own_deadline():
    """Another call of the credential met a 429 asking for 20 s: a call with 5 s left is not sent (and says why); a
    call with 40 s waits it out and goes."""
    answers = [httpx.Response(200, json={"vm_id": 1})]
    c, clock = fake_client(lambda request: answers.pop(0))
    c.transport.governor.release(c.transport.governor.acquire("GET"), gov.LIMITED, 20.0)
    with (
        c.transport.deadlines.operation(5),
        pytest.raises(errors.ApiError, match="not sent: waited .* rate limit") as err,
    ):
        c.get_vm("cs", 1)
    assert err.value.status == 429 and len(answers) == 1 and clock.now < 5
    assert c.get_vm("cs", 1) == {"vm_id": 1}
    assert 20 <= clock.now <= 20 * 1.03 + gov.WAIT_JITTER_ABS


def test_a_429_on_a_mutation_does_not_hold_back_reads():
    def handler(request):
        if request.method == "POST":
            return limited("30")
        return httpx.Response(200, json={"vm_id": 1})

    c, clock = fake_client(handler)
    with c.transport.deadlines.operation(5), pytest.raises(errors.ApiError):
        c.transport.retry.request("POST", "/x")
    assert c.get_vm("cs", 1) == {"vm_id": 1} and clock.now < 5


def test_without_429s_the_governor_adds_no_wait_and_no_request():
    count = []
    c, clock = fake_client(lambda request: count.append(1) or httpx.Response(200, json={"vm_id": 1}))
    for _ in range(50):
        c.get_vm("cs", 1)
    assert (
        len(count) == 50
        and clock.slept == []
        and c.transport.retry.rate_waited == 0
        and c.transport.retry.rate_limited == 0
    )
    assert all(lane.rate is None for lane in c.transport.governor.lanes.values())


def test_one_governor_per_credential_keyed_by_a_hash_of_the_token():
    url = "http://127.0.0.1:9/api/1/registry-test"
    a = core.WhiteskyClient(url, "secret-token-a", "cust")
    b = core.WhiteskyClient(url, "secret-token-a", "other-customer")
    other = core.WhiteskyClient(url, "secret-token-b", "cust")
    assert a.transport.governor is b.transport.governor is gov.shared(a.transport.base_url, "secret-token-a")
    assert other.transport.governor is not a.transport.governor
    keys = [k for k in gov._REGISTRY if k[0] == a.transport.base_url]
    assert len(keys) == 2 and all("secret" not in str(k) for k in keys)
    assert "secret" not in repr(a.transport.governor)
    fake, _clock = fake_client(lambda request: httpx.Response(200))
    assert fake.transport.governor not in gov._REGISTRY.values(), "an injected clock gets a governor of its own"


def test_a_long_unthrottled_run_keeps_only_the_last_seconds_of_successes():
    lane = gov.Lane(random.Random(0))
    for i in range(100000):
        t = lane.join()
        _verdict, at = lane.poll(t, i * 0.001)
        lane.done(at, gov.OK, at + 0.05)
    assert len(lane._recent) <= gov.MEASURE_SECONDS / 0.001 + 1
    assert lane.rate is None and lane.window == gov.WINDOW_MAX
