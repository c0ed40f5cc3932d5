"""TPU worker groups through the real google-cloud-tpu REST client, against the fake TPU v2 API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infra.workers import WorkerGroupError
from tests.fake_compute import FakeComputeServer
from tests.fake_compute.helpers import PROJECT, ZONE, fast_provider, group_props, tpu_body


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        yield server


def tpu_props(endpoint: str, count: int) -> dict:
    return group_props(endpoint, count, kind="tpu", node_type="tpu", body=tpu_body())


def test_tpu_group_creates_scales_and_deletes_tpu_vms(fake):
    provider = fast_provider()
    outs = provider.create(tpu_props(fake.endpoint, 2)).outs
    assert outs["count"] == 2
    assert all(name.endswith("-tpu") for name in outs["instance_names"])
    assert {n["state"] for n in fake.tpu_nodes(PROJECT, ZONE).values()} == {"READY"}
    assert all(i["internal_ip"] for i in outs["instances"])

    outs = provider.update("id", outs, tpu_props(fake.endpoint, 1)).outs
    assert len(fake.tpu_nodes(PROJECT, ZONE)) == 1

    provider.delete("id", outs)
    assert fake.tpu_nodes(PROJECT, ZONE) == {}


def test_tpu_quota_failure_reports_created_nodes_and_delete_cleans_up(fake):
    fake.faults.instance_quota = 1
    props = tpu_props(fake.endpoint, 3)

    with pytest.raises(WorkerGroupError) as failure:
        fast_provider().create(props)
    assert len(failure.value.created) == 1

    fast_provider().delete("id", props)
    assert fake.tpu_nodes(PROJECT, ZONE) == {}
