"""`invoke cost` and `invoke status` name a laddered type's nodes by the rung they got: a node
from a reservation is `reserved`, a flex-start one `flex-start`; both are priced at the
on-demand list price with a note saying so (a commitment's price and flex-start's discount
are not list prices), spot ones at spot. Nodes made by the worker group walking its ladder
against the fake (real google-cloud clients)."""

from __future__ import annotations

from datetime import date

import pytest

from model.config import parse_cluster_config
from ops.cloud.cost import LIST_PRICED_NOTE, cost_report, node_costs
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import (
    CLUSTER,
    NODE_TYPE,
    PROJECT,
    ZONE,
    fast_provider,
    gpu_body,
    group_props,
)

YAML_LADDER = [{"market": "reservation", "reservations": ["gpu-res"]}, {"market": "spot"},
               {"market": "flex-start", "max_run_duration_hours": 1}]
CONFIG = parse_cluster_config({
    "cluster_name": CLUSTER, "max_workers": 4,
    "provider": {"type": "gcp", "region": "us-west1", "availability_zone": ZONE,
                 "project_id": PROJECT, "capacity": {NODE_TYPE: {"ladder": YAML_LADDER}}},
    "available_node_types": {
        "head": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}},
        NODE_TYPE: {"resources": {"CPU": 2, "GPU": 1}, "max_workers": 4, "node_config": {
            "machineType": "n1-standard-2",
            "guestAccelerators": [{"acceleratorType": "nvidia-tesla-t4",
                                   "acceleratorCount": 1}],
            "scheduling": [{"onHostMaintenance": "TERMINATE"}]}}},
    "head_node_type": "head",
})
LADDER = CONFIG.provider.capacity_input(NODE_TYPE)["ladder"]  # as the worker group gets it


@pytest.fixture
def fake():
    with FakeComputeServer() as server:
        server.cloud.catalogue.zones["us-west1"] = [ZONE]
        yield server


def test_reserved_and_flex_start_nodes_are_shown_as_such_and_priced_at_list(fake):
    fake.cloud.reservations.add(PROJECT, ZONE, "gpu-res", 1, "n1-standard-2", accelerators=[
        {"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 1}])
    fake.faults.spot_capacity[ZONE] = 1
    outs = fast_provider().create(group_props(
        fake.endpoint, 3, body=gpu_body(1), capacity={"ladder": LADDER})).outs
    assert sorted(i["market"] for i in outs["instances"]) == [
        "flex-start", "reservation", "spot"]  # what `invoke status` lists per node

    costs = node_costs(CONFIG, endpoint=fake.endpoint)
    by_market = {c.market: c for c in costs}
    assert not by_market["reservation"].price.spot and not by_market["flex-start"].price.spot
    assert by_market["spot"].price.spot
    report = cost_report("test", CONFIG, costs, today=date(2026, 12, 3))
    markets = {line.split()[0]: line.split()[2] for line in report.splitlines()
               if line.startswith("ray-")}
    assert sorted(markets.values()) == ["flex-start", "reserved", "spot"]
    assert f"note: {LIST_PRICED_NOTE}" in report
    assert "on-demand list (reserved, flex-start, on-demand rungs)" in report
