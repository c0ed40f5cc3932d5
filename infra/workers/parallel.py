"""Run one API call per item on a bounded thread pool, then wait for their operations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from infra.workers.nodes import WorkerGroupError

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


def short_error(exc: Exception) -> str:
    """Google API errors carry a readable `message`; others their text."""
    return getattr(exc, "message", None) or str(exc)


def wait_all(operations: Sequence[str], wait: Callable[[str], str | None]) -> list[str]:
    """Wait for every operation at once; the errors of those that failed."""
    results, failures = run_all(list(operations), wait)
    errors = [f"{op}: {short_error(exc)}" for op, exc in failures.items()]
    return errors + [error for error in results.values() if error]


def start_and_wait(
    names: Sequence[str],
    call: Callable[[str], str | None],
    wait: Callable[[str], str | None],
) -> list[str]:
    """Start `call` for every name (it returns an operation, or None when nothing is to do),
    then wait for all the operations; every error, named."""
    started, failures = run_all(list(names), call)
    errors = [f"{name}: {short_error(exc)}" for name, exc in failures.items()]
    return errors + wait_all([op for op in started.values() if op], wait)


def act_on_all(
    verb: str,
    what: str,
    names: Sequence[str],
    call: Callable[[str], str | None],
    wait: Callable[[str], str | None],
) -> None:
    """`start_and_wait`, raising one error that counts and names the failures."""
    errors = start_and_wait(names, call, wait)
    if errors:
        raise WorkerGroupError(
            f"could not {verb} {len(errors)} of {len(names)} {what}: {'; '.join(errors)}"
        )
