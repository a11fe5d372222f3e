# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the transport reads of an answer's headers (pure Python, standard library only): ``Retry-After``.

A header is the platform's (or a proxy's) word, hostile like the rest of an answer: each parser takes any value and
never raises; what it cannot read is None, and the caller decides without it.
"""

from __future__ import annotations

import datetime
import email.utils
import math
import re
import time
from collections.abc import Callable

#: The longest wait a ``Retry-After`` may ask for, in seconds (a call's deadline ends it sooner anyway).
RETRY_AFTER_MAX = 3600.0
_DELAY_SECONDS = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,9})?")


def retry_after(value: object, now: Callable[[], float] = time.time) -> float | None:
    """The seconds a ``Retry-After`` header asks to wait: delay-seconds, or an HTTP-date (past: 0); at most
    :data:`RETRY_AFTER_MAX`.  None for anything else (``soon``, a negative number, ``nan``, ``inf``, an
    exponent): the backoff decides then.  Never raises."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if _DELAY_SECONDS.fullmatch(text):
        return min(float(text), RETRY_AFTER_MAX)
    if not text or len(text) > 64:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(text)
        if parsed.tzinfo is None:  # an HTTP-date is GMT; a date without a zone is read so
            parsed = parsed.replace(tzinfo=datetime.timezone.utc)
        seconds = parsed.timestamp() - now()
    except (TypeError, ValueError, IndexError, OverflowError, OSError):
        return None
    if not math.isfinite(seconds):
        return None
    return min(max(0.0, seconds), RETRY_AFTER_MAX)
