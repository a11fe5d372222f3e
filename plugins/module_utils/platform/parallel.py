# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run independent jobs with bounded concurrency, collecting every outcome (pure Python)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

_K = TypeVar("_K", bound=Hashable)
_T = TypeVar("_T")


def run_parallel(jobs: Mapping[_K, Callable[[], _T]], parallel: int) -> tuple[dict[_K, _T], dict[_K, Exception]]:
    """Run ``{key: thunk}`` with at most ``parallel`` at once; return ({key: result}, {key: error})."""
    results: dict[_K, _T] = {}
    errors: dict[_K, Exception] = {}
    if not jobs:
        return results, errors
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(jobs)))) as pool:
        futures = {key: pool.submit(job) for key, job in jobs.items()}
        for key, fut in futures.items():
            try:
                results[key] = fut.result()
            except Exception as exc:  # collected and reported together
                errors[key] = exc
    return results, errors
