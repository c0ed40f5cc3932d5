"""Google's API rate quotas: which answers are one, and how long to wait for the quota to
refill. Standard library only: the operator's side (infra/workers/retry.py, every
Compute call path of ours) and the head's node provider (provider.py) share these rules.

Compute counts each method group's requests per project in synchronized one-minute windows:
"if a project reaches a quota limit at 10:00:15, the quota refills at the start of the next
synchronized interval, such as 10:01:00", and answers the excess with 403 `rateLimitExceeded`
(https://cloud.google.com/compute/api-quota); the newer quota system answers it with 429
RESOURCE_EXHAUSTED. The answer's message names the limit and so its window: "Quota exceeded
for quota group 'ReadGroup' and limit 'Read requests per user per 100 seconds' of service
'compute.googleapis.com'" (403, hashicorp/terraform-provider-google#8360), "... limit 'Read
requests per minute' ..." or "... limit 'StandardQuotaPerMinutePerProject' ..." (429). A
`Retry-After` on the answer, when there is one, is the server's own word and wins (RFC 9110
section 10.2.3); else the wait runs to the named window's next start; an answer naming no
window (a bare "Rate Limit Exceeded") gets the caller's ordinary backoff.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterable
from email.utils import parsedate_to_datetime

RATE_LIMIT_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded",
                                "RATE_LIMIT_EXCEEDED"})
"""The reasons a 403 (or 429) gives when it is a rate limit, not a refusal."""
_UNITS = {"second": 1.0, "minute": 60.0, "hour": 3600.0}
_WINDOW = re.compile(r"per (?:user )?(?:(\d+(?:\.\d+)?) )?(second|minute|hour)s?\b"
                     r"|Per(Second|Minute|Hour)", re.IGNORECASE)
WINDOW_SPREAD_S = 3.0
"""Waiters for the next window start spread over this many seconds, not all at once."""


def is_rate_limit(status: int, reasons: Iterable[str]) -> bool:
    """A 429, or a 403 whose reason is a rate limit (a plain 403 is a refusal)."""
    return status == 429 or (status == 403 and bool(RATE_LIMIT_REASONS & set(reasons)))


def retry_after_s(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """A `Retry-After` header's wait (delay-seconds or an HTTP date); None when absent or
    unreadable."""
    value = str(value or "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


def quota_window_s(message: str) -> float | None:
    """The window of the limit a rate-limit answer's message names, in seconds; None when it
    names none."""
    found = _WINDOW.search(message or "")
    if found is None:
        return None
    count, unit, camel = found.groups()
    return float(count or 1) * _UNITS[(unit or camel).lower()]


def until_next_window(window_s: float, now: Callable[[], float] = time.time,
                      rng: random.Random | None = None) -> float:
    """Seconds until the next window of `window_s` starts (windows start on its multiples),
    plus a spread (at most WINDOW_SPREAD_S, a twentieth of the window) so that waiters do not
    all ask at its first instant."""
    spread = min(WINDOW_SPREAD_S, window_s / 20)
    return window_s - now() % window_s + (rng or random).uniform(0, spread)


def rate_limit_pause(message: str, retry_after: str | None, now: Callable[[], float] = time.time,
                     rng: random.Random | None = None) -> float | None:
    """How long to wait after a rate-limit answer: its Retry-After, else until the window
    its message names starts again; None when it says neither (back off as usual)."""
    asked = retry_after_s(retry_after, now)
    if asked is not None:
        return asked
    window = quota_window_s(message)
    return until_next_window(window, now, rng) if window is not None else None
