"""The positions of vGPU listings, kept between pages: no SQL here.

A listing (a customer's reservations in a location, filtered by ``only_deleted`` and ``include_deleted``) is read
once as the ordered rowids of its reservations; a page is then a slice, so reading a whole listing page by page
costs O(listing), not O(listing x pages) as OFFSET would.  What a listing holds changes only when a reservation is
made, deleted (to the recycle bin or permanently) or restored: those writes call :meth:`ListingCache.invalidate`
for the reservation's customer and location.  Attaching, detaching or renaming changes no listing's members (a
page reads its rows afresh).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class ListingKey(NamedTuple):
    customer_id: str
    location: str
    only_deleted: bool
    include_deleted: bool


class ListingCache:
    """The rowids of listings read since their customer and location last changed."""

    #: The most listings kept; one more and all are forgotten (a cache, not a record).
    MAX_LISTINGS = 64

    def __init__(self) -> None:
        self._rowids: dict[ListingKey, list[int]] = {}

    def rowids(self, key: ListingKey, read: Callable[[], list[int]]) -> list[int]:
        """The listing's rowids in order: cached, or ``read()`` now and kept."""
        cached = self._rowids.get(key)
        if cached is None:
            if len(self._rowids) > self.MAX_LISTINGS:
                self._rowids.clear()
            cached = self._rowids[key] = read()
        return cached

    def invalidate(self, customer_id: str, location: str) -> None:
        """Forget every listing of the customer's reservations in the location."""
        for key in [k for k in self._rowids if (k.customer_id, k.location) == (customer_id, location)]:
            del self._rowids[key]

    def __len__(self) -> int:
        return len(self._rowids)
