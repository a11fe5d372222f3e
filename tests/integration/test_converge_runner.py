"""The one runner of a converge (``ownership.converge``), driven by a new concern written in a few lines, against
the emulator: check mode shows the plan and writes nothing (no lease either); the real run takes the cluster's
lease, reads and plans again once it holds it, and applies exactly that plan; a run that waited for another says
so, and applies nothing when the run it waited for did the work; a failure halfway is the concern's, with what was
done; a cloudspace deleted under a waiting run makes it start again from its reads.

The concern (:class:`Tag`: a note ``tag=<value>`` on a cloudspace) is what the next concern of the collection (the
control plane's load balancer) is to the runner: a read, a pure plan with ``changed`` and ``view()``, an apply, a
lease; nothing of check mode, the lease or the re-read is written in it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest

from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import converge, lease
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership.errors import CloudspaceGone
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (
    ApiError,
    PartialFailure,
    WhiteskyError,
)
from capvco_lab.emulator import wait_for

CS, CLUSTER, TITLE = "cs-demo", "c1", "capvco tag"


@dataclass(frozen=True)
class TagPlan:
    cloudspace_id: str
    value: str
    present: bool

    @property
    def changed(self) -> bool:
        return not self.present

    def view(self) -> dict[str, Any]:
        return {"cloudspace_id": self.cloudspace_id, "tag": self.value, "write": not self.present}


class Tag(converge.Concern[list, TagPlan]):
    """A note ``tag=<value>`` on the cloudspace, under the cluster's lease: the whole concern."""

    def __init__(self, client, value, cloudspaces=(CS,)):
        self.client, self.value, self.cloudspaces, self.reads = client, value, list(cloudspaces), 0

    def read(self):
        self.reads += 1
        cs = self.cloudspaces.pop(0) if len(self.cloudspaces) > 1 else self.cloudspaces[0]
        return [cs, [n.get("content") for n in self.client.cloudspace_notes(CS)]]

    def plan(self, world):
        return TagPlan(world[0], self.value, "tag=" + self.value in world[1])

    def lease(self, plan):
        return converge.Where(plan.cloudspace_id, CLUSTER)

    def apply(self, plan, done):
        self.client.create_cloudspace_note(CS, TITLE, "tag=" + plan.value)
        done["tagged"] = [plan.value]


def tags(client):
    return [n["content"] for n in client.cloudspace_notes(CS) if n.get("title") == TITLE]


def leases(client):
    return [n for n in client.cloudspace_notes(CS) if lease.parse_lease(n.get("title"), n.get("content"))]


def test_check_mode_shows_the_plan_and_writes_nothing_not_even_a_lease(emulator):
    with emulator.client() as client:
        concern = Tag(client, "blue")
        out = converge.converge(client, concern, check_mode=True)
        assert out == {"cloudspace_id": CS, "tag": "blue", "write": True, "changed": True}
        assert concern.reads == 1
    assert emulator.op_count("createCloudspaceNote") == 0


def test_the_real_run_holds_the_lease_reads_again_and_applies_the_plan_it_made_then(emulator):
    with emulator.client() as client:
        seen: list[int] = []
        concern = Tag(client, "blue")
        real_apply = concern.apply

        def apply(plan, done):  # the lease is held while the plan is applied
            seen.append(len(leases(client)))
            real_apply(plan, done)

        concern.apply = apply
        out = converge.converge(client, concern)
        assert out["changed"] is True and out["tagged"] == ["blue"] and "warnings" not in out
        assert seen == [1] and concern.reads == 2  # read, then read again once it held the lease
        assert tags(client) == ["tag=blue"] and leases(client) == []
        again = Tag(client, "blue")
        assert converge.converge(client, again) == {
            "cloudspace_id": CS,
            "tag": "blue",
            "write": False,
            "changed": False,
        }
        assert again.reads == 1  # nothing to change: no lease, no second read
    # the lease note, the cluster's member note (its first lease writes it) and the tag, once each
    assert emulator.op_count("createCloudspaceNote") == 3


def test_a_run_that_waited_says_so_and_applies_nothing_when_the_other_run_did_it(emulator):
    with emulator.client() as holder, emulator.client() as client:
        held = lease.Lease(holder, CS, CLUSTER).acquire()
        concern = Tag(client, "green")
        results: list[Any] = []
        thread = threading.Thread(target=lambda: results.append(converge.converge(client, concern)))
        thread.start()
        assert wait_for(lambda: len(leases(holder)) == 2, 10)  # the second run's lease note: it waits behind the holder
        holder.create_cloudspace_note(CS, TITLE, "tag=green")  # the holder does the work
        held.release()
        thread.join(30)
        out = results[0]
        assert out["changed"] is False and "tagged" not in out  # planned again from fresh reads: nothing left to do
        assert concern.reads == 2
        (warning,) = out["warnings"]
        assert warning.startswith("cluster 'c1' was held by another run (run %s): this run waited " % held.run)
        assert warning.endswith("s for it, then read the cluster again")
        assert tags(client) == ["tag=green"]


class Broken(Tag):
    def apply(self, plan, done):
        super().apply(plan, done)
        raise ApiError("POST", "/tag", 500, "the platform broke after the tag")


def test_a_failure_halfway_is_the_concerns_with_what_was_done(emulator):
    class Says(Broken):
        def failed(self, exc, done):
            return PartialFailure("%s; done: %s" % (exc, done), dict(done))

    with emulator.client() as client:
        with pytest.raises(PartialFailure) as failure:
            converge.converge(client, Says(client, "red"))
        assert failure.value.details == {"tagged": ["red"]}
        assert leases(client) == []  # let go on the way out
        with pytest.raises(ApiError, match="broke after the tag"):  # not overridden: the error itself
            converge.converge(client, Broken(client, "pink"))


def test_a_cloudspace_gone_under_the_lease_starts_the_run_again_from_its_reads(emulator):
    with emulator.client() as client:
        once = Tag(client, "gold", cloudspaces=("cs-gone", CS))  # its first read names a cloudspace that is gone
        with pytest.raises(CloudspaceGone):  # a concern that does not start again fails with it
            converge.converge(client, once)
        assert once.reads == 1

        class Again(Tag):
            restarts = 2

            def gone(self, exc):
                return WhiteskyError("gone %d times" % self.restarts)

        again = Again(client, "gold", cloudspaces=("cs-gone", CS))
        out = converge.converge(client, again)
        assert out["tagged"] == ["gold"] and again.reads == 3  # the first attempt, then one read before the lease
        # and one under it
        always = Again(client, "amber", cloudspaces=("cs-gone", "cs-gone"))
        with pytest.raises(WhiteskyError, match="gone 2 times"):
            converge.converge(client, always)
