"""Run one API call per item on a bounded thread pool, collecting results and failures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_PARALLEL = 32


def run_all(items: Sequence[T], call: Callable[[T], R]) -> tuple[dict[T, R], dict[T, Exception]]:
    """Every item gets its call even when others fail: a failure must not hide what happened."""
    results: dict[T, R] = {}
    failures: dict[T, Exception] = {}
    if not items:
        return results, failures
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(items))) as pool:
        futures = {item: pool.submit(call, item) for item in items}
        for item, future in futures.items():
            try:
                results[item] = future.result()
            except Exception as exc:  # noqa: BLE001 - reported to the caller per item
                failures[item] = exc
    return results, failures
