"""Transient API faults (429, 5xx, dropped connections): capped exponential backoff with jitter;
a rate quota's refusal (403 rateLimitExceeded, 429) waits for its Retry-After or its quota's
next window (bootstrap/head_provider/rate_limits.py). The one retry policy of every Compute
call path of ours: the providers' (infra/workers) and the tasks' (ops/), by `call_with_retry`.

Every retry loop is bounded by both an attempt count and a wall-clock deadline, so a storm of
429s slows a deploy down but cannot hang it.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from google.api_core import exceptions as api_exceptions

from bootstrap.head_provider.rate_limits import is_rate_limit, rate_limit_pause
from bootstrap.head_provider.rate_limits import retry_after_s as header_retry_after_s

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


def _status_and_reasons(exc: BaseException) -> tuple[int, set[str]]:
    """An API error's HTTP status and the reasons its body gives (google-api-core's errors
    and ErrorInfo details)."""
    status = int(getattr(exc, "code", 0) or 0) \
        if isinstance(exc, api_exceptions.GoogleAPICallError) else 0
    reasons = {str(error.get("reason")) for error in (getattr(exc, "errors", None) or [])
               if isinstance(error, dict)}
    reasons.add(str(getattr(exc, "reason", "") or ""))
    return status, reasons


def is_rate_limited(exc: BaseException) -> bool:
    """A per-minute rate quota's answer: 429, or 403 rateLimitExceeded (bootstrap/head_provider/
    rate_limits.py)."""
    return is_rate_limit(*_status_and_reasons(exc))


def is_transient(exc: BaseException) -> bool:
    """A fault worth retrying: `retryable()`, or a 403 whose reason is a rate limit."""
    return isinstance(exc, retryable()) or is_rate_limited(exc)


def retry_after_s(exc: BaseException) -> float:
    """How long the answer asked the client to wait (its `Retry-After`: seconds or an HTTP
    date, RFC 9110 section 10.2.3); 0 when it did not say."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    return header_retry_after_s(headers.get("Retry-After")) or 0.0


def pause_after(exc: BaseException, attempt: int, policy: RetryPolicy) -> float:
    """How long to wait before the next attempt: for a rate quota's answer, its Retry-After
    or else until the window its message names refills (retrying sooner only spends attempts
    on refusals); for other faults the backoff, or the Retry-After when longer."""
    if is_rate_limited(exc):
        headers = getattr(getattr(exc, "response", None), "headers", None) or {}
        pause = rate_limit_pause(str(getattr(exc, "message", "") or exc),
                                 headers.get("Retry-After"))
        if pause is not None:
            return pause
    return max(policy.delay(attempt), retry_after_s(exc))


def call_with_retry(
    call: Callable[[], T], policy: RetryPolicy, sleep: Callable[[float], None] = time.sleep
) -> T:
    """Run `call`, retrying transient faults (`is_transient`) after `pause_after`; the last
    fault is raised when the budget ends (attempts or the deadline). A create's request
    carries its request id from before the first attempt, so a retry of one whose answer was
    lost is the same request to GCE, which does it once."""
    give_up_at = time.monotonic() + policy.deadline_s
    attempt = 0
    while True:
        try:
            return call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            attempt += 1
            pause = pause_after(exc, attempt - 1, policy)
            if attempt >= policy.max_attempts or time.monotonic() + pause > give_up_at:
                raise
            sleep(pause)


INTERACTIVE = RetryPolicy(initial_s=0.25, cap_s=2.0, max_attempts=4, deadline_s=90.0)
"""A task's reads while the user waits (`status`): a server fault retried three times within
seconds, then said; a rate quota waited out (a window is at most a minute)."""


def with_retry(call: Callable[[], T], policy: RetryPolicy = INTERACTIVE) -> T:
    """`call_with_retry`, by default as a task's interactive reads retry."""
    return call_with_retry(call, policy)


def each_page(ask: Callable[[str], dict[str, Any]], policy: RetryPolicy) -> list[dict[str, Any]]:
    """Every page of a list call, each page's call retried on its own (a refusal on page 3
    does not ask for pages 1 and 2 again). `ask(page_token)` makes the call with that token
    (`""` first) and returns the page's JSON, whose `nextPageToken` names the next."""
    pages, token = [], ""
    while True:
        page = call_with_retry(lambda t=token: ask(t), policy)
        pages.append(page)
        token = page.get("nextPageToken") or ""
        if not token:
            return pages


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
