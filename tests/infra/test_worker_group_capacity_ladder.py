"""Pinned workers walk their type's capacity ladder (provider.capacity.<type>.ladder): specific
reservations (spread across the list, one shared from another project), any reservation, spot,
flex-start (Dynamic Workload Scheduler) and on-demand, moving down only on capacity refusals.
Driven through the real google-cloud client against the fake Compute API, which holds
reservations and refuses and consumes them as GCE does (tests/fakes/compute/reservations.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import CLUSTER, PROJECT, fast_provider, gpu_body, group_props

REGION = "us-west1"
ZONES = ["us-west1-a", "us-west1-b", "us-west1-c"]
OTHER = "shared-proj"
LADDER = [
    {"market": "reservation", "reservations": ["gpu-res", f"projects/{OTHER}/reservations/pool"]},
    {"market": "spot"},
    {"market": "flex-start", "max_run_duration_s": 7200},
    {"market": "on-demand"},
]
T4 = [{"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 1}]


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        server.cloud.catalogue.zones[REGION] = list(ZONES)
        yield server


def reserve(fake: FakeComputeServer, name: str, count: int, project: str = PROJECT,
            **options: Any) -> Any:
    return fake.cloud.reservations.add(project, ZONES[0], name, count, "n1-standard-2",
                                       accelerators=T4, **options)


def spot_out_everywhere(fake: FakeComputeServer) -> None:
    for zone in ZONES:
        fake.faults.spot_capacity[zone] = 0


def instances(fake: FakeComputeServer) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for zone in ZONES:
        found.update(fake.instances(PROJECT, zone, **{"ray-cluster-name": CLUSTER}))
    return found


def by_market(fake: FakeComputeServer) -> dict[str, list[dict[str, Any]]]:
    """The cluster's instances by their ray-capacity label."""
    result: dict[str, list[dict[str, Any]]] = {}
    for instance in instances(fake).values():
        result.setdefault(instance["labels"]["ray-capacity"], []).append(instance)
    return result


def props(fake: FakeComputeServer, count: int, ladder: list[dict[str, Any]],
          **policy: Any) -> dict[str, Any]:
    return group_props(fake.endpoint, count, body=gpu_body(1),
                       capacity={"ladder": ladder, **policy})


