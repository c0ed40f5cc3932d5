"""`invoke status` shows the spend cap as the head's daemon and provider record it, read from
the Compute API (the fake, through the real google-cloud client): spent so far against the
total cap, the hourly projection against the hourly cap, a refused launch and a stop at the
total cap with their times; a head stopped at the cap is explained as such."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from bootstrap.head_provider.spend import Ledger
from bootstrap.local_cluster import free_port
from ops.cloud.cloud_api import StackApi
from ops.cloud.spend_status import head_spend_lines
from ops.stacks.stack import parse_outputs
from tests.fakes.compute import FakeComputeServer
from tests.support.sshd_server import stack_outputs_for

PROJECT, ZONE, HEAD = "my-proj", "us-west1-a", "ray-c-head"


def published(capped: dict | None = None) -> str:
    """`ray-spend/status` as the daemon writes it: its ledger, and the cap."""
    ledger = Ledger(Path("unused"), total_usd=12.345, started="2026-12-01T00:00:00Z",
                    checked=datetime(2026, 12, 5, 1, 0, tzinfo=timezone.utc), per_hour=1.5,
                    nodes=3, capped=capped)
    return json.dumps({**ledger.as_dict(), "max_usd_total": 100.0, "max_usd_per_hour": 2.0,
                       "action": "stop_workers"})


def outputs() -> object:
    return parse_outputs("s", {
        "cluster_name": "c", "project": PROJECT, "zone": ZONE, "head_name": HEAD,
        "head_internal_ip": "10.0.0.2", "ssh_user": "ubuntu", "ssh_private_key": "unused",
        "nodes": []})


def test_status_shows_spend_against_the_caps_and_a_refused_launch_with_its_time():
    with FakeComputeServer() as fake:
        fake.cloud.add_foreign_instance(PROJECT, ZONE, HEAD, {
            "ray-spend-refused": "gpu_workers", "ray-spend-refused-at": "2026-12-05t00-59-30z"})
        fake.guest_attributes[(PROJECT, ZONE, HEAD)] = {"ray-spend/status": published()}
        lines = head_spend_lines(StackApi(outputs(), fake.endpoint))
    assert lines[0].startswith("spend: $12.35 so far (cap $100.00), $1.50/h now (cap $2.00/h)")
    assert lines[1].startswith(
        "spend cap: a launch of gpu_workers was refused at 2026-12-05 00:59:30 UTC")


def test_status_shows_the_workers_held_stopped_at_the_total_cap():
    capped = {"at": "2026-12-05T00:40:00Z", "action": "stop_workers", "nodes": ["w-1", "w-2"]}
    with FakeComputeServer() as fake:
        fake.cloud.add_foreign_instance(PROJECT, ZONE, HEAD, {
            "ray-spend-cap": "workers-stopped", "ray-spend-cap-at": "2026-12-05t00-40-00z"})
        fake.guest_attributes[(PROJECT, ZONE, HEAD)] = {"ray-spend/status": published(capped)}
        lines = head_spend_lines(StackApi(outputs(), fake.endpoint))
    assert ("spend cap: at the total cap the head stopped w-1, w-2 (stop_workers) at "
            "2026-12-05T00:40:00Z") in lines
    assert any(line.startswith("spend cap: the workers are held stopped since 2026-12-05 "
                               "00:40:00 UTC") for line in lines)


def test_a_head_without_a_cap_adds_no_line():
    with FakeComputeServer() as fake:
        fake.cloud.add_foreign_instance(PROJECT, ZONE, HEAD, {})
        assert head_spend_lines(StackApi(outputs(), fake.endpoint)) == []


def test_status_says_when_the_spend_cap_stopped_the_whole_cluster(stack, sshd):
    outputs = stack_outputs_for(sshd, ssh_port=free_port())  # nothing listens: head is down
    stack.write_outputs(outputs)
    with FakeComputeServer() as fake:
        fake.cloud.add_foreign_instance(outputs["project"], outputs["zone"],
                                        outputs["head_name"], {
                                            "ray-spend-cap": "stopped",
                                            "ray-spend-cap-at": "2026-12-04t22-10-00z"})
        with fake.cloud.lock:
            fake.cloud.zone_instances(outputs["project"], outputs["zone"])[
                outputs["head_name"]]["status"] = "TERMINATED"
        result = stack.invoke("status", env={**stack.env, "RAY_GCP_API_ENDPOINT": fake.endpoint})
    assert result.returncode == 0, result.stderr
    assert ("the cluster was stopped at its total spend cap at 2026-12-04 22:10:00 UTC "
            "(provider.spend_cap)") in result.stdout
