"""Transient API faults (429, 5xx, dropped connections): capped exponential backoff with jitter.

Every retry loop is bounded by both an attempt count and a wall-clock deadline, so a storm of
429s slows a deploy down but cannot hang it.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TypeVar

from google.api_core import exceptions as api_exceptions

T = TypeVar("T")


@functools.cache
def retryable() -> tuple[type[BaseException], ...]:
    """The transient faults. Built on first use: `requests` is only needed once calls run."""
    import requests

    return (
        api_exceptions.TooManyRequests,
        api_exceptions.InternalServerError,
        api_exceptions.BadGateway,
        api_exceptions.ServiceUnavailable,
        api_exceptions.GatewayTimeout,
        requests.ConnectionError,
    )


@dataclass(frozen=True)
class RetryPolicy:
    """Full-jitter backoff: sleep uniform(0, min(cap, initial * 2**attempt))."""

    initial_s: float = 0.5
    cap_s: float = 20.0
    max_attempts: int = 10
    deadline_s: float = 300.0

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        ceiling = min(self.cap_s, self.initial_s * (2**attempt))
        return (rng or random).uniform(0, ceiling)


RATE_LIMIT_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded"})
"""The reasons of a 403 that is a rate limit, not a refusal: Compute answers a per-minute limit
with 403 rateLimitExceeded as well as 429
(https://cloud.google.com/compute/docs/api-rate-limits#rate_limit_errors)."""


def is_transient(exc: BaseException) -> bool:
    """A fault worth retrying: `retryable()`, or a 403 whose reason is a rate limit."""
    if isinstance(exc, retryable()):
        return True
    if not isinstance(exc, api_exceptions.Forbidden):
        return False
    reasons = {str(error.get("reason")) for error in (exc.errors or [])
               if isinstance(error, dict)}
    return bool(reasons & RATE_LIMIT_REASONS or {exc.reason} & RATE_LIMIT_REASONS)


def retry_after_s(exc: BaseException) -> float:
    """How long the answer asked the client to wait (its `Retry-After`: seconds or an HTTP
    date, RFC 9110 section 10.2.3); 0 when it did not say."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    value = str(headers.get("Retry-After") or "").strip()
    if not value:
        return 0.0
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, when.timestamp() - time.time())


def call_with_retry(
    call: Callable[[], T], policy: RetryPolicy, sleep: Callable[[float], None] = time.sleep
) -> T:
    """Run `call`, retrying transient faults (`is_transient`) after a backoff, or after the
    wait the answer's Retry-After asks when that is longer; the last fault is raised when the
    budget ends. A create's request carries its request id from before the first attempt, so
    a retry of one whose answer was lost is the same request to GCE, which does it once."""
    give_up_at = time.monotonic() + policy.deadline_s
    attempt = 0
    while True:
        try:
            return call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            attempt += 1
            pause = max(policy.delay(attempt - 1), retry_after_s(exc))
            if attempt >= policy.max_attempts or time.monotonic() + pause > give_up_at:
                raise
            sleep(pause)


class OperationTimeout(TimeoutError):
    """A long-running operation was still running at its deadline."""


def poll_until(
    check: Callable[[], bool],
    deadline_s: float,
    what: str,
    interval_s: float = 1.0,
    cap_s: float = 10.0,
) -> None:
    """Call `check` until it returns True, backing off up to `cap_s`, for at most deadline_s."""
    give_up_at = time.monotonic() + deadline_s
    pause = interval_s
    while not check():
        remaining = give_up_at - time.monotonic()
        if remaining <= 0:
            raise OperationTimeout(f"{what} did not finish within {deadline_s:.0f} s")
        time.sleep(min(remaining, random.uniform(pause / 2, pause)))
        pause = min(cap_s, pause * 2)
