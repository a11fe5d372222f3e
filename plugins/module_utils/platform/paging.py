# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Paginated listings (``{"data": [...], "pagination": {"count": N}}``, paged by ``limit`` and ``start_after``):
every item, in order, each page asked for with the call it is given (plain Python, no Ansible).

Paging goes on until the platform says it is done: ``pagination.count`` items seen, or an empty page; never because
a page was shorter than asked (a platform may page smaller).  Once the first page shows the platform's page size and
the count, the pages planned from them are fetched up to ``parallel`` at a time; a page that comes back short is
filled in.  Every page keeps the deadline of the operation the listing runs in, in whichever thread it is fetched.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterator
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.platform.deadline import Deadlines
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.errors import BadAnswer
from ansible_collections.whitesky.capvco.plugins.module_utils.platform.parallel import Beside

#: The largest page the client asks for; the emulator serves up to this.
PAGE_LIMIT = 500
#: The most pages of one listing planned from its first page's count (a count beyond is fetched page by page, and
#: a listing ends at its first empty page whatever its count said).
MAX_PLANNED_PAGES = 10000


def _page(operation: str, got: Any) -> tuple[list[Any], int | None]:
    """``(items, count)`` of one page of a listing (``{"data": [...], "pagination": {"count": N}}``); a count that
    is not a number of items counts as none."""
    if got is None:
        return [], None
    if not isinstance(got, dict):
        raise BadAnswer("the platform's answer to %s is not an object (a page of a listing)" % operation)
    data = got.get("data")
    if data is None:
        data = []
    if not isinstance(data, list):
        raise BadAnswer("the platform's answer to %s: data is not a list" % operation)
    pagination = got.get("pagination")
    count = pagination.get("count") if isinstance(pagination, dict) else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        count = None
    return data, count


def _planned(size: int, count: int | None) -> range:
    """The starts of the pages after the first (``size`` items) that a listing of ``count`` items has, at most
    :data:`MAX_PLANNED_PAGES` of them (none without a count)."""
    return range(size, min(count, size * MAX_PLANNED_PAGES), size) if count is not None else range(0)


def _windowed(
    pool: Beside, page: Callable[[int], tuple[list[Any], int | None]], planned: range, parallel: int
) -> Iterator[tuple[int, list[Any]]]:
    """``(start, items)`` of the planned pages in order, at most ``parallel`` of them asked for ahead (the first
    ``parallel`` at once, before the first is handed on), until the first empty page: the listing ends there,
    whatever its count said."""
    window = deque(pool.start(page, start) for start in planned[:parallel])  # asked for now, not when first read

    def pages() -> Iterator[tuple[int, list[Any]]]:
        for i, start in enumerate(planned):
            items, _seen = window.popleft().result()
            if not items:
                return
            if i + parallel < len(planned):
                window.append(pool.start(page, planned[i + parallel]))
            yield start, items

    return pages()


def paginate(
    call: Callable[..., Any],
    deadlines: Deadlines,
    operation: str,
    /,
    query: dict[str, Any] | None = None,
    limit: int = PAGE_LIMIT,
    parallel: int = 32,
    **path_params: Any,
) -> Iterator[Any]:
    """Yield every item of the paginated listing ``operation``; each page is ``call(operation, query=...,
    **path_params)`` (``WhiteskyClient.call``), with ``limit`` and ``start_after`` added to ``query``, fetched under
    the deadline ``deadlines`` gives the listing's operation (see the module's documentation)."""
    inherited = deadlines.inherited()

    def page(start: int) -> tuple[list[Any], int | None]:
        with deadlines.within(inherited):
            got = call(operation, query=dict(query or {}, limit=limit, start_after=start), **path_params)
        return _page(operation, got)

    data, count = page(0)
    pos, size = len(data), len(data)
    if not data:
        return

    def walk(stop: int | None) -> Generator[Any, None, bool]:
        """Fetch page by page from ``pos`` until ``stop`` (or the count, or an empty page)."""
        nonlocal pos, count
        while (stop is None or pos < stop) and (count is None or pos < count):
            items, seen = page(pos)
            if seen is not None:
                count = seen
            if not items:
                return False
            if stop is not None:
                items = items[: stop - pos]
            pos += len(items)
            yield from items
        return True

    planned = _planned(size, count)
    if not planned:
        yield from data
    else:
        # at most ``parallel`` pages in flight or waiting: memory stays bounded by the window, not the listing;
        # they are asked for before the first page is handed on, so they are on their way while it is read
        with Beside(min(parallel, len(planned))) as pool:
            pages = _windowed(pool, page, planned, parallel)
            yield from data
            for start, items in pages:
                if pos < start:  # a page before this one came back short: fill the gap
                    yield from walk(start)
                skip = max(0, pos - start)  # what an earlier fill already gave
                yield from items[skip:]
                pos = max(pos, start + len(items))
    yield from walk(None)
