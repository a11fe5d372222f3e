"""The per-credential rate limit: two token buckets (``mutating``, ``read``) per bearer token.

Off unless configured (``rate_limit`` of the faults, or ``--rate-limit``).  A request of ``/api/1`` takes one
token of its class's bucket on arrival, after the auth check and before anything else; an empty bucket answers
429 with ``Retry-After``.  The buckets are keyed by a hash of the token, never the token itself.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from typing import TypedDict

#: The classes of request: ``mutating`` (every method but GET) and ``read`` (GET).
CLASSES = ("mutating", "read")

#: ``rate_limit: "default"`` and ``--rate-limit default``: tokens per second and bucket capacity per class.
#: The figures follow what peer clouds publish for their own per-credential token buckets (the AWS EC2 API's
#: request throttling documents 5/s with a burst of 50 for mutating calls and 20/s with a burst of 100 for
#: reads); the whitesky.cloud platform publishes none.


class Limit(TypedDict):
    """One class's bucket: ``rate`` tokens a second, at most ``burst``."""

    rate: float
    burst: int


#: The normalized configuration: each class's limit, None for an unlimited class.
Limits = dict[str, Limit | None]
#: The tokens in each class's bucket (None: unlimited).
Levels = dict[str, float | None]

DEFAULT_LIMITS: dict[str, Limit] = {"mutating": {"rate": 5.0, "burst": 50}, "read": {"rate": 20.0, "burst": 100}}

#: The largest rate and burst accepted (bigger is as good as unlimited: a class left out or null is that).
MAX_RATE = 1e9
MAX_BURST = 10**9
#: The longest Retry-After answered (a tiny rate would otherwise ask for an unbounded wait).
MAX_RETRY_AFTER = 10**9

VALID = (
    '"default", null, or {"mutating": {"rate": R, "burst": B} or null, "read": {...} or null} '
    "with 0 < R <= %g (tokens per second) and 1 <= B <= %d (an integer)" % (MAX_RATE, MAX_BURST)
)


