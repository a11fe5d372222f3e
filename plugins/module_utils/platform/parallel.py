# -*- coding: utf-8 -*-
# Copyright: (c) 2026, whitesky.capvco contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The core's threads (plain Python, no Ansible): independent jobs run with bounded concurrency, every outcome collected
(:func:`run_parallel`), and reads started beside the caller's own work, to be taken when it needs them
(:class:`Beside`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

_K = TypeVar("_K", bound=Hashable)
_T = TypeVar("_T")


class Beside:
    """Jobs started beside the caller's own work (``with Beside(2) as beside: price = beside.start(read, ...)``),
    at most ``workers`` at once; each :meth:`start` gives its :class:`~concurrent.futures.Future`.  The ``with``
    block ends once every started job has ended, even when the caller's work failed (a job's error is its future's);
    when it failed, the jobs not started yet never start."""

    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers))

    def start(self, job: Callable[..., _T], *args: Any) -> Future[_T]:
        """Start ``job(*args)``; its future."""
        return self._pool.submit(job, *args)

    def __enter__(self) -> Beside:
        return self

    def __exit__(self, exc_type: object, *_exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=exc_type is not None)


def run_parallel(jobs: Mapping[_K, Callable[[], _T]], parallel: int) -> tuple[dict[_K, _T], dict[_K, Exception]]:
    """Run ``{key: thunk}`` with at most ``parallel`` at once; return ({key: result}, {key: error})."""
    results: dict[_K, _T] = {}
    errors: dict[_K, Exception] = {}
    if not jobs:
        return results, errors
    with Beside(min(parallel, len(jobs))) as beside:
        futures = {key: beside.start(job) for key, job in jobs.items()}
        for key, fut in futures.items():
            try:
                results[key] = fut.result()
            except Exception as exc:  # collected and reported together
                errors[key] = exc
    return results, errors
