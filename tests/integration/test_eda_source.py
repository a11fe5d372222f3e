"""The event source whitesky.capvco.vgpu_events against the emulator, as ansible-rulebook runs it: the file loaded
by its path (``runpy.run_path``) from the linked collection, ``main(queue, args)`` awaited with a queue of one slot;
an event counts as delivered once the source's ``put`` returned (what a stop leaves in the queue is drained)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import inspect
import json
import logging
import os
import runpy
import subprocess
import sys
import time
import traceback

import pytest
import yaml
from test_cluster_spec import set_price

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import cursor as cursors
from ansible_collections.whitesky.capvco.plugins.module_utils.faces import events
from ansible_collections.whitesky.capvco.plugins.module_utils.ownership import naming
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import InputError, WhiteskyError
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import events as orphans
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import sweep

from helpers import COLLECTIONS, CUSTOMER, ROOT, read_text
from test_gpu import CS, LOC, ensure, reclaim, vms

SOURCE = os.path.join(
    COLLECTIONS, "ansible_collections", "whitesky", "capvco", "extensions", "eda", "plugins", "event_source"
)
RULEBOOK = os.path.join(ROOT, "extensions", "eda", "rulebooks", "vgpu_orphans.yml")
#: The longest wait for anything the source does (an event, a poll), in seconds.
DEADLINE = 30.0
LISTING = "listCustomerVGPUS"


def source_main():
    """The source's ``main``, loaded afresh as ansible-rulebook loads it (a restart loads it again)."""
    return runpy.run_path(os.path.join(SOURCE, "vgpu_events.py"))["main"]


def source_args(emu, tmp_path, **more):
    args = {
        "api_url": emu.url if emu else "http://127.0.0.1:9/api/1",
        "api_token": emu.token if emu else "capvco-demo-token",
        "customer_id": CUSTOMER,
        "location": LOC,
        "interval": 0.1,
        "cursor": str(tmp_path / "state" / "cursor.json"),
    }
    args.update(more)
    return args


def seed(emu, *names):
    """Reservations made as another tool would (no VM), by name; their ids."""
    return emu.admin("POST", "/seed-vgpu", {"location": LOC, "gpu_id": "nvidia-a100-40c", "vgpu_names": list(names)})[
        "vgpu_ids"
    ]


