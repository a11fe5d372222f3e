"""Leader election between replicas whose clocks are apart by more than the lease: two of the controller's
``LeaderElector`` in this process, each in its own thread with its own clocks, on one Lease of the fake API server
(real HTTP, the ``kubernetes`` client). Each replica records when it believes it leads (from the moment it took the
Lease until it stopped renewing it); those intervals never overlap, and a replica takes over once the leader stopped
within the lease duration and one retry period (and the requests' time).  And when the API server goes silent to the
leader alone, mid-request (its Lease requests hang unanswered, the standby's go through), the leader stops leading
within the renew deadline, before the standby takes the lapsed Lease.

The durations are shortened (a 2 s lease renewed every 0.2 s) so that a span of several lease periods and two
takeovers run in seconds; one replica's clocks run 60 s ahead (thirty leases)."""

from __future__ import annotations

import datetime
import threading
import time

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import kube as seam
from capvco_controller.kube import Kube
from capvco_controller.leader import LeaderElector
from capvco_lab.controller import KubeFake
from capvco_lab.emulator import wait_for

NAMESPACE, NAME = "capvco-system", "capvco-controller"
LEASE, RETRY, DEADLINE = 2, 0.2, 1.2
AHEAD = 60.0
#: what a takeover may take beyond the lease and one retry period: the requests on a busy machine
REQUESTS = 0.5


class Replica:
    """One replica's elector in a thread, its clocks ``skew`` seconds off this machine's. ``led`` holds each time
    it believed it led, ``[start, end]`` on the test's timeline (``time.monotonic``; end None while it leads)."""

    def __init__(self, kube: Kube, identity: str, skew: float) -> None:
        self.elector = LeaderElector(
            kube,
            NAMESPACE,
            NAME,
            identity,
            lease_duration=LEASE,
            renew_deadline=DEADLINE,
            retry_period=RETRY,
            clock=lambda: time.monotonic() + skew,
            wall_clock=lambda: datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=skew),
        )
        self.stop = threading.Event()
        self.led = []
        self.thread = threading.Thread(target=self._run, name=identity, daemon=True)

    def _run(self) -> None:
        # as main.py runs it: acquire, then renew until stopped or lost (the process then exits)
        if self.elector.acquire(self.stop):
            self.led.append([time.monotonic(), None])
            self.elector.renew_forever(self.stop)
            self.led[-1][1] = time.monotonic()

    def start(self) -> Replica:
        self.thread.start()
        return self

    def halt(self) -> float:
        """Stop it as a crash would (no release: the Lease is left to lapse); when it stopped leading, if it led."""
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        return self.led[-1][1] if self.led else time.monotonic()

    def leads(self) -> bool:
        return bool(self.led) and self.led[-1][1] is None


def lease_writes(fake: KubeFake) -> int:
    return sum(1 for r in fake.requests() if r["method"] == "PUT" and "/leases/" in r["path"])


def overlaps(replicas: list[Replica]) -> list[tuple[str, str]]:
    """Every pair of intervals of two replicas that overlap (an open one runs until now)."""
    now = time.monotonic()
    spans = [(r.thread.name, s, e if e is not None else now) for r in replicas for s, e in r.led]
    return [
        (a, b)
        for i, (a, s1, e1) in enumerate(spans)
        for (b, s2, e2) in spans[i + 1 :]
        if a != b and s1 < e2 and s2 < e1
    ]


def run_for_leases(fake: KubeFake, periods: int) -> None:
    """Until the leader has written the Lease as often as it does in ``periods`` lease durations."""
    before = lease_writes(fake)
    assert wait_for(lambda: lease_writes(fake) >= before + periods * LEASE / RETRY, periods * LEASE * 5, 0.2)


