"""Fault injection for the fake Compute/TPU API: what the next calls should suffer.

Tests set these between provider calls; the server consults them on every request.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

RATE_LIMITED_403 = (403, "rateLimitExceeded")
"""Compute's per-minute rate limit answered as a 403 (as well as 429)
(https://cloud.google.com/compute/docs/api-rate-limits#rate_limit_errors): retried by clients,
where a plain 403 is a refusal."""


@dataclass
class Faults:
    """Mutable fault plan, shared by the server's request threads (guarded by `lock`)."""

    latency_s: float = 0.0
    """Sleep before answering every request: a fixed network round trip."""
    operation_s: float = 0.05
    """How long every long-running operation stays RUNNING."""
    slow_operations: dict[str, float] = field(default_factory=dict)
    """Operation type (`insert`, `bulkInsert`, `delete`, ...) -> how long its operations stay
    RUNNING instead of `operation_s`: a run can be caught (and killed) while it waits on one."""
    error_statuses: list[int | tuple[int, str]] = field(default_factory=list)
    """Answer the next requests with these HTTP statuses (e.g. [429, 429, 503]), one each; a
    (status, reason) pair names the reason too (RATE_LIMITED_403); a bare 403 is a refusal."""
    error_methods: set[str] | None = None
    """Only requests whose method name (e.g. "bulkInsert", "wait") is in here suffer them."""
    method_errors: dict[str, list[int | tuple[int, str]]] = field(default_factory=dict)
    """Method name -> the statuses its next calls answer with, one each, before any of
    `error_statuses`: a fault aimed at one call (the head's insert, the bucket's)."""
    retry_after_s: int | None = None
    """Sent as `Retry-After` with each injected 429 and 503, as Google's front ends may ask a
    client to wait (RFC 9110 section 10.2.3: delay-seconds)."""
    dropped_answers: list[str] = field(default_factory=list)
    """Methods whose next call takes effect but whose answer never comes: the connection is
    closed instead (a cut link, a proxy's timeout), one call each."""
    instance_quota: int | None = None
    """Instances a zone may hold; inserts beyond it fail their operation with QUOTA_EXCEEDED."""
    zone_capacity: dict[str, int] = field(default_factory=dict)
    """Zone -> instances it can still take; the rest fail with `stockout_code` (0: stocked out)."""
    spot_capacity: dict[str, int] = field(default_factory=dict)
    """Zone -> spot (or preemptible) instances it can still take; the rest fail with
    `stockout_code`, as `zone_capacity` does, while on-demand inserts go through."""
    flex_capacity: dict[str, int] = field(default_factory=dict)
    """Zone -> flex-start instances Dynamic Workload Scheduler can still find there; the rest
    are created PENDING and removed once `flex_start_s` has passed (the request failed)."""
    flex_start_s: float = 0.2
    """How long a flex-start instance stays PENDING before it runs (or its request fails)."""
    run_limit_scale: float = 1.0
    """A VM's time limit (maxRunDuration, terminationTime) passes this many times faster
    (tests/fakes/compute/time_limits.py)."""
    zone_quota: dict[str, int] = field(default_factory=dict)
    """Zone -> instances it may hold; beyond, QUOTA_EXCEEDED naming that zone (a per-zone cap)."""
    stockout_code: str = "ZONE_RESOURCE_POOL_EXHAUSTED"
    """Or ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS, the newer form GCE answers with."""
    refused_operation_s: float | None = None
    """How long an operation that creates nothing (stockout, quota) runs; None: operation_s."""
    stockout_at_call: bool = False
    """A stocked-out zone refuses the insert call itself (HTTP 503), not only its operation."""
    queued_wait_polls: int | None = 0
    """How many reads (get or list) a TPU queued resource stays WAITING_FOR_RESOURCES before
    it is provisioned; None: it waits forever (no capacity ever comes)."""
    queued_failure: str | None = None
    """Queued resources that would be provisioned go FAILED instead, with this message."""
    queued_tier_failure: dict[str, str] = field(default_factory=dict)
    """Tier ("spot", "reservation", "on-demand") -> the message its queued resources FAIL with
    when they would be provisioned (no capacity on that tier)."""
    metadata_race: dict[str, str] = field(default_factory=dict)
    """Items another writer (say `gcloud compute ssh` adding a key) sets on an instance just
    before the first setMetadata that reaches it: that call quotes a stale fingerprint."""
    metadata_raced: set[str] = field(default_factory=set)
    """Instances whose race has been run (each races once)."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take_error(self, method: str) -> int | tuple[int, str] | None:
        """The HTTP status this request must fail with, if any is queued for its method."""
        with self.lock:
            if self.method_errors.get(method):
                return self.method_errors[method].pop(0)
            if not self.error_statuses:
                return None
            if self.error_methods is not None and method not in self.error_methods:
                return None
            return self.error_statuses.pop(0)

    def take_dropped(self, method: str) -> bool:
        """Whether this call's answer is to be dropped (once per queued entry)."""
        with self.lock:
            if method in self.dropped_answers:
                self.dropped_answers.remove(method)
                return True
            return False

    def take_metadata_race(self, instance: str) -> dict[str, str]:
        """The items the other writer sets on `instance` now (once per instance)."""
        with self.lock:
            if not self.metadata_race or instance in self.metadata_raced:
                return {}
            self.metadata_raced.add(instance)
            return dict(self.metadata_race)

    def fail_next(self, *statuses: int | tuple[int, str], methods: set[str] | None = None) -> None:
        with self.lock:
            self.error_statuses = list(statuses)
            self.error_methods = methods