class Run:
    """The source running as a task of the test's loop, on a queue of one slot (ansible-rulebook's)."""

    def __init__(self, args):
        self.queue = asyncio.Queue(maxsize=1)
        self.task = asyncio.ensure_future(source_main()(self.queue, args))
        self.got = []

    async def next(self, timeout=DEADLINE):
        """The next event, within ``timeout``; the source's error when it stopped instead."""
        getter = asyncio.ensure_future(self.queue.get())
        done, _ = await asyncio.wait({getter, self.task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            self.got.append(getter.result())
            return self.got[-1]
        getter.cancel()
        if self.task in done:
            self.task.result()
            raise AssertionError("the source ended without an error")
        raise AssertionError("no event within %ss (got %r)" % (timeout, self.got))

    async def take(self, n):
        return [await self.next() for _ in range(n)]

    async def quiet(self, emu, polls=2):
        """Wait until the source has read the listing ``polls`` times more after the poll in flight (if any), with no
        event meanwhile: a poll is done when the next one starts."""
        start = await asyncio.to_thread(emu.op_count, LISTING)
        deadline = time.monotonic() + DEADLINE
        while await asyncio.to_thread(emu.op_count, LISTING) < start + polls + 1:
            assert self.queue.empty(), "an event came: %r" % (self.queue.get_nowait(),)
            assert not self.task.done(), self.task.exception()
            assert time.monotonic() < deadline, "the source did not poll %d times within %ss" % (polls, DEADLINE)
            await asyncio.sleep(0.05)
        assert self.queue.empty(), "an event came: %r" % (self.queue.get_nowait(),)

    async def stop(self):
        """Cancel the source (as ansible-rulebook's shutdown does); what it already put in the queue was delivered."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        while not self.queue.empty():
            self.got.append(self.queue.get_nowait())
        return self.got


def cursor_file(args):
    with open(args["cursor"], encoding="utf-8") as fh:
        return json.load(fh)


def test_each_orphan_is_delivered_once_across_restarts_with_its_payload(emulator, tmp_path):
    now = int(time.time())
    old = [naming.encode("gone", "m%d" % i, i % 2, created=now - 7200 - i) for i in range(4)]
    ids = dict(zip(old, seed(emulator, *old), strict=True))
    seed(emulator, naming.encode("gone", "young", 0, created=now), "made-by-hand-1")  # in its grace; not ours
    vms(emulator, "c1-w0")
    seed(emulator, naming.encode("c1", "c1-w0", 0, created=now - 7200))  # its machine exists: no orphan
    args = source_args(emulator, tmp_path, grace_period=900)

    async def scenario():
        first = Run(args)
        await first.take(2)
        await first.stop()  # a third may have been put already: delivered, never again
        second = Run(args)
        while len(first.got) + len(second.got) < len(old):
            await second.next()
        await second.quiet(emulator)
        late = naming.encode("gone", "late", 0, created=now - 3600)
        ids[late] = (await asyncio.to_thread(seed, emulator, late))[0]
        await second.next()
        await second.stop()
        return first.got + second.got, late

    got, late = asyncio.run(scenario())
    assert [e["seq"] for e in got] == list(range(1, len(old) + 2)), "numbered once each, across the restart"
    assert [e["vgpu_name"] for e in got] == sorted(old, key=lambda n: naming.decode(n).created) + [late]
    assert {e["type"] for e in got} == {orphans.ORPHANED}
    first = got[0]
    owner = naming.decode(first["vgpu_name"])
    assert first["owner"] == {"cluster": "gone", "machine": owner.machine, "slot": owner.slot, "created": owner.created}
    assert first["vgpu_id"] == ids[first["vgpu_name"]] and first["location"] == LOC
    assert 7200 <= first["age"] <= time.time() - owner.created + 1 and first["grace_period"] == 900
    assert first["cost_per_hour"] == 1.0 and first["currency"] == "EUR" and first["cost"] >= 0.0
    assert first["vgpu_seconds"] >= 0.0 and first["status"] == "RESERVED" and not first["in_recycle_bin"]
    assert first["vm_id"] is None and first["vm_name"] is None and first["withheld"] == []
    cursor = cursor_file(args)
    assert cursor["seq"] == len(got) and cursor["customer_id"] == CUSTOMER
    assert sorted(cursor["locations"][LOC]["reported"]) == sorted(ids.values())
    assert [n for n in os.listdir(os.path.dirname(args["cursor"])) if n.endswith(".tmp")] == []


def test_reclaimed_once_by_reason_and_the_threshold_once_per_crossing(emulator, tmp_path):
    vm_id = vms(emulator, "c1-w0")[0]
    ensure(emulator, machine="c1-w0", count=2)
    with emulator.client() as client:
        client.delete_vm(CS, vm_id, detach_gpu=True)  # a forced delete: its two vGPUs escape, still billed
    back = naming.encode("c1", "c1-back", 0, created=int(time.time()) - 7200)
    seed(emulator, back)
    args = source_args(emulator, tmp_path, grace_period=0, cost_threshold=2.5)

    async def scenario():
        run = Run(args)
        escaped = await run.take(4)
        await run.quiet(emulator)  # still above the threshold: it is not said again
        await asyncio.to_thread(vms, emulator, "c1-back")  # its machine is back
        owner_back = await run.next()
        soft = escaped[1]["vgpu_id"]
        with emulator.client() as client:
            await asyncio.to_thread(client.delete_vgpu, LOC, soft, permanently=False)
        await run.quiet(emulator)  # in the recycle bin it still bills: nothing is reclaimed
        swept = await asyncio.to_thread(reclaim, emulator, scope="orphans", cluster="c1")
        released = await run.take(2)
        await run.quiet(emulator)
        now = int(time.time())
        await asyncio.to_thread(seed, emulator, *(naming.encode("c1", "c1-x%d" % i, 0, now - 60) for i in range(3)))
        again = await run.take(4)
        await run.stop()
        return run.got, escaped, owner_back, swept, released, again

    got, escaped, owner_back, swept, released, again = asyncio.run(scenario())
    assert [e["type"] for e in escaped] == [orphans.ORPHANED] * 3 + [orphans.THRESHOLD]
    assert escaped[0]["vgpu_name"] == back, "the oldest first"
    threshold = escaped[3]
    assert threshold["cost_per_hour"] == 3.0 and threshold["threshold"] == 2.5 and threshold["orphans"] == 3
    assert threshold["currency"] == "EUR" and sorted(threshold["vgpu_names"]) == sorted(
        e["vgpu_name"] for e in escaped[:3]
    )
    assert owner_back["type"] == orphans.RECLAIMED and owner_back["reason"] == "owner_back"
    assert owner_back["vgpu_name"] == back and owner_back["orphaned_seq"] == escaped[0]["seq"]
    assert owner_back["saved_per_hour"] == 0.0 and owner_back["cost_per_hour"] == 1.0
    assert sorted(r["vgpu_id"] for r in swept["released"]) == sorted(e["vgpu_id"] for e in escaped[1:3])
    assert [e["type"] for e in released] == [orphans.RECLAIMED] * 2
    assert {e["reason"] for e in released} == {"released"} and {e["saved_per_hour"] for e in released} == {1.0}
    assert sorted(e["vgpu_id"] for e in released) == sorted(e["vgpu_id"] for e in escaped[1:3])
    assert [e["type"] for e in again] == [orphans.ORPHANED] * 3 + [orphans.THRESHOLD], "re-armed once it fell"
    assert [e["type"] for e in got].count(orphans.THRESHOLD) == 2
    assert [e["seq"] for e in got] == list(range(1, len(got) + 1))


#: A location's ``vgu`` price the platform may answer that is not a finite number of 0 or more (issue 34, point 3):
#: absent from the answer, null, negative, a string, a list.
ABSENT = object()
UNKNOWN_PRICES = [
    pytest.param(ABSENT, id="absent"),
    pytest.param(None, id="null"),
    pytest.param(-730, id="negative"),
    pytest.param("abc", id="garbage"),
    pytest.param([730], id="list"),
]
#: The emulator's monthly price of one vGPU in be-gen-1: 1.0 per hour.
KNOWN_PRICE = 730


def unknown_price(emu, monkeypatch, vgu):
    """Make the location's ``vgu`` price ``vgu`` (the emulator's store, written directly; ``ABSENT``: removed, and
    the emulator's answer then has none, as the platform's may); a function that puts the known price back."""
    if vgu is ABSENT:
        set_price(emu, None, drop=True)
        return lambda: set_price(emu, KNOWN_PRICE)
    set_price(emu, vgu)
    return lambda: set_price(emu, KNOWN_PRICE)


@pytest.mark.parametrize("vgu", UNKNOWN_PRICES)
def test_an_unknown_price_is_null_in_every_event_and_no_threshold_is_crossed_on_it(
    emulator, tmp_path, monkeypatch, vgu
):
    """Issue 34, point 3, in the event source: with the location's price absent, null, negative or garbage, each
    ``vgpu.orphaned`` says its cost per hour and its cost so far are unknown (null, never 0 or negative), a
    ``vgpu.reclaimed`` says the saving is unknown, the cursor keeps null, and no ``cost.threshold`` comes however
    many orphans there are; once the price is known again, the threshold (armed all along) is crossed at once."""
    now = int(time.time())
    names = [naming.encode("gone", "m%d" % i, 0, created=now - 7300 + i) for i in range(3)]  # the oldest first
    ids = dict(zip(names, seed(emulator, *names), strict=True))
    known = unknown_price(emulator, monkeypatch, vgu)
    args = source_args(emulator, tmp_path, grace_period=0, cost_threshold=0.5)  # 3 orphans at 1.0/h: crossed

    async def scenario():
        run = Run(args)
        orphaned = await run.take(3)
        await run.quiet(emulator)  # the money at risk is not known: no cost.threshold
        with emulator.client() as client:
            await asyncio.to_thread(client.delete_vgpu, LOC, ids[names[0]], detach=True, permanently=True)
        reclaimed = await run.next()
        await run.quiet(emulator)
        kept = cursor_file(args)
        await asyncio.to_thread(known)
        crossed = await run.next()
        await run.stop()
        return orphaned, reclaimed, kept, crossed

    orphaned, reclaimed, kept, crossed = asyncio.run(scenario())
    assert [e["type"] for e in orphaned] == [orphans.ORPHANED] * 3
    assert [e["vgpu_name"] for e in orphaned] == names, "the oldest first"
    for event in orphaned:
        assert event["cost_per_hour"] is None and event["cost"] is None, event
        assert event["vgpu_seconds"] >= 0.0 and event["currency"] == "EUR", event
    assert reclaimed["type"] == orphans.RECLAIMED and reclaimed["reason"] == "released"
    assert reclaimed["vgpu_name"] == names[0] and reclaimed["orphaned_seq"] == orphaned[0]["seq"]
    assert reclaimed["cost_per_hour"] is None and reclaimed["saved_per_hour"] is None, reclaimed
    reported = kept["locations"][LOC]["reported"]
    assert sorted(reported) == sorted(ids[n] for n in names[1:]) and not kept["locations"][LOC]["above_threshold"]
    assert all(r["cost_per_hour"] is None and r["cost"] is None for r in reported.values()), reported
    assert crossed["type"] == orphans.THRESHOLD, "the threshold was armed: a known price crosses it"
    assert crossed["cost_per_hour"] == 2.0 and crossed["threshold"] == 0.5 and crossed["orphans"] == 2, crossed


def jwt(exp):
    part = base64.urlsafe_b64encode(json.dumps({"exp": exp}).encode()).decode().rstrip("=")
    return "eyJhbGciOiJIUzI1NiJ9.%s.c2lnbmF0dXJl" % part


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"api_token": "wrong-token-s3cret"}, "HTTP 401"),
        ({"api_token": jwt(int(time.time()) - 60)}, "expired"),
        ({"customer_id": "someone-else"}, "HTTP 403"),
    ],
    ids=["refused", "expired", "forbidden"],
)
def test_a_refused_or_expired_credential_stops_the_source_saying_so(emulator, tmp_path, change, said):
    seed(emulator, naming.encode("gone", "m0", 0, created=int(time.time()) - 7200))
    args = source_args(emulator, tmp_path, **change)

    async def scenario():
        return await asyncio.wait_for(source_main()(asyncio.Queue(maxsize=1), args), DEADLINE)

    with pytest.raises(WhiteskyError) as err:
        asyncio.run(scenario())
    message = str(err.value)
    assert "vgpu_events stops: the platform refused the credential" in message and said in message
    assert "api_token" in message and args["api_token"] not in message
    assert not os.path.exists(args["cursor"]), "nothing was delivered"
    assert plain(err.value) == [("vgpu_events.py", "main")]


def plain(exc):
    """The frames of the collection and its HTTP client that ``exc`` went through, as ansible-rulebook (1.1 and
    later) lists them after a source's error message; its message alone, raised afresh from ``main``, has one and
    nothing chained ("During handling of the above exception...")."""
    assert exc.__cause__ is None and exc.__suppress_context__, "a chained exception"
    return [
        (os.path.basename(f.filename), f.name)
        for f in traceback.extract_tb(exc.__traceback__)
        if "ansible_collections" in f.filename or "httpx" in f.filename
    ]


@pytest.mark.parametrize(
    ("token", "said"),
    [
        ("t\u00f6ken", "its character 2 is not ASCII"),
        ("abc\ndef", "its character 4 is white space or a control character"),
        ("Bearer abc", "its character 7 is white space or a control character"),
    ],
    ids=["not-ascii", "line-break", "bearer-prefix"],
)
def test_a_token_that_cannot_be_sent_stops_the_source_before_any_call_saying_so(emulator, tmp_path, token, said):
    """A token that no Authorization header can carry is refused with the arguments, in a sentence that names
    api_token and never shows the token; before, a non-ASCII one failed in the HTTP client (a stack of httpx's
    frames under ansible-rulebook) and one with a line break was retried as if the platform were down."""
    args = source_args(emulator, tmp_path, api_token=token)
    emulator.reset_stats()
    with pytest.raises(InputError) as err:
        asyncio.run(asyncio.wait_for(source_main()(asyncio.Queue(maxsize=1), args), DEADLINE))
    message = str(err.value)
    assert said in message and "api_token (or WHITESKY_API_TOKEN)" in message and token not in message
    assert plain(err.value) == [("vgpu_events.py", "main")]
    assert emulator.stats()["operations"] == {} and not os.path.exists(args["cursor"])


def test_run_alone_a_refused_token_ends_in_one_line_and_status_1(emulator, tmp_path):
    """``python3 vgpu_events.py LOCATION`` (the docs' way to run the source alone) ends, for a token the platform
    refuses and for one that cannot be sent, in one line on stderr that says why, and status 1: no traceback."""
    for token, said in (("wrong-token-s3cret", "HTTP 401"), ("t\u00f6ken", "is not a token that can be sent")):
        env = dict(
            os.environ,
            WHITESKY_API_URL=emulator.url,
            WHITESKY_API_TOKEN=token,
            WHITESKY_CUSTOMER_ID=CUSTOMER,
            XDG_STATE_HOME=str(tmp_path / "state"),
        )
        proc = subprocess.run(
            [sys.executable, os.path.join(SOURCE, "vgpu_events.py"), LOC, "0.1"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr and token not in proc.stderr, proc.stderr[-3000:]
        (last,) = proc.stderr.strip().splitlines()[-1:]
        assert last.startswith("vgpu_events.py: ") and said in last and "api_token" in last, last


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("grace", "grace_period"),
        ("Grace-Period", "grace_period"),
        ("intervall", "interval"),
        ("locaton", "location"),
        ("token", "api_token"),
        ("costthreshold", "cost_threshold"),
        ("zzz", None),
    ],
)
def test_an_unknown_argument_names_the_one_it_most_likely_meant(tmp_path, given, meant):
    env = {"WHITESKY_API_URL": "https://p.example", "WHITESKY_API_TOKEN": "t0ken", "WHITESKY_CUSTOMER_ID": "acme"}
    with pytest.raises(InputError) as err:
        events.settings({"location": LOC, given: 1}, env)
    message = str(err.value)
    assert message.startswith("%s takes no argument %r" % (events.SOURCE, given)), message
    assert ("did you mean %s?" % meant in message) if meant else "did you mean" not in message, message
    assert message.endswith("its arguments are " + ", ".join(sorted(events.ARGUMENTS))), message
    with pytest.raises(InputError) as err:
        events.settings({"location": LOC, "grace": 1, "intervall": 2}, env)
    assert "takes no arguments 'grace' (did you mean grace_period?), 'intervall' (did you mean interval?);" in str(
        err.value
    )


def test_what_the_platform_says_reaches_an_event_only_as_a_plain_token(tmp_path):
    """A rulebook hands an event to a playbook as extra vars, which Ansible renders: a platform string that is not a
    plain token (a template, a newline) is withheld, and a number that is not finite is null; the cursor keeps such
    an id (JSON escapes it) and reads it back."""
    name = naming.encode("gone", "m0", 0, created=1700000000)
    hostile = "{{ lookup('pipe', 'id') }}"
    found = orphans.Found(hostile, name, naming.decode(name), "ATTACHED\n", 7, "{% raw %}x")
    reading = orphans.Reading(
        LOC, 1700007200.0, frozenset([hostile]), (found,), {hostile: (1.0, float("nan"))}, 1.0, "{{ c }}"
    )
    place = orphans.Place()
    (step,) = orphans.plan(place, reading, 900, None)
    event = step.event
    assert (
        event["vgpu_id"] is None and event["status"] is None and event["vm_name"] is None and event["currency"] is None
    )
    assert sorted(event["withheld"]) == ["currency", "status", "vgpu_id", "vm_name"]
    assert event["cost"] is None and event["vgpu_seconds"] == 1.0 and event["vm_id"] == 7 and event["age"] == 7200
    assert "{{" not in json.dumps(event) and "{%" not in json.dumps(event)
    assert len(orphans.plan(place, reading._replace(orphans=(found, found)), 900, None)) == 1, "one event per id"
    cursor = cursors.Cursor(str(tmp_path / "c.json"), "http://127.0.0.1:9/api/1", CUSTOMER)
    cursor.record(LOC, step, 1)
    cursor.save()
    back = cursors.load(cursor.path, cursor.api_url, CUSTOMER)
    assert (
        back.locations[LOC].reported[hostile].vgpu_name == name
        and back.locations[LOC].reported[hostile].currency is None
    )


def valid_cursor(**changes):
    doc = {
        "kind": cursors.CURSOR_KIND,
        "version": cursors.CURSOR_VERSION,
        "api_url": "http://127.0.0.1:9/api/1",
        "customer_id": CUSTOMER,
        "seq": 1,
        "pending": [],
        "locations": {
            LOC: {
                "above_threshold": False,
                "reported": {
                    "v-1": {
                        "vgpu_name": naming.encode("gone", "m0", 0, created=1700000000),
                        "seq": 1,
                        "orphaned_at": 1.0,
                        "cost_per_hour": 1.0,
                        "currency": "EUR",
                        "cost": 0.5,
                        "last_seen": 1.0,
                    }
                },
            }
        },
    }
    doc.update(changes)
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{not json", "it is not JSON"),
        ("", "it is not JSON"),
        ('{"kind": "another tool", "entries": []}', "it is not a whitesky.capvco.vgpu_events cursor"),
        (valid_cursor(version=1), "its version is 1"),
        (valid_cursor(customer_id="someone-else"), "the cursor of customer 'someone-else'"),
        (valid_cursor(seq="1"), "corrupt: the cursor.seq is missing or not int"),
        (valid_cursor(seq=0), "corrupt: locations['be-gen-1'].reported['v-1'].seq is beyond the cursor's seq"),
        (valid_cursor(extra=1), "corrupt: the cursor has the keys"),
        (valid_cursor(pending=[{}, {}]), "corrupt: the cursor's pending events are not a list of at most its seq"),
        (valid_cursor(pending={}), "corrupt: the cursor's pending events are not a list"),
        (
            valid_cursor().replace("capvco.gone", "other.gone"),
            "corrupt: locations['be-gen-1'].reported['v-1'].vgpu_name is not the name of an owned reservation",
        ),
        (valid_cursor().replace('"cost":0.5', '"cost":NaN').replace('"cost": 0.5', '"cost": NaN'), "not JSON"),
    ],
    ids=[
        "garbage",
        "empty",
        "foreign",
        "version",
        "customer",
        "type",
        "seq",
        "keys",
        "pending",
        "v3-object",
        "name",
        "nan",
    ],
)
def test_a_corrupt_or_foreign_cursor_is_refused_naming_it_and_left_alone(tmp_path, content, said):
    args = source_args(None, tmp_path)
    os.makedirs(os.path.dirname(args["cursor"]))
    with open(args["cursor"], "w", encoding="utf-8") as fh:
        fh.write(content)
    with pytest.raises(InputError) as err:
        asyncio.run(asyncio.wait_for(source_main()(asyncio.Queue(maxsize=1), args), DEADLINE))
    assert "refusing the cursor file %s: " % args["cursor"] in str(err.value) and said in str(err.value)
    assert read_text(args["cursor"]) == content, "never reset"


def test_the_valid_cursor_sample_loads_and_a_cursor_in_use_is_refused(tmp_path):
    args = source_args(None, tmp_path)
    os.makedirs(os.path.dirname(args["cursor"]))
    with open(args["cursor"], "w", encoding="utf-8") as fh:
        fh.write(valid_cursor())
    cursor = cursors.load(args["cursor"], "http://user:pw@127.0.0.1:9/", CUSTOMER)  # the address as the cursor has it
    assert cursor.seq == 1 and cursor.locations[LOC].reported["v-1"].cost == 0.5 and cursor.pending == []
    # a version 2 cursor (one pending event, or null) reads as a list of at most one
    event = dict.fromkeys(orphans.EVENT_KEYS[orphans.RECLAIMED])
    event.update(type=orphans.RECLAIMED, seq=1, vgpu_id="v-1", vgpu_name=naming.encode("gone", "m0", 0, created=1))
    for pending, expected in ((None, []), (event, [event])):
        with open(args["cursor"], "w", encoding="utf-8") as fh:
            fh.write(valid_cursor(version=2, pending=pending))
        assert cursors.load(args["cursor"], "http://127.0.0.1:9/", CUSTOMER).pending == expected
    with open(args["cursor"], "w", encoding="utf-8") as fh:
        fh.write(valid_cursor())
    with cursors.locked(args["cursor"]), pytest.raises(InputError, match="is in use by another"):
        asyncio.run(asyncio.wait_for(source_main()(asyncio.Queue(maxsize=1), args), DEADLINE))


def test_platform_errors_are_logged_scrubbed_and_polling_goes_on(emulator, tmp_path, caplog):
    name = naming.encode("gone", "m0", 0, created=int(time.time()) - 7200)
    seed(emulator, name)
    emulator.faults(fail_next={LISTING: [500, 3]})
    args = source_args(emulator, tmp_path, max_backoff=0.4)

    async def scenario():
        run = Run(args)
        event = await run.next()
        await run.stop()
        return event

    with caplog.at_level(logging.WARNING, logger="whitesky.capvco.vgpu_events"):
        event = asyncio.run(scenario())
    assert event["vgpu_name"] == name and event["seq"] == 1
    failed = [r.getMessage() for r in caplog.records if "reading location %s failed" % LOC in r.getMessage()]
    assert len(failed) == 3 and all("HTTP 500" in m for m in failed)
    assert any("next poll in 0.4s (3 failed poll(s) in a row)" in r.getMessage() for r in caplog.records)
    assert not any(emulator.token in r.getMessage() for r in caplog.records)


def test_arguments_are_checked_and_the_connection_comes_from_the_environment(tmp_path):
    env = {
        "WHITESKY_API_URL": "https://portal.example/api/1",
        "WHITESKY_API_TOKEN": "t0ken",
        "WHITESKY_CUSTOMER_ID": "acme",
        "XDG_STATE_HOME": str(tmp_path),
    }
    got = events.settings({"location": LOC, "eda_feedback_queue": object()}, env)
    assert (got.api_url, got.api_token, got.customer_id, got.locations) == (
        env["WHITESKY_API_URL"],
        "t0ken",
        "acme",
        (LOC,),
    )
    assert got.grace_period == events.DEFAULT_GRACE_PERIOD and got.interval == 60.0 and got.cost_threshold is None
    assert got.cursor.startswith(os.path.join(str(tmp_path), "whitesky-capvco", "vgpu_events-acme-"))
    assert "t0ken" not in repr(got)
    typed = events.settings(
        {"locations": [LOC, "nl-ams-1"], "interval": "5", "grace_period": 0, "cost_threshold": "2"}, env
    )
    assert typed.locations == (LOC, "nl-ams-1") and typed.interval == 5.0 and typed.cost_threshold == 2.0
    for args, said in [
        ({"location": LOC, "grace": 1}, "takes no argument 'grace' (did you mean grace_period?)"),
        ({}, "give location (one platform location) or locations"),
        ({"location": LOC, "locations": [LOC]}, "not both"),
        ({"locations": [LOC, LOC]}, "names a location twice"),
        ({"location": "../x"}, "invalid location"),
        ({"location": LOC, "interval": 0}, "interval must be a number of more than 0.0"),
        ({"location": LOC, "cost_threshold": True}, "cost_threshold must be a number"),
        ({"location": LOC, "validate_certs": "maybe"}, "validate_certs must be true or false"),
    ]:
        with pytest.raises(InputError, match=None) as err:
            events.settings(args, env)
        assert said in str(err.value), (args, str(err.value))
    with pytest.raises(InputError) as err:
        events.settings({"location": LOC}, {"WHITESKY_API_URL": "https://p.example"})
    assert "api_token, customer_id" in str(err.value) and "WHITESKY_API_TOKEN, WHITESKY_CUSTOMER_ID" in str(err.value)


def test_the_defaults_agree_with_the_orphan_sweep():
    assert inspect.signature(sweep.reclaim).parameters["grace_period"].default == events.DEFAULT_GRACE_PERIOD
    playbook = yaml.safe_load(read_text(os.path.join(ROOT, "playbooks", "gpu_orphans.yml")))
    assert playbook[0]["vars"]["grace_period"] == events.DEFAULT_GRACE_PERIOD


def test_the_sample_rulebook_runs_this_source_and_answers_its_events():
    (ruleset,) = yaml.safe_load(read_text(RULEBOOK))
    (source,) = ruleset["sources"]
    assert events.SOURCE in source and set(source[events.SOURCE]) <= events.ARGUMENTS
    conditions = [rule["condition"] for rule in ruleset["rules"]]
    for kind in (orphans.ORPHANED, orphans.RECLAIMED, orphans.THRESHOLD):
        assert any('event.type == "%s"' % kind in c for c in conditions), kind
    (reclaim_rule,) = [r for r in ruleset["rules"] if "run_playbook" in r["action"]]
    assert "vars.vgpu_reclaim == true" in reclaim_rule["condition"]
    assert reclaim_rule["action"]["run_playbook"]["name"] == "whitesky.capvco.gpu_orphans"
    assert reclaim_rule["action"]["run_playbook"]["extra_vars"]["reclaim"] is True


def test_the_documented_set_up_runs_the_rules_playbook_with_ansible_core_beside_it(emulator, tmp_path):
    """docs/gpus.md ("Running the rulebook"): ansible-core is installed beside ansible-rulebook, and the inventory
    it gives (taken from the page) runs the reclaim rule's playbook, with the rule's extra vars, on localhost with
    the Python that has the collection's requirements: the escaped reservation is released."""
    text = read_text(os.path.join(ROOT, "docs", "gpus.md"))
    section = text.split("### Running the rulebook", 1)[1].split("\n### ", 1)[0]
    installs = [line for line in section.splitlines() if line.startswith("pip install ")]
    assert any("ansible-rulebook" in line and "ansible-core" in line for line in installs), installs
    inventory = section.split("cat > inventory.yml <<'INVENTORY'\n", 1)[1].split("\nINVENTORY\n", 1)[0]
    host = yaml.safe_load(inventory)["all"]["hosts"]["localhost"]
    assert host == {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    (tmp_path / "inventory.yml").write_text(inventory + "\n")
    (vgpu_id,) = seed(emulator, naming.encode("gone", "m0", 0, created=int(time.time()) - 7200))
    (ruleset,) = yaml.safe_load(read_text(RULEBOOK))
    (rule,) = [r for r in ruleset["rules"] if "run_playbook" in r["action"]]
    extra_vars = dict(rule["action"]["run_playbook"]["extra_vars"], location=LOC, grace_period=900)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "WHITESKY_"))}
    env.update(emulator.env(), ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(tmp_path / "inventory.yml")]
        + [rule["action"]["run_playbook"]["name"], "-e", json.dumps(extra_vars)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp_path),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    with emulator.client() as client:
        assert vgpu_id not in {v["vgpu_id"] for v in client.vgpus(LOC, include_deleted=True)}


