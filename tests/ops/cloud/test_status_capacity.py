"""`invoke status` shows what waits for capacity and which nodes end: a flex-start node still
PENDING (the head's provider launched it on its flex-start rung), a running one with the time
GCE ends it, and a TPU slice's queued request per state (WAITING_FOR_RESOURCES, FAILED with
GCP's reason) with its rung; `invoke status --json` gives the same as data. The fake's Compute
and TPU APIs, through the real google-cloud clients and invoke's own Program."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from infra.workers.queued_api import rung_request
from model.labels import ray_labels
from ops.cloud.capacity_status import capacity_lines, capacity_view
from ops.cloud.cloud_api import API_ENDPOINT_ENV, StackApi
from ops.stacks.stack import OUTPUTS_ENV, parse_outputs
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.helpers import tpu_body
from tests.support.ray_cooperation import (  # noqa: F401 (`ray_apis_at_fake`)
    as_the_programs_head,
    autoscaler_launch,
    ray_apis_fixture,
)
from tests.support.task_runner import run

PROJECT, ZONE, CLUSTER = "my-proj", "us-west1-a", "c"
BODY = {"machineType": "n1-standard-2", "scheduling": {"onHostMaintenance": "TERMINATE"}}
FLEX = {"project_id": PROJECT, "availability_zone": ZONE, "capacity": {"gpu": {"ladder": [
    {"market": "flex-start", "max_run_duration_s": 7200}]}}}
TPU_NODE = "ray-c-worker-0123abcd-tpu"


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0, flex_start_s=3600.0)) as server:
        as_the_programs_head(server, PROJECT)
        yield server


def outputs(tpu: bool = False) -> dict[str, Any]:
    nodes = [{"name": "ray-c-head", "node_type": "head", "kind": "head",
              "internal_ip": "10.0.0.2", "status": "RUNNING"}]
    if tpu:
        nodes.append({"name": TPU_NODE, "node_type": "tpu", "kind": "worker",
                      "internal_ip": "", "status": "WAITING_FOR_RESOURCES"})
    return {"cluster_name": CLUSTER, "project": PROJECT, "zone": ZONE,
            "head_name": "ray-c-head", "head_internal_ip": "10.0.0.2", "ssh_user": "ubuntu",
            "ssh_private_key": "unused", "nodes": nodes}


def api(fake: FakeComputeServer, tpu: bool = False) -> StackApi:
    return StackApi(parse_outputs("s", outputs(tpu)), fake.endpoint)


def queue_tpu(fake: FakeComputeServer, rung: dict[str, Any], name: str = TPU_NODE) -> None:
    body = tpu_body()
    body["labels"] = ray_labels(CLUSTER, "worker", "tpu")
    request = rung_request(f"projects/{PROJECT}/locations/{ZONE}", name, body, None, rung)
    fake.queued.create(PROJECT, ZONE, name, request)
    fake.cloud.settle()


def test_a_pending_flex_start_node_shows_as_waiting_on_its_rung(fake, ray_apis_at_fake):
    (name,) = autoscaler_launch(FLEX, CLUSTER, "gpu", BODY, 1)

    lines = capacity_lines(api(fake))

    assert lines[0] == "waiting for capacity:"
    assert lines[1].startswith(f"  {name} (gpu) on the flex-start rung in {ZONE}: PENDING, "
                               "asked ")
    assert lines[1].endswith(": waiting for Dynamic Workload Scheduler's capacity")


def test_a_running_flex_start_node_shows_when_it_ends(fake, ray_apis_at_fake):
    fake.faults.flex_start_s = 0.0
    (name,) = autoscaler_launch(FLEX, CLUSTER, "gpu", BODY, 1)
    time.sleep(0.1)
    fake.cloud.settle()

    lines = capacity_lines(api(fake))

    assert lines[0].startswith("nodes with an end")
    assert lines[1].startswith(f"  {name} (gpu, {ZONE}): ends ")
    assert lines[1].endswith("left") and ", 1h 59m" in lines[1]


def test_queued_tpu_requests_show_their_state_rung_and_why_they_failed(fake):
    fake.faults.queued_wait_polls = 0  # the first read decides
    fake.faults.queued_tier_failure["spot"] = "no Spot capacity for v4-8 in the zone"
    queue_tpu(fake, {"market": "spot"}, "ray-c-worker-0000spot-tpu")
    assert fake.queued.get(PROJECT, ZONE, "ray-c-worker-0000spot-tpu")["state"]["state"] \
        == "FAILED"
    fake.faults.queued_wait_polls = None  # the next waits for ever
    queue_tpu(fake, {"market": "on-demand"})

    view = capacity_view(api(fake, tpu=True))

    failed, waiting = view.waiting
    assert (failed.rung, failed.state, failed.reason) == (
        "spot", "FAILED", "no Spot capacity for v4-8 in the zone")
    assert (waiting.name, waiting.node_type, waiting.rung, waiting.state) == (
        TPU_NODE, "tpu", "on-demand", "WAITING_FOR_RESOURCES")
    assert datetime.fromisoformat(waiting.since).tzinfo is not None
    lines = capacity_lines(api(fake, tpu=True), datetime.now(timezone.utc))
    assert f"  {TPU_NODE} (tpu) on the on-demand rung in {ZONE}: WAITING_FOR_RESOURCES, " \
           "asked " in "\n".join(lines)
    assert any(line.startswith("  ray-c-worker-0000spot-tpu (tpu) on the spot rung in ")
               and line.endswith(": no Spot capacity for v4-8 in the zone") for line in lines)


def test_status_json_gives_the_nodes_and_what_waits(fake, ray_apis_at_fake, tmp_path: Path,
                                                    monkeypatch):
    (name,) = autoscaler_launch(FLEX, CLUSTER, "gpu", BODY, 1)
    fake.faults.queued_wait_polls = None  # no capacity comes
    queue_tpu(fake, {"market": "on-demand"})
    path = tmp_path / "s.json"
    path.write_text(json.dumps(outputs(tpu=True)))
    monkeypatch.setenv(OUTPUTS_ENV, str(path))
    monkeypatch.setenv(API_ENDPOINT_ENV, fake.endpoint)

    shown = run(["status", "--json"])

    assert shown["code"] == 0, shown
    data = json.loads(shown["stdout"])
    assert [n["name"] for n in data["nodes"]] == ["ray-c-head", TPU_NODE, name]
    waits = {w["name"]: w for w in data["capacity"]["waiting"]}
    assert waits[name]["state"] == "PENDING" and waits[name]["rung"] == "flex-start"
    assert waits[TPU_NODE]["state"] == "WAITING_FOR_RESOURCES"
    assert data["problems"] == []


def test_the_nodes_table_lists_autoscaled_workers_a_rung_put_in_another_zone(fake,
                                                                            ray_apis_at_fake):
    from ops.stacks.cloud_nodes import autoscaled_nodes

    across = {"project_id": PROJECT, "availability_zone": ZONE, "capacity": {"gpu": {"ladder": [
        {"market": "on-demand", "zones": ["us-west1-b"]}]}}}
    (name,) = autoscaler_launch(across, CLUSTER, "gpu", BODY, 1)

    asked = api(fake)
    (node,) = autoscaled_nodes(asked.outputs, asked.clients)

    assert (node.name, node.zone, node.node_type) == (name, "us-west1-b", "gpu")
