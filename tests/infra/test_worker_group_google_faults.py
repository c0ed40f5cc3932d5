"""Faults from Google a worker group rides out, through the product's Compute REST client
against the fake: a 429 or 503 that asks for a wait (`Retry-After`) is retried no sooner; a
403 `rateLimitExceeded` (Compute's per-minute limit) is retried, where another 403 is not; a
bulkInsert whose answer is lost after GCE took it is retried with the same request
id, so each worker is created once."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from google.api_core import exceptions as api_exceptions

from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.faults import RATE_LIMITED_403
from tests.fakes.compute.helpers import PROJECT, ZONE, fast_provider, group_props


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        yield server


class Stamps:
    """When the fake saw each call of one method."""

    def __init__(self, fake: FakeComputeServer, method: str) -> None:
        self.times: list[float] = []
        handle = fake.handle

        def stamped(verb, path, query, body, *args, **kwargs):  # type: ignore[no-untyped-def]
            if path.endswith(f"/instances/{method}") or (method == "list" and verb == "GET"
                                                           and path.endswith("/instances")):
                self.times.append(time.monotonic())
            return handle(verb, path, query, body, *args, **kwargs)

        fake.handle = stamped  # type: ignore[method-assign]


@pytest.mark.parametrize("status", [429, 503])
def test_a_retry_after_is_waited_before_the_call_is_made_again(fake, status: int) -> None:
    fake.faults.retry_after_s = 2
    fake.faults.fail_next(status, methods={"bulkInsert"})
    stamps = Stamps(fake, "bulkInsert")

    fast_provider().create(group_props(fake.endpoint, 2))

    assert len(stamps.times) == 2
    assert stamps.times[1] - stamps.times[0] >= 2.0  # fast_provider's own backoff is ms
    assert len(fake.instances(PROJECT, ZONE)) == 2


def test_a_403_rate_limit_is_retried_and_another_403_is_not(fake) -> None:
    fake.faults.fail_next(RATE_LIMITED_403, RATE_LIMITED_403, methods={"bulkInsert"})
    fast_provider().create(group_props(fake.endpoint, 2))
    assert len(fake.instances(PROJECT, ZONE)) == 2

    from infra.workers.retry import is_transient

    assert not is_transient(api_exceptions.Forbidden(
        "Required 'compute.instances.create' permission",
        errors=[{"reason": "forbidden", "message": "denied"}]))


@pytest.mark.parametrize("count", [3, 1])
def test_a_bulk_insert_whose_answer_is_lost_is_retried_with_its_request_id_once(
        fake, count: int) -> None:
    fake.faults.dropped_answers = ["bulkInsert"]
    outs = fast_provider().create(group_props(fake.endpoint, count)).outs

    assert fake.cloud.calls["bulkInsert"] == 2  # taken, answer lost, sent again
    assert len(fake.instances(PROJECT, ZONE)) == count == outs["count"]
    assert len(fake.cloud.request_ids) == 1  # the same request both times
