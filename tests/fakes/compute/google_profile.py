"""How the fake answers: instantly (the suite's default) or like Google's Compute API.

A profile is chosen per fake (`FakeComputeServer(profile=GOOGLE)`); the instant one keeps the
suite fast, the Google-like one is for benches and the tests of our backoff. What it adds, each
rule from Google's documentation:

- **Per-minute rate quotas per method group**, counted per project in synchronized windows
  (https://cloud.google.com/compute/api-quota, also
  https://cloud.google.com/compute/docs/api-rate-limits): "Google enforces rate quotas at a
  per-minute interval for each group ... if a project reaches a quota limit at 10:00:15, the
  quota refills at the start of the next synchronized interval, such as 10:01:00"; "Each group
  is counted separately"; over the quota, "a 403 error with the reason rateLimitExceeded".
  The groups and their default quotas: Queries (`compute.googleapis.com/default`, mutations)
  1,500 requests/minute and Read requests (`*.get`) 1,500 requests/minute (the current page's
  table); List requests (`*.list`), Operation read requests (`*OperationsService.Get`, and
  `wait`) 20 requests/second and Heavy-weight read requests (`*.aggregatedList`) 10
  requests/second in the page's earlier table
  (https://web.archive.org/web/20190331140730/https://cloud.google.com/compute/docs/
  api-rate-limits), here per minute: 1,200, 1,200 and 600.
  The newer quota system answers the same excess as HTTP 429 with status RESOURCE_EXHAUSTED
  ("Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute' of
  service 'compute.googleapis.com'"): `rate_limit_status=429` gives that body.
  Compute does not document a `Retry-After` on these; `retry_after=True` sends one (the
  seconds to the next window), as Google's front ends may (RFC 9110 section 10.2.3).
- **bulkInsert's own limit**: "you reached the 20 requests per second request limit, or you are
  running more than 10 bulk operations at the same time" -> 403 rateLimitExceeded
  (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-bulk-vm-creation).
- **Long-running operations** that stay PENDING, then RUNNING, for `operation_s` before DONE
  (Operation.status: PENDING, RUNNING, DONE;
  https://cloud.google.com/compute/docs/reference/rest/v1/zoneOperations), and
  `zoneOperations.wait`, which "waits for no more than the 2 minutes and then returns the
  current state of the operation, which might be DONE or still in progress"
  (https://cloud.google.com/compute/docs/reference/rest/v1/zoneOperations/wait).
- **A round trip per call** (`latency_s`): Google documents none; 80 ms is a client in the
  same region's order, chosen, not cited, and the same for every call.

List pages (`maxResults` 0-500, default 500, `nextPageToken`;
https://cloud.google.com/compute/docs/reference/rest/v1/instances/list) and bulkInsert's
request rules (https://cloud.google.com/compute/docs/reference/rest/v1/instances/bulkInsert)
hold in every profile (server.py): they are what the API is, not how fast it answers.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tests.fakes.compute.errors import ApiError

# The quota groups: name, the metric Google names, the limit's words in its 429 message.
DEFAULT, READS, LISTS, OPERATION_READS, HEAVY_READS = (
    "default", "read_requests", "list_requests", "operation_read_requests",
    "heavy_weight_read_requests")
_GROUP_WORDS = {DEFAULT: "Queries", READS: "Read requests", LISTS: "List requests",
                OPERATION_READS: "Operation read requests",
                HEAVY_READS: "Heavy-weight read requests"}
GOOGLE_QUOTAS: Mapping[str, int] = {DEFAULT: 1500, READS: 1500, LISTS: 1200,
                                    OPERATION_READS: 1200, HEAVY_READS: 600}
"""Requests per minute per project, per group (the module's docstring cites each)."""
BULK_OPERATIONS_AT_ONCE = 10


def quota_group(method: str) -> str:
    """The group a Compute method (a ROUTES name of server.py) counts in."""
    if method.endswith("aggregatedList"):
        return HEAVY_READS
    if method in ("wait", "operations.get"):
        return OPERATION_READS
    if method.endswith("list") or method.endswith("List"):
        return LISTS
    if method.endswith("get") or method.endswith("Get") or method == "getGuestAttributes":
        return READS
    return DEFAULT


@dataclass(frozen=True)
class CloudProfile:
    """How fast and how strict the fake answers. The default is the instant one."""

    latency_s: float = 0.0
    """Sleep before answering every request: a fixed round trip."""
    operation_s: float = 0.05
    """How long a long-running operation takes before DONE."""
    pending_share: float = 0.0
    """The first share of `operation_s` an operation is PENDING (then RUNNING)."""
    wait_max_s: float = 5.0
    """The most a `zoneOperations.wait` call blocks before answering the current state."""
    quotas: Mapping[str, int] = field(default_factory=dict)
    """Group -> requests per window per project; a group left out is not limited."""
    window_s: float = 60.0
    """The quota window; windows start on multiples of it (synchronized, wall clock)."""
    bulk_operations_at_once: int | None = None
    """bulkInsert operations that may run at once in a project; None: unlimited."""
    rate_limit_status: int = 403
    """403 rateLimitExceeded (Compute's documented answer) or 429 RESOURCE_EXHAUSTED."""
    retry_after: bool = False
    """Send `Retry-After` (seconds to the next window) with a rate-limit answer."""

    def scaled(self, quotas_per_window: float = 1.0, **changes: object) -> CloudProfile:
        """This profile with other settings, its quotas times `quotas_per_window`."""
        quotas = {g: max(1, math.floor(n * quotas_per_window)) for g, n in self.quotas.items()}
        values = {**self.__dict__, "quotas": quotas, **changes}
        return CloudProfile(**values)  # type: ignore[arg-type]


INSTANT = CloudProfile()
GOOGLE = CloudProfile(latency_s=0.08, operation_s=3.0, pending_share=0.2, wait_max_s=120.0,
                      quotas=GOOGLE_QUOTAS, window_s=60.0,
                      bulk_operations_at_once=BULK_OPERATIONS_AT_ONCE)
"""Google's quotas and wait limit, 80 ms a call, 3 s an operation."""


class RateLimiter:
    """Counts each project's requests per group in the current window; refuses the excess
    as Google does (the group's count does not grow with refused requests)."""

    def __init__(self, profile: CloudProfile, clock: Callable[[], float] = time.time) -> None:
        self.profile = profile
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str, int], int] = {}
        self.refused: dict[str, int] = {}
        """Group -> how many requests were refused for its quota."""

    def admit(self, project: str, method: str) -> None:
        group = quota_group(method)
        limit = self.profile.quotas.get(group)
        if limit is None:
            return
        now = self._clock()
        window = int(now // self.profile.window_s)
        key = (project, group, window)
        with self._lock:
            if self._counts.get(key, 0) >= limit:
                self.refused[group] = self.refused.get(group, 0) + 1
                refill_s = (window + 1) * self.profile.window_s - now
                raise rate_limit_error(self.profile, group, limit, project, refill_s)
            self._counts[key] = self._counts.get(key, 0) + 1
            for stale in [k for k in self._counts if k[2] < window]:
                del self._counts[stale]


def rate_limit_error(profile: CloudProfile, group: str, limit: int, project: str,
                     refill_s: float) -> ApiError:
    """Google's answer to a request over its group's quota."""
    words = _GROUP_WORDS[group]
    per = "minute" if profile.window_s == 60 else f"{profile.window_s:g} seconds"
    message = (f"Quota exceeded for quota metric '{words}' and limit '{words} per {per}' of "
               f"service 'compute.googleapis.com' for consumer 'project_number:{project}'.")
    if profile.rate_limit_status == 429:
        refused = ApiError(429, message, "rateLimitExceeded", status_name="RESOURCE_EXHAUSTED",
                           details=[{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                     "reason": "RATE_LIMIT_EXCEEDED",
                                     "domain": "googleapis.com",
                                     "metadata": {"service": "compute.googleapis.com",
                                                  "quota_metric": f"compute.googleapis.com/"
                                                                  f"{group}",
                                                  "quota_limit_value": str(limit)}}])
    else:
        refused = ApiError(403, message, "rateLimitExceeded")
    if profile.retry_after:
        refused.retry_after = max(1, math.ceil(refill_s))
    return refused


def bulk_limit_error() -> ApiError:
    """More than BULK_OPERATIONS_AT_ONCE bulk operations running (troubleshooting page)."""
    return ApiError(403, f"Rate Limit Exceeded: more than {BULK_OPERATIONS_AT_ONCE} bulk "
                         "operations are running at the same time.", "rateLimitExceeded")