def test_replicas_with_clocks_a_minute_apart_have_one_leader_at_every_instant(tmp_path):
    fake = KubeFake(tmp_path).start()
    replicas = []
    try:
        fake.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        kube = Kube.connect(fake.kubeconfig)

        # the leader on this machine's clock, then a standby whose clocks run a minute ahead: the standby reads the
        # leader's renewTime as a minute old, and must not take the Lease while the leader renews it
        on_time = Replica(kube, "on-time", 0.0).start()
        replicas.append(on_time)
        assert wait_for(on_time.leads, 10)
        ahead = Replica(kube, "ahead", AHEAD).start()
        replicas.append(ahead)
        run_for_leases(fake, 3)
        assert overlaps(replicas) == [], [(r.thread.name, r.led) for r in replicas]
        assert on_time.leads() and not ahead.led

        # the leader stops: the one ahead takes over within the lease and a retry period
        stopped = on_time.halt()
        assert wait_for(ahead.leads, LEASE + RETRY + REQUESTS + 5)
        took = ahead.led[0][0] - stopped
        assert 0 < took <= LEASE + RETRY + REQUESTS, took

        # the other way round: a new replica on this machine's clock stands by while the one ahead (its renewTime a
        # minute in the future) renews, and takes over within the lease once it stops
        later = Replica(kube, "on-time-again", 0.0).start()
        replicas.append(later)
        run_for_leases(fake, 3)
        assert ahead.leads() and not later.led
        stopped = ahead.halt()
        assert wait_for(later.leads, LEASE + RETRY + REQUESTS + 5)
        took = later.led[0][0] - stopped
        assert 0 < took <= LEASE + RETRY + REQUESTS, took
        later.halt()
        assert overlaps(replicas) == [], [(r.thread.name, r.led) for r in replicas]
        lease = kube.lease(NAMESPACE, NAME, timeout=10)
        assert lease is not None and lease["spec"]["leaseTransitions"] == 2
        assert lease["spec"]["holderIdentity"] == "on-time-again"
    finally:
        for r in replicas:
            r.stop.set()
        fake.stop()


def client(fake: KubeFake, user_agent: str) -> Kube:
    """A replica's own client, told apart by its User-Agent."""
    api = seam.api_client(fake.kubeconfig)
    api.user_agent = user_agent
    return Kube(api)


def test_a_leader_whose_api_server_goes_silent_stops_leading_before_the_standby_takes_over(tmp_path):
    """The leader's Lease requests hang (the fake answers none of them, mid-request) while the standby's go through:
    the leader's renewal cannot succeed, so it stops leading within the renew deadline of its last renewal; the
    standby takes the Lease once it has seen it unchanged for the lease duration; never both at once.  (Before each
    Lease request had a timeout the leader waited on its socket for good, leading on beside the new leader.)"""
    fake = KubeFake(tmp_path).start()
    replicas = []
    try:
        fake.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        leader = Replica(client(fake, "replica-leader"), "leader", 0.0).start()
        replicas.append(leader)
        assert wait_for(leader.leads, 10)
        standby = Replica(client(fake, "replica-standby"), "standby", AHEAD).start()
        replicas.append(standby)
        run_for_leases(fake, 2)
        assert leader.leads() and not standby.led

        fake.hang("/leases/", user_agent="replica-leader")
        silent = time.monotonic()
        assert wait_for(standby.leads, LEASE + RETRY + REQUESTS + 5), [(r.thread.name, r.led) for r in replicas]
        assert overlaps(replicas) == [], [(r.thread.name, r.led) for r in replicas]
        # the leader's last renewal began before the silence: it stopped within the renew deadline of it
        stopped = leader.led[-1][1]
        assert stopped is not None and not leader.elector.leading.is_set()
        assert stopped - silent <= DEADLINE + REQUESTS, stopped - silent
        # the standby took it once the lease lapsed: no sooner than the lease after the leader's last write
        took = standby.led[0][0]
        assert took > stopped and LEASE - RETRY - REQUESTS <= took - silent <= LEASE + RETRY + REQUESTS, took - silent
        lease = standby.elector.kube.lease(NAMESPACE, NAME, timeout=10)
        assert lease is not None and lease["spec"]["holderIdentity"] == "standby"
        run_for_leases(fake, 1)
        assert standby.leads() and overlaps(replicas) == []
    finally:
        fake.unhang()
        for r in replicas:
            r.stop.set()
        fake.stop()