def credential_key(token: str) -> str:
    """The key of a credential's buckets: a hash of the bearer token (the token itself is never kept)."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def normalize(value: object) -> Limits | None:
    """The configuration as stored: None (off) or ``{"mutating": {"rate": float, "burst": int} | None,
    "read": ...}``. Raises ValueError naming the bad value and what is valid."""
    if value is None:
        return None
    if value == "default":
        return {cls: Limit(rate=limit["rate"], burst=limit["burst"]) for cls, limit in DEFAULT_LIMITS.items()}
    if not isinstance(value, dict):
        raise ValueError("rate_limit: %r is not valid; valid: %s" % (value, VALID))
    unknown = sorted(set(value) - set(CLASSES), key=str)
    if unknown:
        raise ValueError("rate_limit: unknown class(es) %s; valid classes: %s" % (unknown, list(CLASSES)))
    return {cls: _normalize_class(cls, value.get(cls)) for cls in CLASSES}


def _normalize_class(cls: str, limit: object) -> Limit | None:
    if limit is None:
        return None
    where = "rate_limit.%s" % cls
    if not isinstance(limit, dict):
        raise ValueError('%s: %r is not valid; valid: null or {"rate": R, "burst": B}' % (where, limit))
    keys = set(limit)
    if keys != {"rate", "burst"}:
        raise ValueError(
            '%s: keys %s are not valid; valid: exactly "rate" and "burst"' % (where, sorted(keys, key=str))
        )
    rate, burst = limit["rate"], limit["burst"]
    if not _is_number(rate) or not math.isfinite(rate) or not 0 < rate <= MAX_RATE:
        raise ValueError(
            "%s.rate: %r is not valid; valid: a number of tokens per second, 0 < rate <= %g" % (where, rate, MAX_RATE)
        )
    if not isinstance(burst, int) or isinstance(burst, bool) or not 1 <= burst <= MAX_BURST:
        raise ValueError("%s.burst: %r is not valid; valid: an integer, 1 <= burst <= %d" % (where, burst, MAX_BURST))
    return {"rate": float(rate), "burst": burst}


def parse_cli(text: str) -> Limits | None:
    """``--rate-limit``: ``off``, ``default``, or ``mutating=RATE:BURST[,read=RATE:BURST]`` (either class, each at
    most once; a class left out is unlimited). Raises ValueError with what is valid."""
    usage = "valid: off, default, or mutating=RATE:BURST[,read=RATE:BURST] (e.g. mutating=5:50,read=20:100)"
    text = text.strip()
    if text == "off":
        return None
    if text == "default":
        return normalize("default")
    cfg: dict[str, dict[str, float | int]] = {}
    for part in text.split(","):
        cls, sep, spec = part.strip().partition("=")
        rate, sep2, burst = spec.partition(":")
        if not sep or not sep2 or cls not in CLASSES:
            raise ValueError("%r is not valid; %s" % (part.strip(), usage))
        if cls in cfg:
            raise ValueError("the class %r is given twice; %s" % (cls, usage))
        try:
            cfg[cls] = {"rate": float(rate), "burst": int(burst)}
        except ValueError:
            raise ValueError("%r: RATE must be a number and BURST an integer; %s" % (part.strip(), usage)) from None
    return normalize(cfg)


class Bucket:
    """One token bucket: ``rate`` tokens a second up to ``burst``; starts full."""

    __slots__ = ("burst", "last", "rate", "tokens")

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.last = now

    def level(self, now: float) -> float:
        """The tokens there now (refilled continuously since the last look)."""
        if now > self.last:
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
            self.last = now
        return self.tokens

    def take(self, now: float) -> int:
        """Take one token: 0 when taken; else the whole seconds (>= 1) until one is there, nothing taken."""
        tokens = self.level(now)
        if tokens >= 1.0:
            self.tokens = tokens - 1.0
            return 0
        return max(1, math.ceil(min((1.0 - tokens) / self.rate, MAX_RETRY_AFTER)))


class RateLimiter:
    """The buckets of every credential seen since the limit was (re)configured.

    Every method is synchronous: under asyncio a take is atomic (no await between reading and updating a bucket).
    """

    def __init__(self, limits: Limits | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.configure(limits)

    def configure(self, limits: Limits | None) -> None:
        """Set the (normalized) limits; every bucket starts full again."""
        self.limits = limits
        self.buckets: dict[str, dict[str, Bucket]] = {}  # credential_key(token) -> {class: Bucket}

    def _bucket(self, token: str, cls: str) -> Bucket | None:
        limit = (self.limits or {}).get(cls)
        if limit is None:
            return None
        per_cred = self.buckets.setdefault(credential_key(token), {})
        if cls not in per_cred:
            per_cred[cls] = Bucket(limit["rate"], limit["burst"], self.clock())
        return per_cred[cls]

    def take(self, token: str, cls: str) -> int:
        """One request of ``cls`` by the credential ``token``: 0 if it may go on, else its Retry-After seconds."""
        bucket = self._bucket(token, cls)
        return 0 if bucket is None else bucket.take(self.clock())

    def describe(self, cls: str) -> str:
        """The limit of a class in words, for the 429's message."""
        limit = (self.limits or {}).get(cls)
        if limit is None:
            return "no limit"
        return "%g requests per second with a burst of %d" % (limit["rate"], limit["burst"])

    def levels(self) -> Levels | None:
        """The tokens in each class's bucket of the first credential seen (a full bucket if none was seen yet;
        null for an unlimited class), or None when the limit is off."""
        if self.limits is None:
            return None
        now = self.clock()
        first = next(iter(self.buckets.values()), {})
        out: Levels = {}
        for cls in CLASSES:
            limit = self.limits.get(cls)
            if limit is None:
                out[cls] = None
            elif cls in first:
                out[cls] = round(first[cls].level(now), 3)
            else:
                out[cls] = float(limit["burst"])
        return out
