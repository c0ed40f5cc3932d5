"""A worker group rides out Compute's per-minute rate quotas (the fake's Google-like profile,
tests/fakes/compute/google_profile.py) through Compute's REST API (compute_rest.py): a refused
call waits for its quota's next window (or the Retry-After the answer gives) instead of
spending its attempts on refusals, so no rate-limit error reaches the user; and a group of more
than a list page (500) is seen whole."""

from __future__ import annotations

import random
import time

import pytest

from bootstrap.head_provider.rate_limits import quota_window_s, rate_limit_pause
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.google_profile import HEAVY_READS, CloudProfile
from tests.fakes.compute.helpers import PROJECT, ZONE, fast_provider, group_props

WINDOW_S = 6.0
TIGHT = CloudProfile(quotas={HEAVY_READS: 1}, window_s=WINDOW_S)
"""One aggregated list a window: a group's create lists twice."""


def _spend_the_window(fake: FakeComputeServer) -> None:
    """At a window's start, the one aggregated list it allows, made by someone else."""
    from infra.workers.clients import ApiClients, build_credentials

    clients = ApiClients(build_credentials(None, fake.endpoint), fake.endpoint)
    time.sleep(WINDOW_S - time.time() % WINDOW_S + 0.05)
    clients.compute.call("instances.aggregatedList", project=PROJECT)


@pytest.mark.parametrize("answer", [
    {},  # 403 rateLimitExceeded naming its window, no Retry-After: wait for the window
    {"retry_after": True, "rate_limit_status": 429},  # 429 RESOURCE_EXHAUSTED, Retry-After
])
def test_a_rate_quota_refusal_waits_for_its_window_and_the_create_succeeds(answer):
    with FakeComputeServer(profile=TIGHT.scaled(**answer)) as fake:
        _spend_the_window(fake)
        began = time.monotonic()
        # fast_provider backs off for milliseconds, 10 attempts: without the window's wait
        # it gives up on the refusals long before the quota refills.
        outputs = fast_provider().create(group_props(fake.endpoint, 3)).outs
        assert outputs["count"] == 3
        assert fake.limiter.refused.get(HEAVY_READS, 0) >= 1
        assert time.monotonic() - began >= WINDOW_S - 1.5


@pytest.mark.parametrize(("message", "window"), [
    ("Quota exceeded for quota group 'ReadGroup' and limit 'Read requests per user per 100 "
     "seconds' of service 'compute.googleapis.com' for consumer 'project_number:1'.", 100.0),
    ("Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute' of "
     "service 'compute.googleapis.com' for consumer 'project_number:1'.", 60.0),
    ("Quota exceeded for quota metric 'x' and limit 'StandardQuotaPerMinutePerProject'", 60.0),
    ("Rate Limit Exceeded", None),
])
def test_the_window_is_read_from_the_limit_the_answer_names(message, window):
    assert quota_window_s(message) == window


def test_the_pause_is_the_retry_after_else_the_rest_of_the_window():
    rng = random.Random(1)
    assert rate_limit_pause("per minute", "7", now=lambda: 15.0) == 7.0
    pause = rate_limit_pause("Read requests per minute", None, now=lambda: 15.0, rng=rng)
    assert 45.0 <= pause <= 48.0
    assert rate_limit_pause("Rate Limit Exceeded", None) is None


def test_a_group_of_more_than_a_page_is_listed_whole():
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        provider = fast_provider()
        outputs = provider.create(group_props(fake.endpoint, 620)).outs
        assert len(fake.instances(PROJECT, ZONE)) == 620
        assert outputs["count"] == 620 and len(set(outputs["instance_names"])) == 620
        assert fake.cloud.calls["aggregatedList"] == 3  # none before; two pages after
