"""Spot with on-demand fallback (`provider.capacity.<type>.fallback: on-demand`): when every
allowed zone refuses spot for capacity, the missing workers are created on-demand, labelled
with what they got, one node per slot; a later up keeps them unless the policy says
`return_to_spot`. Driven through the real google-cloud client against the fake Compute API,
which answers spot inserts with GCE's stockout bodies while on-demand inserts go through."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from infra.workers import WorkerGroupError
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import CLUSTER, PROJECT, compute_body, fast_provider, group_props

REGION = "us-west1"
ZONES = ["us-west1-a", "us-west1-b", "us-west1-c"]
FALLBACK = {"fallback": "on-demand", "return_to_spot": False}


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        server.cloud.catalogue.zones[REGION] = list(ZONES)
        yield server


def spot_out_everywhere(fake: FakeComputeServer) -> None:
    for zone in ZONES:
        fake.faults.spot_capacity[zone] = 0


def cluster_instances(fake: FakeComputeServer) -> dict[str, dict[str, Any]]:
    """Every instance of the cluster in the region, by name."""
    found: dict[str, dict[str, Any]] = {}
    for zone in ZONES:
        found.update(fake.instances(PROJECT, zone, **{"ray-cluster-name": CLUSTER}))
    return found


def markets(fake: FakeComputeServer) -> dict[str, str]:
    """name -> (its ray-capacity label, what its scheduling really is)."""
    result = {}
    for name, instance in cluster_instances(fake).items():
        scheduling = instance.get("scheduling") or {}
        real = ("spot" if scheduling.get("preemptible") or
                scheduling.get("provisioningModel") == "SPOT" else "on-demand")
        label = instance["labels"].get("ray-capacity")
        assert label == real, f"{name} is labelled {label} but is {real}: {scheduling}"
        result[name] = real
    return result


def hostname_body() -> dict[str, Any]:
    """A body bulkInsert cannot carry (`hostname`): created by one insert per instance."""
    return {**compute_body(), "hostname": "worker.example.internal"}


@pytest.mark.parametrize("stockout_at_call", [False, True])
@pytest.mark.parametrize(
    "code", ["ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"])
@pytest.mark.parametrize("body", [compute_body(), hostname_body()], ids=["bulkInsert", "insert"])
def test_spot_stockout_in_every_zone_gives_on_demand_workers_counted_once(
        fake, code, stockout_at_call, body):
    spot_out_everywhere(fake)
    fake.faults.stockout_code, fake.faults.stockout_at_call = code, stockout_at_call

    outs = fast_provider().create(
        group_props(fake.endpoint, 3, body=body, capacity=FALLBACK)).outs

    assert markets(fake) == {name: "on-demand" for name in outs["instance_names"]}
    assert outs["count"] == 3 and len(cluster_instances(fake)) == 3
    assert {i["market"] for i in outs["instances"]} == {"on-demand"}
    for instance in cluster_instances(fake).values():
        assert instance["scheduling"] == {"provisioningModel": "STANDARD"}


def test_spot_the_zones_still_take_is_kept_and_only_the_rest_is_on_demand(fake):
    spot_out_everywhere(fake)
    fake.faults.spot_capacity["us-west1-b"] = 1

    outs = fast_provider().create(group_props(fake.endpoint, 4, capacity=FALLBACK)).outs

    assert sorted(markets(fake).values()) == ["on-demand"] * 3 + ["spot"]
    assert outs["count"] == 4 and len(cluster_instances(fake)) == 4


def test_without_the_policy_a_spot_stockout_is_an_error_and_nothing_is_on_demand(fake):
    spot_out_everywhere(fake)

    with pytest.raises(WorkerGroupError, match="no zone of region us-west1 had capacity"):
        fast_provider().create(group_props(fake.endpoint, 2))

    assert cluster_instances(fake) == {}


def test_spot_workers_with_capacity_are_labelled_spot(fake):
    outs = fast_provider().create(group_props(fake.endpoint, 2, capacity=FALLBACK)).outs

    assert markets(fake) == {name: "spot" for name in outs["instance_names"]}


def test_a_later_up_keeps_the_on_demand_workers_by_default(fake):
    spot_out_everywhere(fake)
    provider = fast_provider()
    first = provider.create(group_props(fake.endpoint, 2, capacity=FALLBACK)).outs
    fake.faults.spot_capacity.clear()  # spot is back

    again = provider.update("id", first, group_props(fake.endpoint, 2, capacity=FALLBACK)).outs

    assert again["instance_names"] == first["instance_names"]
    assert set(markets(fake).values()) == {"on-demand"}


def test_return_to_spot_replaces_on_demand_workers_when_spot_is_back(fake):
    spot_out_everywhere(fake)
    policy = {**FALLBACK, "return_to_spot": True}
    provider = fast_provider()
    first = provider.create(group_props(fake.endpoint, 2, capacity=policy)).outs
    fake.faults.spot_capacity["us-west1-a"] = 1  # room for one of the two

    once = provider.update("id", first, group_props(fake.endpoint, 2, capacity=policy)).outs

    assert sorted(markets(fake).values()) == ["on-demand", "spot"]
    assert once["count"] == 2 and len(cluster_instances(fake)) == 2
    fake.faults.spot_capacity.clear()

    twice = provider.update("id", once, group_props(fake.endpoint, 2, capacity=policy)).outs

    assert set(markets(fake).values()) == {"spot"}
    assert twice["count"] == 2 and len(cluster_instances(fake)) == 2


def test_a_scale_down_removes_on_demand_workers_first(fake):
    provider = fast_provider()
    first = provider.create(group_props(fake.endpoint, 1, capacity=FALLBACK)).outs
    spot_out_everywhere(fake)
    grown = provider.update("id", first, group_props(fake.endpoint, 3, capacity=FALLBACK)).outs
    assert sorted(markets(fake).values()) == ["on-demand", "on-demand", "spot"]

    provider.update("id", grown, group_props(fake.endpoint, 1, capacity=FALLBACK))

    assert markets(fake) == {first["instance_names"][0]: "spot"}


def test_a_group_from_before_the_policy_existed_changes_nothing_until_one_is_set(fake):
    provider = fast_provider()
    old = {k: v for k, v in group_props(fake.endpoint, 2).items() if k != "capacity"}

    unchanged = provider.diff("id", old, group_props(fake.endpoint, 2, capacity=None))
    assigned = provider.diff("id", old, group_props(fake.endpoint, 2, capacity=FALLBACK))

    assert not unchanged.changes
    assert assigned.changes and not assigned.replaces


def test_when_on_demand_is_out_too_the_error_tells_both_and_keeps_what_spot_made(fake):
    spot_out_everywhere(fake)
    fake.faults.spot_capacity["us-west1-a"] = 1
    for zone in ZONES:
        fake.faults.zone_capacity[zone] = 0  # on-demand is out as well

    with pytest.raises(WorkerGroupError) as failure:
        fast_provider().create(group_props(fake.endpoint, 3, capacity=FALLBACK))

    message = str(failure.value)
    assert "spot: created 1 of 3 instances" in message
    assert "on-demand: created 0 of 2 instances" in message
    assert failure.value.created == list(cluster_instances(fake))
    assert set(markets(fake).values()) == {"spot"}
