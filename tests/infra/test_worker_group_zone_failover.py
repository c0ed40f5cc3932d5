"""Zone failover: workers a stocked-out zone refuses are created in the region's next zone, and
every later call (refresh, scale-down, destroy, the sweeper) finds them there."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infra.workers import WorkerGroupError
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import (
    CLUSTER,
    PROJECT,
    ZONE,
    compute_body,
    fast_provider,
    fast_sweeper,
    gpu_body,
    group_props,
    sweeper_props,
)

REGION = "us-west1"
ZONES = ["us-west1-a", "us-west1-b", "us-west1-c"]


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        server.cloud.catalogue.zones[REGION] = list(ZONES)
        # Another region's zone: never a fallback for a us-west1 group.
        server.cloud.catalogue.zones["us-east1"] = ["us-east1-b"]
        yield server


def by_zone(fake: FakeComputeServer) -> dict[str, set[str]]:
    """This cluster's instances in each zone of the region (and us-east1-b), empty ones left out."""
    found = {}
    for zone in [*ZONES, "us-east1-b"]:
        names = set(fake.instances(PROJECT, zone, **{"ray-cluster-name": CLUSTER}))
        if names:
            found[zone] = names
    return found


@pytest.mark.parametrize(
    "stockout", ["ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"]
)
def test_first_zone_exhausted_puts_every_worker_in_the_second_zone(fake, stockout):
    fake.faults.zone_capacity[ZONE] = 0
    fake.faults.stockout_code = stockout

    outs = fast_provider().create(group_props(fake.endpoint, 4)).outs

    assert by_zone(fake) == {"us-west1-b": set(outs["instance_names"])}
    assert outs["count"] == 4
    assert {i["zone"] for i in outs["instances"]} == {"us-west1-b"}


def test_a_zone_that_takes_some_keeps_them_and_the_rest_go_on(fake):
    fake.faults.zone_capacity[ZONE] = 2

    outs = fast_provider().create(group_props(fake.endpoint, 5)).outs

    assert {zone: len(names) for zone, names in by_zone(fake).items()} == {
        "us-west1-a": 2, "us-west1-b": 3}
    assert outs["count"] == 5


def test_a_per_zone_quota_fails_over_like_a_stockout(fake):
    fake.faults.zone_quota[ZONE] = 1

    fast_provider().create(group_props(fake.endpoint, 3))

    assert {zone: len(names) for zone, names in by_zone(fake).items()} == {
        "us-west1-a": 1, "us-west1-b": 2}


def test_every_zone_exhausted_is_one_clear_error_and_leaves_no_instance(fake):
    for zone in ZONES:
        fake.faults.zone_capacity[zone] = 0

    with pytest.raises(WorkerGroupError) as failure:
        fast_provider().create(group_props(fake.endpoint, 3))

    message = str(failure.value)
    assert "created 0 of 3 instances: no zone of region us-west1 had capacity" in message
    for zone in ZONES:
        assert f"{zone}: ZONE_RESOURCE_POOL_EXHAUSTED" in message
    assert "provider.fallback_zones" in message
    assert failure.value.created == []
    assert by_zone(fake) == {}


def test_pinned_fallback_zones_are_the_only_ones_tried_in_their_order(fake):
    fake.faults.zone_capacity[ZONE] = 0

    fast_provider().create(group_props(fake.endpoint, 2, fallback_zones=["us-west1-c"]))

    assert set(by_zone(fake)) == {"us-west1-c"}
    assert fake.cloud.calls["zones.list"] == 0


def test_failover_turned_off_stays_in_the_zone_and_says_so(fake):
    fake.faults.zone_capacity[ZONE] = 0

    with pytest.raises(WorkerGroupError, match="zone failover is off"):
        fast_provider().create(group_props(fake.endpoint, 2, fallback_zones=False))

    assert by_zone(fake) == {}
    assert fake.cloud.calls["bulkInsert"] == 1


def test_zones_without_the_machine_or_gpu_type_are_skipped(fake):
    body = gpu_body(1)
    fake.faults.zone_capacity[ZONE] = 0
    fake.cloud.catalogue.unoffered["us-west1-b"] = {"nvidia-tesla-t4"}

    outs = fast_provider().create(group_props(fake.endpoint, 2, body=body)).outs

    assert set(by_zone(fake)) == {"us-west1-c"}
    instance = fake.instances(PROJECT, "us-west1-c")[outs["instance_names"][0]]
    assert instance["guestAccelerators"][0]["acceleratorType"].endswith("nvidia-tesla-t4")
    assert "/zones/us-west1-c/" in instance["machineType"]


