"""Scaling a worker group against the fake Compute API through the real client library."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infra.workers.naming import GROUP_LABEL
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import (
    CLUSTER,
    NODE_TYPE,
    PROJECT,
    ZONE,
    fast_provider,
    group_props,
)


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        yield server


def live_names(fake: FakeComputeServer) -> set[str]:
    return {name for name, i in fake.instances(PROJECT, ZONE).items() if i["status"] == "RUNNING"}


def test_create_makes_all_workers_with_one_bulk_insert_and_ray_labels(fake):
    result = fast_provider().create(group_props(fake.endpoint, 3))

    assert fake.cloud.calls["bulkInsert"] == 1
    assert fake.cloud.calls["insert"] == 0
    assert result.outs["count"] == 3
    assert set(result.outs["instance_names"]) == live_names(fake)
    for name, instance in fake.instances(PROJECT, ZONE).items():
        assert name.startswith(f"ray-{CLUSTER}-worker-") and name.endswith("-compute")
        assert len(name) <= 63
        assert instance["labels"]["ray-user-node-type"] == NODE_TYPE
        # Ray's kind for nodes its autoscaler counts but never terminates (ray.autoscaler.tags)
        assert instance["labels"]["ray-node-type"] == "unmanaged"
        assert instance["labels"]["ray-node-status"] == "up-to-date"
        assert instance["labels"][GROUP_LABEL] == result.outs["group_id"]
    assert all(i["internal_ip"] and i["external_ip"] for i in result.outs["instances"])


def test_scale_3_5_1_0_2_ends_with_exactly_the_asked_workers(fake):
    provider = fast_provider()
    outs = provider.create(group_props(fake.endpoint, 3)).outs
    for count in (5, 1, 0, 2):
        outs = provider.update("id", outs, group_props(fake.endpoint, count)).outs
        assert outs["count"] == count
        assert set(outs["instance_names"]) == live_names(fake)
    assert len(fake.instances(PROJECT, ZONE)) == 2


def test_scale_down_deletes_the_newest_workers(fake):
    provider = fast_provider()
    first = provider.create(group_props(fake.endpoint, 2)).outs
    grown = provider.update("id", first, group_props(fake.endpoint, 4)).outs

    shrunk = provider.update("id", grown, group_props(fake.endpoint, 2)).outs

    assert set(shrunk["instance_names"]) == set(first["instance_names"])


def test_body_with_instance_only_fields_falls_back_to_parallel_inserts(fake):
    props = group_props(fake.endpoint, 3)
    props["body"] = {**props["body"], "deletionProtection": False}

    fast_provider().create(props)

    assert fake.cloud.calls["insert"] == 3
    assert fake.cloud.calls["bulkInsert"] == 0
    assert len(live_names(fake)) == 3


def test_cache_stopped_nodes_stops_on_scale_down_and_restarts_before_creating(fake):
    provider = fast_provider()
    outs = provider.create(group_props(fake.endpoint, 3, cache_stopped_nodes=True)).outs
    outs = provider.update("id", outs, group_props(fake.endpoint, 1, cache_stopped_nodes=True)).outs
    stopped = set(outs["stopped_instance_names"])
    assert len(stopped) == 2
    assert all(fake.instances(PROJECT, ZONE)[n]["status"] == "TERMINATED" for n in stopped)

    outs = provider.update("id", outs, group_props(fake.endpoint, 4, cache_stopped_nodes=True)).outs

    assert outs["count"] == 4
    assert stopped <= set(outs["instance_names"])
    assert fake.cloud.calls["start"] == 2
    assert fake.cloud.calls["delete"] == 0
    assert len(fake.instances(PROJECT, ZONE)) == 4


def test_autoscaler_workers_are_counted_but_never_touched(fake):
    ray_labels = {"ray-cluster-name": CLUSTER, "ray-node-type": "worker",
                  "ray-user-node-type": NODE_TYPE}
    fake.cloud.add_foreign_instance(PROJECT, ZONE, "ray-full-worker-0000aaaa-compute", ray_labels)
    provider = fast_provider()

    outs = provider.create(group_props(fake.endpoint, 2)).outs
    assert outs["autoscaler_instance_names"] == ["ray-full-worker-0000aaaa-compute"]
    outs = provider.update("id", outs, group_props(fake.endpoint, 3)).outs
    outs = provider.update("id", outs, group_props(fake.endpoint, 0)).outs
    provider.delete("id", outs)

    assert set(fake.instances(PROJECT, ZONE)) == {"ray-full-worker-0000aaaa-compute"}


def test_delete_removes_every_worker_of_the_group(fake):
    provider = fast_provider()
    outs = provider.create(group_props(fake.endpoint, 4)).outs

    provider.delete("id", outs)

    assert fake.instances(PROJECT, ZONE) == {}


def test_bulk_insert_properties_name_types_bare_like_an_instance_template():
    from infra.workers.compute_api import instance_properties

    zone_url = "projects/p/zones/us-west1-b"
    body = {
        "machineType": "zones/us-west1-b/machineTypes/n1-standard-2",
        "guestAccelerators": [{"acceleratorType": f"{zone_url}/acceleratorTypes/nvidia-tesla-t4",
                               "acceleratorCount": 1}],
        "disks": [{"boot": True, "initializeParams": {
            "diskType": "zones/us-west1-b/diskTypes/pd-ssd", "diskSizeGb": 50}}],
    }
    properties = instance_properties(body)
    assert properties["machineType"] == "n1-standard-2"
    assert properties["guestAccelerators"] == [
        {"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 1}]
    assert properties["disks"][0]["initializeParams"] == {"diskType": "pd-ssd", "diskSizeGb": 50}
    assert body["machineType"].startswith("zones/"), "the insert body itself is left alone"