def test_reservation_full_spot_stocked_out_the_rest_come_through_flex_start(fake):
    gpu_res = reserve(fake, "gpu-res", 2)
    pool = reserve(fake, "pool", 1, project=OTHER, shared_with=[PROJECT])
    spot_out_everywhere(fake)

    outs = fast_provider().create(props(fake, 6, LADDER)).outs

    markets = by_market(fake)
    assert {m: len(v) for m, v in markets.items()} == {"reservation": 3, "flex-start": 3}
    assert outs["count"] == 6 and len(gpu_res.consumers) == 2 and len(pool.consumers) == 1
    reserved = sorted(i["reservationAffinity"]["values"][0] for i in markets["reservation"])
    assert reserved == ["gpu-res", "gpu-res", f"projects/{OTHER}/reservations/pool"]
    assert sorted(i["labels"]["ray-reservation"] for i in markets["reservation"]) == [
        "gpu-res", "gpu-res", "pool"]
    for instance in markets["reservation"]:
        assert instance["scheduling"]["provisioningModel"] == "STANDARD"
        assert instance["reservationAffinity"]["consumeReservationType"] == \
            "SPECIFIC_RESERVATION"
    for instance in markets["flex-start"]:
        assert instance["scheduling"] == {
            "onHostMaintenance": "TERMINATE", "provisioningModel": "FLEX_START",
            "instanceTerminationAction": "DELETE", "maxRunDuration": {"seconds": "7200"}}
        assert instance["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert {i["market"] for i in outs["instances"]} == {"reservation", "flex-start"}


def test_healthy_spot_takes_what_the_reservation_cannot_and_flex_start_is_never_asked(fake):
    reserve(fake, "gpu-res", 1)
    reserve(fake, "pool", 0, project=OTHER, shared_with=[PROJECT])

    fast_provider().create(props(fake, 3, LADDER))

    assert {m: len(v) for m, v in by_market(fake).items()} == {"reservation": 1, "spot": 2}
    for instance in by_market(fake)["spot"]:
        assert instance["scheduling"]["provisioningModel"] == "SPOT"


def test_a_reservation_that_cannot_be_targeted_stops_the_walk_with_nothing_made_below(fake):
    reserve(fake, "gpu-res", 4, specific_required=False)  # a config error, not capacity

    with pytest.raises(Exception, match="specificReservationRequired is not set"):
        fast_provider().create(props(fake, 2, LADDER))

    assert instances(fake) == {}


def test_a_reservation_that_does_not_exist_names_the_setting_and_the_fix(fake):
    with pytest.raises(Exception, match="reservation gpu-res cannot be read in us-west1-a") as e:
        fast_provider().create(props(fake, 1, LADDER))
    assert "provider.capacity" in str(e.value) and "gcloud compute reservations list" in str(
        e.value)
    assert instances(fake) == {}


def test_an_unshared_reservation_of_another_project_is_refused_not_walked_past(fake):
    reserve(fake, "gpu-res", 0)
    reserve(fake, "pool", 2, project=OTHER)  # not shared with PROJECT

    with pytest.raises(Exception, match="not shared with project"):
        fast_provider().create(props(fake, 1, LADDER))
    assert instances(fake) == {}


def test_flex_start_not_provisioned_in_time_is_deleted_and_on_demand_takes_the_nodes(fake):
    spot_out_everywhere(fake)
    fake.faults.flex_start_s = 4.0  # PENDING that long, waiting for DWS
    ladder = [{"market": "spot"}, {"market": "flex-start"}, {"market": "on-demand"}]

    outs = fast_provider().create(props(fake, 2, ladder, provision_timeout_s=0.5)).outs

    assert {i["market"] for i in outs["instances"] if i["status"] != "STOPPING"} == {
        "on-demand"}
    fake.cloud.wait_for(fake.cloud.operations[max(fake.cloud.operations)], 5)
    fake.cloud.settle()
    assert {m: len(v) for m, v in by_market(fake).items()} == {"on-demand": 2}
    for instance in by_market(fake)["on-demand"]:
        assert instance["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}


def test_flex_start_nodes_wait_pending_and_count_as_the_groups_once_running(fake):
    spot_out_everywhere(fake)
    fake.faults.flex_start_s = 0.5

    outs = fast_provider().create(props(fake, 2, [{"market": "spot"},
                                                   {"market": "flex-start"}])).outs

    assert outs["count"] == 2 and {i["status"] for i in outs["instances"]} == {"RUNNING"}
    assert {m: len(v) for m, v in by_market(fake).items()} == {"flex-start": 2}


def test_flex_start_refused_for_capacity_moves_down_to_on_demand(fake):
    spot_out_everywhere(fake)
    for zone in ZONES:
        fake.faults.flex_capacity[zone] = 0
    ladder = [{"market": "spot"}, {"market": "flex-start"}, {"market": "on-demand"}]

    fast_provider().create(props(fake, 2, ladder))

    assert {m: len(v) for m, v in by_market(fake).items()} == {"on-demand": 2}


def test_any_reservation_consumes_a_matching_open_reservation_and_no_more(fake):
    open_res = reserve(fake, "open", 1, specific_required=False)
    ladder = [{"market": "any-reservation"}, {"market": "on-demand"}]

    fast_provider().create(props(fake, 3, ladder))

    assert {m: len(v) for m, v in by_market(fake).items()} == {"any-reservation": 1,
                                                                "on-demand": 2}
    assert len(open_res.consumers) == 1  # the on-demand ones ask for NO_RESERVATION


def one_reserved_place_spot_and_flex_start_out(fake: FakeComputeServer) -> None:
    reserve(fake, "gpu-res", 1)
    reserve(fake, "pool", 0, project=OTHER, shared_with=[PROJECT])
    spot_out_everywhere(fake)
    for zone in ZONES:
        fake.faults.flex_capacity[zone] = 0


def test_every_rung_refused_names_each_rung_and_keeps_what_was_made(fake):
    one_reserved_place_spot_and_flex_start_out(fake)
    for zone in ZONES:
        fake.faults.zone_capacity[zone] = 0

    with pytest.raises(Exception) as failure:
        fast_provider().create(props(fake, 3, LADDER))

    message = str(failure.value)
    assert "2 of 3 nodes found no capacity on any rung" in message
    for rung in ("reservation: created 0 of 2", "[projects/shared-proj/reservations/pool] do "
                 "not have enough resources", "spot:",
                 "flex-start:", "on-demand:"):
        assert rung in message
    assert failure.value.created == list(instances(fake))
    assert {m: len(v) for m, v in by_market(fake).items()} == {"reservation": 1}


def test_a_scale_down_removes_on_demand_first_and_reserved_nodes_last(fake):
    one_reserved_place_spot_and_flex_start_out(fake)
    provider = fast_provider()
    outs = provider.create(props(fake, 3, LADDER)).outs
    fake.faults.spot_capacity.clear()

    provider.update("id", outs, props(fake, 1, LADDER))
    fake.cloud.wait_for(fake.cloud.operations[max(fake.cloud.operations)], 5)
    fake.cloud.settle()

    assert {m: len(v) for m, v in by_market(fake).items()} == {"reservation": 1}