def test_a_body_that_needs_single_inserts_moves_its_zonal_urls_too(fake):
    body = {**compute_body(), "hostname": "worker.example.internal"}
    fake.faults.zone_capacity[ZONE] = 0

    outs = fast_provider().create(group_props(fake.endpoint, 2, body=body)).outs

    assert fake.cloud.calls["insert"] == 4
    for name in outs["instance_names"]:
        assert "/zones/us-west1-b/" in fake.instances(PROJECT, "us-west1-b")[name]["machineType"]


def test_refresh_and_scale_down_find_workers_in_the_failover_zone(fake):
    provider = fast_provider()
    fake.faults.zone_capacity[ZONE] = 2
    outs = provider.create(group_props(fake.endpoint, 4)).outs

    refreshed = provider.read("id", outs).outs
    assert sorted(i["zone"] for i in refreshed["instances"]) == [
        "us-west1-a", "us-west1-a", "us-west1-b", "us-west1-b"]

    outs = provider.update("id", refreshed, group_props(fake.endpoint, 1)).outs
    assert outs["count"] == 1
    assert sum(len(names) for names in by_zone(fake).values()) == 1


def test_destroy_and_the_sweeper_leave_nothing_in_any_zone_of_the_region(fake):
    fake.faults.zone_capacity[ZONE] = 1
    provider = fast_provider()
    props = group_props(fake.endpoint, 3)
    provider.create(props)
    fake.cloud.add_foreign_instance(PROJECT, "us-west1-c", f"ray-{CLUSTER}-worker-aa-compute",
                                    {"ray-cluster-name": CLUSTER, "ray-node-type": "worker"})
    fake.cloud.add_foreign_instance(PROJECT, "us-east1-b", f"ray-{CLUSTER}-worker-bb-compute",
                                    {"ray-cluster-name": CLUSTER, "ray-node-type": "worker"})

    provider.delete("id", props)
    assert set(by_zone(fake)) == {"us-west1-c", "us-east1-b"}

    deleted = fast_sweeper().sweep(sweeper_props(fake.endpoint, has_tpu=False))
    assert deleted == [f"ray-{CLUSTER}-worker-aa-compute"]
    assert by_zone(fake) == {"us-east1-b": {f"ray-{CLUSTER}-worker-bb-compute"}}


def test_preempted_workers_are_replaced_by_refresh_then_update_in_the_first_zone_again(fake):
    """What `invoke up` (pulumi up --refresh) does to the group: read, diff, update."""
    provider = fast_provider()
    props = group_props(fake.endpoint, 3)
    fake.faults.zone_capacity[ZONE] = 0
    outs = provider.create(props).outs
    lost = outs["instance_names"][0]
    fake.cloud.preempt(PROJECT, "us-west1-b", lost)
    spot = outs["instance_names"][1]
    fake.cloud.instances[(PROJECT, "us-west1-b")][spot]["status"] = "TERMINATED"
    del fake.faults.zone_capacity[ZONE]

    refreshed = provider.read("id", outs).outs
    assert refreshed["count"] == 1
    assert provider.diff("id", refreshed, props).changes

    outs = provider.update("id", refreshed, props).outs
    assert outs["count"] == 3
    assert {lost, spot}.isdisjoint(outs["instance_names"])
    assert {zone: len(names) for zone, names in by_zone(fake).items()} == {
        "us-west1-a": 2, "us-west1-b": 1}


@pytest.mark.parametrize("single_inserts", [False, True], ids=["bulkInsert", "insert"])
def test_a_stockout_answered_by_the_call_itself_fails_over_without_retrying(fake, single_inserts):
    body = {**compute_body(), "hostname": "w.example.internal"} if single_inserts else None
    fake.faults.zone_capacity[ZONE] = 0
    fake.faults.stockout_at_call = True

    fast_provider().create(group_props(fake.endpoint, 3, **({"body": body} if body else {})))

    assert {zone: len(names) for zone, names in by_zone(fake).items()} == {"us-west1-b": 3}
    method = "insert" if single_inserts else "bulkInsert"
    assert fake.cloud.calls[method] == (6 if single_inserts else 2)


def test_cached_workers_in_a_failover_zone_are_stopped_and_restarted_there(fake):
    provider = fast_provider()
    fake.faults.zone_capacity[ZONE] = 0
    outs = provider.create(group_props(fake.endpoint, 2, cache_stopped_nodes=True)).outs
    fake.faults.zone_capacity.pop(ZONE)

    outs = provider.update("id", outs, group_props(fake.endpoint, 0, cache_stopped_nodes=True)).outs
    assert {i["status"] for i in fake.instances(PROJECT, "us-west1-b").values()} == {"TERMINATED"}
    assert outs["count"] == 0 and len(outs["stopped_instance_names"]) == 2

    outs = provider.update("id", outs, group_props(fake.endpoint, 2, cache_stopped_nodes=True)).outs
    assert outs["count"] == 2
    assert {i["status"] for i in fake.instances(PROJECT, "us-west1-b").values()} == {"RUNNING"}
    assert by_zone(fake).keys() == {"us-west1-b"}
