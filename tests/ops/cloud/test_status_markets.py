"""`invoke status` says which nodes are spot and which on-demand: a spot type's workers that
fell back to on-demand show as such, from the stack's outputs (the worker group records what
each instance really is); outputs written before that show `-`. The workers Ray's autoscaler
launched are listed from the Compute API (the fake, through the real google-cloud client),
each with the market the head's provider got for it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from infra.workers.retry import INTERACTIVE
from model.labels import ray_labels
from ops.cloud.autoscaled import autoscaled_rows
from ops.cloud.cloud_api import StackApi
from ops.cloud.status import nodes_table
from ops.errors import OpsError
from ops.stacks.cloud_nodes import LISTING, api_errors, autoscaled_nodes
from ops.stacks.stack import parse_outputs
from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.ray_cooperation import (  # noqa: F401 (`ray_apis_at_fake`)
    as_the_programs_head,
    autoscaler_launch,
    ray_apis_fixture,
)

PROJECT, ZONE = "my-proj", "us-west1-a"
SPOT_BODY = {"machineType": "n1-standard-2",
             "scheduling": {"provisioningModel": "SPOT", "instanceTerminationAction": "STOP"}}


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        yield server


def outputs(*workers: dict[str, Any]) -> dict[str, Any]:
    return {
        "cluster_name": "c", "project": PROJECT, "zone": ZONE, "head_name": "ray-c-head",
        "head_internal_ip": "10.0.0.2",
        "ssh_user": "ubuntu", "ssh_private_key": "unused",
        "nodes": [{"name": "ray-c-head", "node_type": "head", "kind": "head",
                   "internal_ip": "10.0.0.2", "status": "RUNNING", "market": "on-demand"},
                  *workers],
    }


def worker(name: str, market: str | None) -> dict[str, Any]:
    node = {"name": name, "node_type": "gpu", "kind": "worker", "internal_ip": "10.0.0.3",
            "status": "RUNNING"}
    return node if market is None else {**node, "market": market}


def rows(raw: dict[str, Any]) -> dict[str, list[str]]:
    table = nodes_table(parse_outputs("s", raw)).splitlines()
    header = table[0].split()
    assert header[3] == "MARKET"
    return {line.split()[0]: line.split() for line in table[1:]}


def test_spot_workers_and_their_on_demand_fallbacks_are_told_apart():
    found = rows(outputs(worker("w-spot", "spot"), worker("w-fallback", "on-demand")))
    assert found["w-spot"][3] == "spot"
    assert found["w-fallback"][3] == "on-demand"
    assert found["ray-c-head"][3] == "on-demand"


def test_outputs_from_before_the_market_was_recorded_show_a_dash():
    assert rows(outputs(worker("w-old", None)))["w-old"][3] == "-"


def test_autoscaled_workers_show_with_the_market_the_heads_provider_got(fake, ray_apis_at_fake):
    provider = {"project_id": PROJECT, "availability_zone": ZONE,
                "capacity": {"gpu": {"fallback": "on-demand"}}}
    as_the_programs_head(fake, PROJECT)
    (spot,) = autoscaler_launch(provider, "c", "gpu", SPOT_BODY, 1)
    fake.faults.spot_capacity[ZONE] = 0
    (fallback,) = autoscaler_launch(provider, "c", "gpu", SPOT_BODY, 1)
    # The head and Pulumi's workers are the outputs' rows, not listed again.
    fake.cloud.add_foreign_instance(PROJECT, ZONE, "ray-c-head", ray_labels("c", "head", "head"))
    fake.cloud.add_foreign_instance(PROJECT, ZONE, "w-pinned", ray_labels("c", "worker", "gpu"))

    stack = parse_outputs("s", outputs(worker("w-pinned", "spot")))
    listed = autoscaled_nodes(stack, StackApi(stack, fake.endpoint).clients)
    table = nodes_table(stack, listed).splitlines()[1:]

    found = {line.split()[0]: line.split() for line in table}
    assert found[spot][1:4] == ["gpu", "autoscaled", "spot"]
    assert found[fallback][1:4] == ["gpu", "autoscaled", "on-demand"]
    assert sorted(line.split()[0] for line in table) == sorted(
        ["ray-c-head", "w-pinned", spot, fallback])  # each node once


def test_an_unreachable_api_leaves_the_autoscaled_workers_out_in_one_line():
    closed = "127.0.0.1:9"  # nothing answers
    nodes, lines = autoscaled_rows(StackApi(parse_outputs("s", outputs()), closed))
    assert nodes == []
    assert len(lines) == 1
    assert lines[0].startswith(f"{LISTING} failed: the API did not answer (")


def test_an_api_error_in_the_autoscaled_listing_is_worded_as_api_errors_words_it(fake):
    api = StackApi(parse_outputs("s", outputs()), fake.endpoint)
    fake.faults.fail_next(*[503] * INTERACTIVE.max_attempts, methods={"aggregatedList"})
    nodes, lines = autoscaled_rows(api)  # retried as status retries, then said

    fake.faults.fail_next(*[503] * INTERACTIVE.max_attempts, methods={"aggregatedList"})
    with pytest.raises(OpsError) as worded, api_errors(LISTING):
        # the same listing, the same answer, worded by api_errors
        autoscaled_nodes(api.outputs, api.clients)

    assert nodes == []
    assert lines == [str(worded.value)]
    assert lines[0].startswith(f"{LISTING} failed: 503 ")
    assert "Service Unavailable" in lines[0]
