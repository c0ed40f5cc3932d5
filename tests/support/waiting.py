"""Waiting in tests for something another process does, with a bound that fails the test."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

WAIT_SECONDS = 30  # an upper bound for a slow machine, not a speed requirement


def wait_for(
    condition: Callable[[], object], what: str, within_s: float = WAIT_SECONDS,
    poll_s: float = 0.05,
) -> None:
    """Poll `condition` until it holds; fail the test with `what` once `within_s` has passed."""
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {within_s}s")
        time.sleep(poll_s)
