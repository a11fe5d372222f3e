# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""whitesky.capvco.vgpu_events: an ansible-rulebook event source for vGPU reservations that escaped (orphans).

ansible-rulebook loads this file with ``runpy.run_path`` and awaits ``main(queue, args)``.  The logic is the
collection's core: the arguments in ``plugins/module_utils/faces/events.py``, the cursor in ``faces/cursor.py``, the
reading and the events in ``reclaim/events.py`` (with ``sweep``, ``billing`` and the client); see there and
docs/gpus.md ("Events") for the events, the cursor and the delivery guarantee.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

DOCUMENTATION = r"""
---
short_description: Events for vGPU reservations that escaped, and the money they cost
description:
  - Polls each location's vGPU reservations on whitesky.cloud and sends C(vgpu.orphaned) once per reservation
    whose owner machine is gone, after the grace period; C(vgpu.reclaimed) once when such a reservation is
    released (or its machine is back); C(cost.threshold) once each time the money at risk per hour in a location
    rises above O(cost_threshold).
  - Each event is written down in a cursor file (its seq, what it changes, the event itself) before it is put on
    the queue, so a source stopped or killed anywhere loses no event; on restart it delivers the written-down event
    again first, with the same seq; a seq never names two events.
  - The connection arguments fall back to the environment variables the collection's modules read.
options:
  api_url:
    description: The platform's API address. Default from E(WHITESKY_API_URL).
    type: str
  api_token:
    description: The API token (a JWT). Default from E(WHITESKY_API_TOKEN). Never logged.
    type: str
  customer_id:
    description: The customer whose reservations to watch. Default from E(WHITESKY_CUSTOMER_ID).
    type: str
  validate_certs:
    description: Verify the API's TLS certificate. Default from E(WHITESKY_VALIDATE_CERTS), else true.
    type: bool
    default: true
  timeout:
    description: Seconds for one API call. Default from E(WHITESKY_TIMEOUT), else 30.
    type: float
    default: 30.0
  location:
    description: The location to watch (or O(locations)).
    type: str
  locations:
    description: The locations to watch, each polled in turn (or O(location)).
    type: list
    elements: str
  interval:
    description: Seconds between polls.
    type: float
    default: 60
  grace_period:
    description: Seconds a reservation must be old before it is reported (the orphan sweep's default).
    type: float
    default: 900
  cost_threshold:
    description:
      - Money per hour at risk in a location above which C(cost.threshold) is sent (the location's escaped
        orphans times one vGPU's hourly price); no such event when unset.
    type: float
  cursor:
    description:
      - The cursor file (JSON). Default
        C($XDG_STATE_HOME/whitesky-capvco/vgpu_events-<customer_id>-<hash of api_url>.json), with
        C(~/.local/state) for an unset E(XDG_STATE_HOME). One source per cursor (a lock file beside it).
    type: str
  max_backoff:
    description: The longest wait between polls while the platform fails (unless O(interval) is longer).
    type: float
    default: 300
"""

EXAMPLES = r"""
- name: Watch for leaking vGPU reservations
  hosts: localhost
  sources:
    - whitesky.capvco.vgpu_events:
        location: be-gen-1
        interval: 60
        grace_period: 900
        cost_threshold: 10
  rules:
    - name: Report
      condition: event.type == "vgpu.orphaned"
      action:
        print_event:
"""

_MODULE_UTILS = "ansible_collections.whitesky.capvco.plugins.module_utils"
#: Where this file lies in an installed collection, from ``ansible_collections`` down to its folder.
_INSTALLED = ("ansible_collections", "whitesky", "capvco", "extensions", "eda", "plugins", "event_source")


def _find_the_collection() -> None:
    """Make ``ansible_collections.whitesky.capvco`` importable: ansible-rulebook runs this file by its path
    (``runpy.run_path``) without Ansible's collection loader, so the folder that holds this collection's
    ``ansible_collections`` goes first on ``sys.path`` (a plain namespace package then, as in Ansible's own
    ``PYTHONPATH`` layout).  Outside that layout (a checkout) the import must already work (PYTHONPATH)."""
    parts = os.path.abspath(__file__).split(os.sep)  # never realpath: a linked collection is found by its link
    if tuple(parts[-8:-1]) == _INSTALLED:
        root = os.sep.join(parts[:-8]) or os.sep
        if root not in sys.path:
            sys.path.insert(0, root)


_find_the_collection()
try:
    from ansible_collections.whitesky.capvco.plugins.module_utils.faces import cursor as cursors  # noqa: E402
    from ansible_collections.whitesky.capvco.plugins.module_utils.faces import events  # noqa: E402
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.client import WhiteskyClient  # noqa: E402
    from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import (  # noqa: E402
        ApiError,
        InputError,
        WhiteskyError,
    )
    from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import events as orphans  # noqa: E402
except ImportError as exc:  # pragma: no cover - what the user sees when the collection is not installed whole
    raise ImportError(
        "whitesky.capvco.vgpu_events (%s) cannot import its collection's core, %s (%s). Run it from the installed "
        "collection (ansible-galaxy collection install whitesky.capvco; the source whitesky.capvco.vgpu_events), "
        "or put the folder that holds ansible_collections/whitesky/capvco on PYTHONPATH"
        % (__file__, _MODULE_UTILS, exc)
    ) from exc

if TYPE_CHECKING:
    from collections.abc import Callable

LOG = logging.getLogger("whitesky.capvco.vgpu_events")
#: Statuses that stop the source: the credential is refused, and asking again will not change that.
AUTH_STATUSES = (401, 403)


