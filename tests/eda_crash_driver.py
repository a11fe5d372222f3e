"""Run the event source as ansible-rulebook does (``main(queue, args)``, a queue of one slot, a consumer that takes
each event), printing each event it takes as a JSON line, and die (``os._exit``, as a SIGKILL would: no cleanup) at
one point of the source's work: ``tests/integration/test_eda_source.py`` drives it.

    python tests/eda_crash_driver.py ARGS_JSON POINT N

POINT is where to die, the Nth time it is reached: ``read`` (a location was read, nothing planned or written),
``saved`` (a reading's events were written down, none put on the queue), ``put`` (an event is on the queue: taken,
not yet followed by a write), ``settled`` (a reading's costs were written), or ``never``; ``quiet`` seconds after the
last event the driver exits 0 by itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
import time

from ansible_collections.whitesky.capvco.plugins.module_utils.faces import cursor as cursors
from ansible_collections.whitesky.capvco.plugins.module_utils.reclaim import events as orphans

SOURCE = os.path.join(
    os.path.dirname(cursors.__file__), "..", "..", "..", "extensions", "eda", "plugins", "event_source"
)


class Queue(asyncio.Queue):
    """ansible-rulebook's queue of one slot; ``at("put")`` once the consumer has had a moment to take the event."""

    def __init__(self, at) -> None:
        super().__init__(maxsize=1)
        self.at = at

    async def put(self, item):
        await super().put(item)
        await asyncio.sleep(0.01)  # the consumer takes it
        self.at("put")


async def consume(source, args, quiet, at, polls) -> None:
    """Run the source; print each event the consumer takes; stop ``quiet`` seconds after the last event, counted
    once a whole poll is done (``polls()``, the readings started, is 2: on a loaded machine the first poll may
    take longer than ``quiet``); at the latest after 90 s."""
    queue = Queue(at)
    task = asyncio.ensure_future(source(queue, args))
    last = deadline = time.monotonic()
    deadline += 90
    while (polls() < 2 or time.monotonic() - last < quiet) and time.monotonic() < deadline:
        try:
            event = await asyncio.wait_for(queue.get(), 0.05)
        except asyncio.TimeoutError:
            if task.done():
                task.result()
            continue
        print(json.dumps(event, sort_keys=True), flush=True)
        last = time.monotonic()
    task.cancel()


def main() -> int:
    args, point, nth = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    quiet = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
    reached = {"read": 0, "saved": 0, "put": 0, "settled": 0}

    def at(name: str) -> None:
        reached[name] += 1
        if name == point and reached[name] == nth:
            sys.stdout.flush()
            os._exit(137)

    real_plan, real_save = orphans.plan, cursors.Cursor.save
    real_prepare = getattr(cursors.Cursor, "prepare", None)

    def plan(*a, **kw):
        at("read")
        return real_plan(*a, **kw)

    def prepare(self, *a, **kw):
        events = real_prepare(self, *a, **kw)
        if events:
            at("saved")
        return events

    def save(self):
        real_save(self)
        if not getattr(self, "pending", None):
            at("settled")

    orphans.plan, cursors.Cursor.save = plan, save
    if real_prepare is not None:
        cursors.Cursor.prepare = prepare
    source = runpy.run_path(os.path.join(SOURCE, "vgpu_events.py"))["main"]

    asyncio.run(consume(source, args, quiet, at, lambda: reached["read"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
