"""Faults the Compute API throws at a worker group: quota, partial bulkInsert, 429s, preemption."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from google.api_core import exceptions as api_exceptions

from infra.workers import WorkerGroupError
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import PROJECT, ZONE, fast_provider, group_props


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        yield server


def test_partial_bulk_insert_reports_the_instances_that_were_created(fake):
    fake.faults.instance_quota = 2

    with pytest.raises(WorkerGroupError) as failure:
        fast_provider().create(group_props(fake.endpoint, 5))

    assert "QUOTA_EXCEEDED" in str(failure.value)
    assert sorted(failure.value.created) == sorted(fake.instances(PROJECT, ZONE))
    assert len(failure.value.created) == 2


def test_delete_after_a_failed_create_leaves_zero_instances(fake):
    fake.faults.instance_quota = 2
    props = group_props(fake.endpoint, 5)
    with pytest.raises(WorkerGroupError):
        fast_provider().create(props)

    fast_provider().delete("id", props)

    assert fake.instances(PROJECT, ZONE) == {}


def test_retried_create_adopts_what_a_failed_create_left(fake):
    fake.faults.instance_quota = 2
    props = group_props(fake.endpoint, 3)
    with pytest.raises(WorkerGroupError) as failure:
        fast_provider().create(props)
    fake.faults.instance_quota = None

    outs = fast_provider().create(props).outs

    assert set(failure.value.created) <= set(outs["instance_names"])
    assert len(fake.instances(PROJECT, ZONE)) == 3


def test_a_storm_of_429_and_503_is_ridden_out(fake):
    fake.faults.fail_next(429, 429, 503, 429, 503, 429)
    outs = fast_provider().create(group_props(fake.endpoint, 3)).outs

    assert outs["count"] == 3
    assert len(fake.instances(PROJECT, ZONE)) == 3
    assert fake.faults.error_statuses == []


def test_bulk_insert_refused_with_503_is_retried_and_creates_each_worker_once(fake):
    fake.faults.fail_next(503, 503, methods={"bulkInsert", "wait"})

    fast_provider().create(group_props(fake.endpoint, 3))

    assert fake.cloud.calls["bulkInsert"] == 3
    assert len(fake.instances(PROJECT, ZONE)) == 3


def test_endless_429s_give_up_with_the_api_error(fake):
    fake.faults.fail_next(*[429] * 50)

    with pytest.raises(api_exceptions.TooManyRequests):
        fast_provider(max_attempts=4).create(group_props(fake.endpoint, 1))
    assert fake.cloud.calls["aggregatedList"] == 4


def test_preempted_worker_shows_as_drift_on_refresh_and_is_replaced_by_up(fake):
    provider = fast_provider()
    props = group_props(fake.endpoint, 3)
    outs = provider.create(props).outs
    lost = outs["instance_names"][1]
    fake.cloud.preempt(PROJECT, ZONE, lost)

    refreshed = provider.read("id", outs).outs
    assert refreshed["count"] == 2
    assert lost not in refreshed["instance_names"]
    assert provider.diff("id", refreshed, props).changes

    outs = provider.update("id", refreshed, props).outs
    assert outs["count"] == 3
    assert lost not in outs["instance_names"]
    assert len(fake.instances(PROJECT, ZONE)) == 3


def test_stopped_worker_without_cache_is_deleted_and_replaced(fake):
    provider = fast_provider()
    props = group_props(fake.endpoint, 2)
    outs = provider.create(props).outs
    fake.cloud.instances[(PROJECT, ZONE)][outs["instance_names"][0]]["status"] = "TERMINATED"

    outs = provider.update("id", provider.read("id", outs).outs, props).outs

    assert outs["count"] == 2
    assert len(fake.instances(PROJECT, ZONE)) == 2


def test_operation_past_its_deadline_is_an_error_not_a_hang(fake):
    fake.faults.operation_s = 5.0
    provider = fast_provider()
    provider.deadlines = type(provider.deadlines)(compute_s=0.3, tpu_s=0.3, tpu_poll_s=0.02)
    fake.wait_max_s = 0.1

    with pytest.raises(WorkerGroupError, match="did not finish within"):
        provider.create(group_props(fake.endpoint, 1))