class _Platform:
    """The blocking client, used from one worker thread (one call at a time), closed in that thread after the call
    in flight when the source stops (a cancelled ``await`` cannot stop a thread)."""

    def __init__(self, client: WhiteskyClient) -> None:
        self.client = client
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vgpu_events")

    async def call(self, func: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, func, *args)

    def close(self) -> None:
        self.pool.submit(self.client.close)
        self.pool.shutdown(wait=False)


def _stopped(exc: ApiError, where: str, redact: Callable[[object], str]) -> WhiteskyError:
    return WhiteskyError(
        "%s stops: the platform refused the credential %s (HTTP %s): %s"
        % (events.SOURCE, where, exc.status, redact(exc))
    )


async def _connect(config: events.Settings) -> _Platform:
    try:
        client = await asyncio.to_thread(WhiteskyClient.connect, config)
    except ApiError as exc:  # an expired JWT is refused before any call
        if exc.status in AUTH_STATUSES:
            raise _stopped(exc, "before the first call", config.redact) from None
        raise
    for warning in client.transport.warnings:
        LOG.warning("%s: %s", events.SOURCE, client.transport.redact(warning))
    return _Platform(client)


async def _deliver(
    queue: asyncio.Queue[Any], cursor: cursors.Cursor, reading: orphans.Reading, config: events.Settings
) -> int:
    """Put the reading's events on the queue, one at a time, all written down in the cursor before the first is put
    (``Cursor.prepare``: a source killed after that delivers the rest again on restart, with their seqs, however long
    the queue held it); then the costs."""
    place = cursor.place(reading.location)
    steps = orphans.plan(place, reading, config.grace_period, config.cost_threshold)
    for event in cursor.prepare(reading.location, steps):
        await queue.put(event)
        cursor.delivered()
        await asyncio.sleep(0)
    orphans.settle(place, reading, config.grace_period, config.cost_threshold)
    cursor.save()
    return len(steps)


async def _poll(
    queue: asyncio.Queue[Any], platform: _Platform, cursor: cursors.Cursor, config: events.Settings
) -> bool:
    """One poll of every location; False when a location could not be read (logged; the others still are)."""
    ok = True
    for location in config.locations:
        try:
            reading = await platform.call(orphans.read, platform.client, location)
        except ApiError as exc:
            if exc.status in AUTH_STATUSES:
                raise _stopped(exc, "reading location %s" % location, platform.client.transport.redact) from None
            ok = False
            LOG.warning(
                "%s: reading location %s failed: %s", events.SOURCE, location, platform.client.transport.redact(exc)
            )
            continue
        except WhiteskyError as exc:  # an answer the core refused (BadAnswer), or one that does not add up
            ok = False
            LOG.warning(
                "%s: reading location %s failed: %s", events.SOURCE, location, platform.client.transport.redact(exc)
            )
            continue
        await _deliver(queue, cursor, reading, config)
    return ok


def _plain(exc: WhiteskyError) -> WhiteskyError:
    """``exc`` as the one line a person reads: its message, raised afresh from ``main`` (no chained exception, no
    frames of the core), of its kind (:class:`InputError` for what the user gave, else :class:`WhiteskyError`).
    ansible-rulebook logs a source's exception by its class name and message, and then each frame it went
    through."""
    kind = InputError if isinstance(exc, InputError) else WhiteskyError
    return kind(str(exc), exc.details)


async def main(queue: asyncio.Queue[Any], args: dict[str, Any]) -> None:
    """Poll every ``interval`` seconds until cancelled; an error in the arguments or the cursor, or a refused
    credential, stops the source with an exception that says what to fix (its message only: no traceback of the
    core, nothing chained)."""
    try:
        await _watch(queue, args)
    except WhiteskyError as exc:
        raise _plain(exc) from None


async def _watch(queue: asyncio.Queue[Any], args: dict[str, Any]) -> None:
    config = events.settings(args, os.environ)
    with cursors.locked(config.cursor):
        cursor = cursors.load(config.cursor, config.api_url, config.customer_id)
        while cursor.pending:  # written down, maybe not delivered, when the source last stopped
            await queue.put(dict(cursor.pending[0]))
            cursor.delivered()
        platform = await _connect(config)
        LOG.info(
            "%s: watching %s every %ss (grace period %ss), cursor %s at event %d",
            events.SOURCE,
            ", ".join(config.locations),
            config.interval,
            config.grace_period,
            config.cursor,
            cursor.seq,
        )
        try:
            failures = 0
            while True:
                failures = 0 if await _poll(queue, platform, cursor, config) else failures + 1
                delay = events.next_delay(config.interval, failures, config.max_backoff)
                if failures:
                    LOG.warning("%s: next poll in %.1fs (%d failed poll(s) in a row)", events.SOURCE, delay, failures)
                await asyncio.sleep(delay)
        finally:
            platform.close()


if __name__ == "__main__":
    # Run without ansible-rulebook: print each event.  The connection from WHITESKY_API_URL, WHITESKY_API_TOKEN and
    # WHITESKY_CUSTOMER_ID; python3 vgpu_events.py LOCATION [INTERVAL]

    class MockQueue(asyncio.Queue[Any]):
        async def put(self, event: Any) -> None:
            print(event)  # noqa: T201

    logging.basicConfig(level=logging.INFO)
    mock_arguments = {
        "location": sys.argv[1] if len(sys.argv) > 1 else os.environ.get("WHITESKY_LOCATION", "be-gen-1"),
        "interval": sys.argv[2] if len(sys.argv) > 2 else 10,
    }
    try:
        asyncio.run(main(MockQueue(), mock_arguments))
    except KeyboardInterrupt:
        pass
    except WhiteskyError as exc:  # what to fix, in one line on stderr, and exit status 1
        sys.exit("%s: %s" % (os.path.basename(__file__), exc))
