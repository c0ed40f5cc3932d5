"""The head's provider launches as the autoscaler asks (Ray's tags, Ray's GCP clients pointed at
the fake Compute API): each node labelled with the market it got; for a type with
`provider.capacity` fallback, on-demand when GCE refuses spot for capacity in any of the forms
GCE answers with (the operation's error, its `_WITH_DETAILS` code, a 503 on the insert call),
each node made once; any other refusal, or a type without the fallback, fails as Ray's own
provider does. The provider's launch checks see every launch first and may refuse it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.ray_cooperation import (
    as_the_programs_head,
    autoscaler_launch,
    market_of_instance,
    ray_apis_fixture,  # noqa: F401 (`ray_apis_at_fake`)
)

PROJECT, ZONE, CLUSTER = "my-proj", "us-west1-a", "c"
SPOT = {"machineType": "n1-standard-2",
        "scheduling": {"provisioningModel": "SPOT", "instanceTerminationAction": "STOP",
                       "onHostMaintenance": "TERMINATE"}}
PROVIDER = {"project_id": PROJECT, "availability_zone": ZONE,
            "capacity": {"gpu": {"fallback": "on-demand"}}}


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        as_the_programs_head(server, PROJECT)
        yield server


def instances(fake: FakeComputeServer) -> dict[str, dict[str, Any]]:
    return fake.instances(PROJECT, ZONE)


def launch(node_type: str, count: int, body: dict[str, Any] = SPOT,
           checks: tuple[Callable[..., None], ...] = ()) -> dict[str, Any]:
    return autoscaler_launch(PROVIDER, CLUSTER, node_type, body, count, checks)


@pytest.mark.parametrize("form", ["operation", "with_details", "at_call"])
def test_every_form_of_gces_stockout_gives_on_demand_nodes(form, fake, ray_apis_at_fake):
    fake.faults.spot_capacity[ZONE] = 0
    if form == "with_details":
        fake.faults.stockout_code = "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    fake.faults.stockout_at_call = form == "at_call"

    made = launch("gpu", 2)

    assert set(made) == set(instances(fake))
    for instance in instances(fake).values():
        # The same body, STANDARD, the spot-only field gone, the rest kept.
        assert instance["scheduling"] == {"provisioningModel": "STANDARD",
                                          "onHostMaintenance": "TERMINATE"}
        assert instance["labels"]["ray-capacity"] == "on-demand"
        assert instance["labels"]["ray-user-node-type"] == "gpu"
        assert instance["labels"]["ray-node-type"] == "worker"


def test_spot_for_as_many_as_the_zone_takes_then_on_demand_each_node_once(fake,
                                                                          ray_apis_at_fake):
    fake.faults.spot_capacity[ZONE] = 2

    made = launch("gpu", 5)

    assert len(made) == len(instances(fake)) == 5
    markets = {name: market_of_instance(i) for name, i in instances(fake).items()}
    assert sorted(markets.values()) == ["on-demand"] * 3 + ["spot"] * 2
    assert all(instances(fake)[name]["labels"]["ray-capacity"] == market
               for name, market in markets.items())


def test_a_refusal_that_is_not_for_capacity_fails_the_launch_and_makes_no_on_demand_node(
        fake, ray_apis_at_fake):
    fake.faults.fail_next(403, methods={"insert"})

    with pytest.raises(Exception, match="403"):
        launch("gpu", 1)
    assert instances(fake) == {}


def test_a_type_without_the_fallback_fails_on_a_stockout_as_rays_provider_does(
        fake, ray_apis_at_fake):
    fake.faults.spot_capacity[ZONE] = 0

    with pytest.raises(Exception, match="ZONE_RESOURCE_POOL_EXHAUSTED"):
        launch("other_spot_type", 1)
    assert instances(fake) == {}


def test_a_type_without_the_fallback_is_labelled_with_its_own_market(fake, ray_apis_at_fake):
    launch("other_spot_type", 1)
    launch("plain", 1, {"machineType": "n1-standard-2"})

    labels = {i["labels"]["ray-user-node-type"]: i["labels"]["ray-capacity"]
              for i in instances(fake).values()}
    assert labels == {"other_spot_type": "spot", "plain": "on-demand"}


def test_a_launch_check_sees_each_launch_and_may_refuse_it(fake, ray_apis_at_fake):
    seen: list[tuple[str, int]] = []

    def record(node_config: dict[str, Any], tags: dict[str, str], count: int) -> None:
        seen.append((tags["ray-user-node-type"], count))

    def refuse(node_config: dict[str, Any], tags: dict[str, str], count: int) -> None:
        raise RuntimeError(f"refused: {count} x {node_config['machineType']}")

    launch("gpu", 2, checks=(record,))
    with pytest.raises(RuntimeError, match="refused: 3 x n1-standard-2"):
        launch("gpu", 3, checks=(record, refuse))

    assert seen == [("gpu", 2), ("gpu", 3)]
    assert len(instances(fake)) == 2  # the refused launch made nothing


ZONE_B = "us-west1-b"
ACROSS = {"project_id": PROJECT, "availability_zone": ZONE, "capacity": {"gpu": {"ladder": [
    {"market": "spot", "zones": [ZONE, ZONE_B]}, {"market": "on-demand"}]}}}
A_ZONE_URL_BODY = {**SPOT, "machineType": f"zones/{ZONE}/machineTypes/n1-standard-2",
                   "disks": [{"boot": True, "initializeParams": {
                       "diskType": f"zones/{ZONE}/diskTypes/pd-balanced"}}]}


def test_a_rung_in_another_zone_makes_lists_and_terminates_the_node_there(fake,
                                                                          ray_apis_at_fake):
    from bootstrap.head_provider.provider import HeadNodeProvider

    fake.faults.spot_capacity[ZONE] = 0  # spot is out at home, there in the rung's next zone

    made = autoscaler_launch(ACROSS, CLUSTER, "gpu", A_ZONE_URL_BODY, 2)

    there = fake.instances(PROJECT, ZONE_B)
    assert set(made) == set(there) and not instances(fake)
    for instance in there.values():
        assert market_of_instance(instance) == "spot"
        assert instance["machineType"].endswith(f"zones/{ZONE_B}/machineTypes/n1-standard-2")
        assert instance["disks"][0]["initializeParams"]["diskType"] == \
            f"zones/{ZONE_B}/diskTypes/pd-balanced"
    provider = HeadNodeProvider(ACROSS, CLUSTER)
    assert sorted(provider.non_terminated_nodes({})) == sorted(made)
    first, second = sorted(made)
    assert provider.node_tags(first)["ray-user-node-type"] == "gpu"
    provider.terminate_node(first)  # in the node's own zone, not Ray's availability_zone
    provider.set_node_tags(second, {"ray-node-status": "up-to-date"})
    fake.cloud.settle()
    assert set(fake.instances(PROJECT, ZONE_B)) == {second}
    assert fake.instances(PROJECT, ZONE_B)[second]["labels"]["ray-node-status"] == "up-to-date"
    assert provider.non_terminated_nodes({}) == [second]


def test_a_provider_without_other_zones_lists_only_its_own(fake, ray_apis_at_fake):
    from bootstrap.head_provider.provider import HeadNodeProvider

    assert HeadNodeProvider(PROVIDER, CLUSTER).zone_resources == {}
    assert list(HeadNodeProvider(ACROSS, CLUSTER).zone_resources) == [ZONE_B]
