# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the inventory plugin's cache keeps of a reading (plain Python, no Ansible): :func:`to_cache` and
:func:`from_cache`, under a :func:`fingerprint` of what it was read for; an entry of another shape or fingerprint is
read again from the platform."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.whitesky.capvco.plugins.module_utils.faces.inventory_records import (
    HostRecord,
    PoolRecord,
    Read,
)

#: The shape of what :func:`to_cache` keeps; a cache entry of another shape is read again from the platform.
CACHE_FORMAT = 3


def fingerprint(api_url: str, customer_id: str, locations: Iterable[str], cloudspaces: Iterable[str]) -> str:
    """What a cache entry was read for (never the token): another platform, customer or filter reads again."""
    what = {
        "format": CACHE_FORMAT,
        "api_url": api_url.rstrip("/"),
        "customer_id": customer_id,
        "locations": sorted(set(locations)),
        "cloudspaces": sorted(set(cloudspaces)),
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


_HOST_KEYS = frozenset(HostRecord.__annotations__)


_POOL_KEYS = frozenset(PoolRecord.__annotations__)
_POOL_STRINGS = ("cluster", "name", "cloudspace_id", "cloudspace", "location")


def to_cache(got: Read, key: str) -> dict[str, Any]:
    """What the cache keeps of a read (JSON: the records are plain dicts and lists)."""
    return {
        "format": CACHE_FORMAT,
        "fingerprint": key,
        "hosts": got.hosts,
        "warnings": got.warnings,
        "pools": got.pools,
    }


def _cached_pool(pool: object) -> bool:
    """A cached pool of the record's shape, whose names (which make groups) are strings."""
    return isinstance(pool, dict) and set(pool) == _POOL_KEYS and all(isinstance(pool[k], str) for k in _POOL_STRINGS)


def from_cache(entry: object, key: str) -> Read | None:
    """The read a cache entry holds, or None when it is of another shape or was read for another fingerprint.  The
    entry is taken as plain JSON: whatever type or mark the cache plugin gave a value (ansible-core 2.19 and later
    read back a string marked as a trusted template as one) does not survive, so a cached string is data."""
    try:
        entry = json.loads(json.dumps(entry))
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(entry, Mapping) or entry.get("format") != CACHE_FORMAT or entry.get("fingerprint") != key:
        return None
    hosts, warnings, pools = entry.get("hosts"), entry.get("warnings"), entry.get("pools")
    if not isinstance(hosts, list) or not all(isinstance(h, dict) and set(h) == _HOST_KEYS for h in hosts):
        return None
    if not isinstance(pools, list) or not all(_cached_pool(p) for p in pools):
        return None
    return Read(hosts, [str(w) for w in warnings] if isinstance(warnings, list) else [], pools)