#: Where the child source dies, the Nth time it gets there (tests/eda_crash_driver.py): every point between a
#: reading and the cursor's write, early and late in a poll.
CRASHES = [("put", 3), ("saved", 2), ("put", 1), ("read", 1), ("saved", 1), ("settled", 1), ("read", 2), ("put", 2)]


def test_a_source_killed_at_every_point_loses_no_event_and_never_reuses_a_seq(emulator, tmp_path):
    """12 orphans; the source (a child process) is killed at each point between reading and the cursor's write,
    and 2 reservations are released while it is down each time. Across all the runs: every seq names one event
    (a repeat is the same event with the same seq), the seqs run 1..N without a gap, every reservation gets its
    ``vgpu.orphaned`` under one seq, and every one released after its ``vgpu.orphaned`` gets its
    ``vgpu.reclaimed``."""
    import subprocess
    import sys

    now = int(time.time())
    names = [naming.encode("gone", "m%02d" % i, 0, created=now - 7200 - i) for i in range(12)]
    ids = dict(zip(seed(emulator, *names), names, strict=True))
    args = source_args(emulator, tmp_path, grace_period=900, interval=0.05)
    driver = os.path.join(ROOT, "tests", "eda_crash_driver.py")
    got, released, live = [], [], list(ids)

    def run(point, nth, quiet=1.5):
        proc = subprocess.run(
            [sys.executable, driver, json.dumps(args), point, str(nth), str(quiet)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode in (0, 137), proc.stderr[-3000:]
        got.extend(json.loads(line) for line in proc.stdout.splitlines() if line.strip())
        return proc.returncode

    killed = set()
    with emulator.client() as client:
        for point, nth in CRASHES:
            if run(point, nth) == 137:  # a late point may not be reached once few events are left
                killed.add(point)
            for vgpu_id in live[:2]:  # released while the source is down
                client.delete_vgpu(LOC, vgpu_id, detach=True, permanently=True)
                released.append(vgpu_id)
            live = live[2:]
    assert run("never", 0, quiet=2.0) == 0
    by_seq = {}
    for event in got:
        by_seq.setdefault(event["seq"], []).append(event)
    assert all(all(e == same[0] for e in same) for same in by_seq.values()), "a seq names two events"
    assert sorted(by_seq) == list(range(1, max(by_seq) + 1)), "a gap in the seqs: an event was lost"
    orphaned = {}
    for event in got:
        if event["type"] == orphans.ORPHANED:
            orphaned.setdefault(event["vgpu_id"], set()).add(event["seq"])
    assert all(len(seqs) == 1 for seqs in orphaned.values()), "a repeated vgpu.orphaned came with a new seq"
    reclaimed = {e["vgpu_id"] for e in got if e["type"] == orphans.RECLAIMED and e["reason"] == "released"}
    never = sorted(ids[v] for v in released if v in orphaned and v not in reclaimed)
    assert not never, "vgpu.orphaned came, vgpu.reclaimed never did: %s" % never
    # issue 46, point 16: an orphan the source had read, released while it was down, still gets both events (the
    # reading's events are written down before the first waits on the queue); it was 5 of 12 that got none
    unseen = sorted(ids[v] for v in released if v not in orphaned)
    assert not unseen, "released while the source was down, never reported: %s" % unseen
    assert set(live) <= set(orphaned), "a live orphan was never reported"
    assert killed == {"read", "saved", "put", "settled"}, "killed at %s only" % sorted(killed)
    print("eda crash figures:", {"events": len(got), "distinct": len(by_seq), "repeats": len(got) - len(by_seq)})


def test_every_event_has_the_keys_a_pending_event_is_checked_against(emulator, tmp_path):
    """The cursor's pending event is refused unless it has exactly its type's keys and names owned reservations:
    the keys are those the events are built with."""
    now = int(time.time())
    gone = naming.encode("gone", "m0", 0, created=now - 7200)
    (vgpu_id,) = seed(emulator, gone)
    with emulator.client() as client:
        reading = orphans.read(client, LOC)
        place = orphans.Place()
        (orphaned,) = orphans.plan(place, reading, 900, 0.5)[:1]
        threshold = orphans.plan(place, reading, 900, 0.5)[-1]
        assert set(dict(orphaned.event, seq=1)) == orphans.EVENT_KEYS[orphans.ORPHANED]
        assert set(dict(threshold.event, seq=1)) == orphans.EVENT_KEYS[orphans.THRESHOLD]
        place.reported[vgpu_id] = orphaned.report[1]
        client.delete_vgpu(LOC, vgpu_id, detach=True, permanently=True)
        (reclaimed,) = orphans.plan(place, orphans.read(client, LOC), 900, None)
        assert set(dict(reclaimed.event, seq=1)) == orphans.EVENT_KEYS[orphans.RECLAIMED]
    args = source_args(None, tmp_path)
    os.makedirs(os.path.dirname(args["cursor"]))
    for change, said in (
        ({"extra": "x"}, "has the keys"),
        ({"vgpu_name": "handmade"}, "names a reservation that is not an owned one"),
        ({"type": orphans.THRESHOLD}, "has the keys"),
    ):
        pending = dict(orphaned.event, seq=1, **change)
        with open(args["cursor"], "w", encoding="utf-8") as fh:
            fh.write(valid_cursor(pending=[pending]))
        with pytest.raises(InputError, match=said):
            asyncio.run(asyncio.wait_for(source_main()(asyncio.Queue(maxsize=1), args), DEADLINE))
