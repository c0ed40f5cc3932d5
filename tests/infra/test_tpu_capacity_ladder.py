"""TPU slices walk their type's capacity ladder as queued resources: a reservation
(`reservationName`, node `schedulingConfig.reserved`), the Spot tier, on-demand. A request GCP
fails (the reservation full, no Spot capacity) is withdrawn and the next rung's is queued under
the same name: one slice, never two. Driven through google-cloud-tpu's real client against the
fake TPU API, which holds reservations and fails tiers as told (tests/fakes/compute/queued.py);
the config accepts such a ladder only with provider.tpu_queued_resources."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from infra.workers.queued_slice import QueuedSliceProvider
from model.config import ConfigError, parse_cluster_config
from ops.review.plan_engine import run_program
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.helpers import FAST_DEADLINES, PROJECT, ZONE, fast_retry, tpu_body
from tests.support.program_runs import stack_yaml

NAME = "ray-full-worker-0123abcd-tpu"
LADDER = [{"market": "reservation", "reservations": ["tpu-res"]}, {"market": "spot"},
          {"market": "on-demand"}]


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(queued_wait_polls=1)) as server:
        yield server


def props(fake: FakeComputeServer, ladder: list[dict[str, Any]]) -> dict[str, Any]:
    return {"project": PROJECT, "zone": ZONE, "name": NAME, "body": tpu_body(),
            "wait_minutes": 1, "valid_until_minutes": None, "credentials": None,
            "api_endpoint": fake.endpoint,
            "capacity": {"ladder": ladder, "provision_timeout_s": 5}}


def provider() -> QueuedSliceProvider:
    return QueuedSliceProvider(retry=fast_retry(), deadlines=FAST_DEADLINES)


def test_a_reservation_with_room_gives_a_reserved_slice(fake):
    reservation = fake.cloud.reservations.add(PROJECT, ZONE, "tpu-res", 1, "v4-8")

    outs = provider().create(props(fake, LADDER)).outs

    assert outs["queued_state"] == "ACTIVE"
    request = fake.queued.location(PROJECT, ZONE)[NAME]
    assert request["reservationName"] == f"projects/{PROJECT}/locations/{ZONE}/reservations/" \
        "tpu-res"
    assert "spot" not in request
    node = fake.tpu_nodes(PROJECT, ZONE)[NAME]
    assert node["schedulingConfig"] == {"reserved": True}
    assert node["labels"]["ray-capacity"] == "reservation"
    assert len(reservation.consumers) == 1


def test_reservation_full_and_spot_out_walk_down_to_one_on_demand_slice(fake):
    fake.cloud.reservations.add(PROJECT, ZONE, "tpu-res", 0, "v4-8")
    fake.faults.queued_tier_failure["spot"] = "no Spot capacity for v4-8 in the zone"

    outs = provider().create(props(fake, LADDER)).outs

    assert outs["queued_state"] == "ACTIVE"
    (request,) = fake.queued.location(PROJECT, ZONE).values()
    assert "spot" not in request and "reservationName" not in request
    (node,) = fake.tpu_nodes(PROJECT, ZONE).values()
    assert node["labels"]["ray-capacity"] == "on-demand"
    assert fake.cloud.calls["tpu.queuedResources.create"] == 3
    assert fake.cloud.calls["tpu.queuedResources.delete"] == 2  # each failed one withdrawn


ANY_LADDER = [{"market": "any-reservation"}, {"market": "on-demand"}]


def test_an_any_reservation_rung_consumes_a_matching_open_reservation(fake):
    fake.cloud.reservations.add(PROJECT, ZONE, "other-shape", 4, "v5p-8",
                                specific_required=False)
    fake.cloud.reservations.add(PROJECT, ZONE, "named-only", 4, "v4-8")
    open_one = fake.cloud.reservations.add(PROJECT, ZONE, "open-v4", 1, "v4-8",
                                           specific_required=False)

    outs = provider().create(props(fake, ANY_LADDER)).outs

    assert outs["queued_state"] == "ACTIVE"
    request = fake.queued.location(PROJECT, ZONE)[NAME]
    assert "reservationName" not in request and "spot" not in request
    node = fake.tpu_nodes(PROJECT, ZONE)[NAME]
    assert node["schedulingConfig"] == {"reserved": True}
    assert node["labels"]["ray-capacity"] == "any-reservation"
    assert len(open_one.consumers) == 1  # consumed, as GCP counts it
    assert fake.cloud.calls["tpu.queuedResources.create"] == 1


def test_any_reservation_without_an_open_matching_one_fails_and_walks_down(fake):
    # One that names it only (specificReservationRequired) and one that is full: neither.
    fake.cloud.reservations.add(PROJECT, ZONE, "named-only", 4, "v4-8")
    fake.cloud.reservations.add(PROJECT, ZONE, "open-full", 0, "v4-8", specific_required=False)

    outs = provider().create(props(fake, ANY_LADDER)).outs

    assert outs["queued_state"] == "ACTIVE"
    node = fake.tpu_nodes(PROJECT, ZONE)[NAME]
    assert node["labels"]["ray-capacity"] == "on-demand"
    assert not node.get("schedulingConfig", {}).get("reserved")
    assert fake.cloud.calls["tpu.queuedResources.delete"] == 1  # the failed request withdrawn


def test_the_fake_refuses_a_spot_request_in_a_reservation_as_the_api_does(fake):
    from infra.workers.queued_api import rung_request

    parent = f"projects/{PROJECT}/locations/{ZONE}"
    body = rung_request(parent, NAME, tpu_body(), None, {"market": "spot"})
    body["tpu"]["nodeSpec"][0]["node"]["schedulingConfig"] = {"reserved": True}
    with pytest.raises(Exception, match="Spot request cannot be made in a reservation"):
        fake.queued.create(PROJECT, ZONE, NAME, body)


def test_a_reservation_that_does_not_exist_is_refused_not_walked_past(fake):
    with pytest.raises(Exception, match="reservation projects/.*/tpu-res not found"):
        provider().create(props(fake, LADDER))
    assert fake.queued.location(PROJECT, ZONE) == {}


def tpu_ladder_yaml(ladder: list[dict[str, Any]], queued: bool = True) -> dict[str, Any]:
    raw = copy.deepcopy(stack_yaml("tpu-queued" if queued else "tpu"))
    tpu_type = next(name for name, t in raw["available_node_types"].items()
                    if "acceleratorType" in t["node_config"]
                    or "acceleratorConfig" in t["node_config"])
    raw["provider"]["capacity"] = {tpu_type: {"ladder": ladder}}
    return raw


def test_the_config_takes_a_tpu_ladder_with_queued_resources_only():
    parse_cluster_config(tpu_ladder_yaml(LADDER))
    with pytest.raises(ConfigError, match="set provider.tpu_queued_resources"):
        parse_cluster_config(tpu_ladder_yaml(LADDER, queued=False))
    with pytest.raises(ConfigError, match="a TPU slice has no flex-start rung"):
        parse_cluster_config(tpu_ladder_yaml([{"market": "flex-start"}]))


def test_the_program_hands_the_ladder_to_each_queued_slice():
    raw = tpu_ladder_yaml(LADDER)
    run = run_program({"ray-gcp:clusterConfig": json.dumps(raw)}, stack="tpu-queued")
    slices = run.of_type("pulumi-python:dynamic/ray-gcp:QueuedTpuSlice")
    assert slices and all(s.inputs["capacity"] == {"ladder": LADDER} for s in slices)
