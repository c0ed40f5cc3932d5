"""A flex-start node's end reaches Ray, the head's log and the spend accounting. A node the
head's provider launched on a flex-start rung (Ray's GCP clients, pointed at the fake) runs
with GCE's `resourceStatus.scheduling.terminationTimestamp`; the head's daemon labels it
`ray-ends-at` (a tag Ray's provider reports), publishes the ends, warns in its log before the
end; GCE deletes it at the end (the fake's time limits, run faster) and Ray's listing drops it;
the ledger and the hourly projection count it up to its end only."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from bootstrap.autostop import Autostop, Cloud, Metadata, RayState
from bootstrap.head_provider.provider import HeadNodeProvider
from bootstrap.head_provider.spend import NodeUsage, Rate, SpendCap, projection
from bootstrap.head_provider.time_limit import END_LABEL, end_label, end_of, left
from model.labels import ray_labels
from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.program_grants import local_metadata_token, programs_head
from tests.support.ray_cooperation import (
    as_the_programs_head,
    autoscaler_launch,
    ray_apis_fixture,  # noqa: F401 (`ray_apis_at_fake`)
)

PROJECT, ZONE, CLUSTER = "my-proj", "us-west1-a", "flex"
BODY = {"machineType": "n1-standard-2", "scheduling": {"onHostMaintenance": "TERMINATE"}}
RUN_LIMIT_S = 600  # the rung's max_run_duration: ten minutes, as GCE counts it
SCALE = 0.01  # ... which the fake runs in 6 seconds (slack for a loaded machine)
PROVIDER = {"project_id": PROJECT, "availability_zone": ZONE, "capacity": {"gpu": {"ladder": [
    {"market": "flex-start", "max_run_duration_s": RUN_LIMIT_S}]}}}


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0, flex_start_s=0.1,
                                  run_limit_scale=SCALE)) as server:
        as_the_programs_head(server, PROJECT)
        yield server


def daemon(fake: FakeComputeServer, tmp_path: Path, ends: bool = True) -> Autostop:
    """The head's daemon with the settings the program writes (autostop off) for a cluster
    with a flex-start rung (`ends`)."""
    metadata_dir, home = tmp_path / "metadata", tmp_path / "home"
    for directory in (metadata_dir, home):
        directory.mkdir(exist_ok=True)
    head = ray_labels(CLUSTER, "head", "head")
    (metadata_dir / "ray-autostop").write_text(json.dumps({
        "project": PROJECT, "zone": ZONE, "ends": ends,
        "cluster_labels": {"ray-cluster-name": head["ray-cluster-name"]},
        "head_labels": {"ray-cluster-name": head["ray-cluster-name"],
                        "ray-node-type": head["ray-node-type"]}}))
    local_metadata_token(metadata_dir, fake.vm_token(**programs_head(fake, PROJECT)))
    metadata = Metadata(str(metadata_dir))
    cloud = Cloud(metadata, f"http://{fake.endpoint}/compute/v1", f"http://{fake.endpoint}/v2")
    return Autostop(metadata, home, RayState("http://127.0.0.1:9"), cloud, tmp_path, 0.1)


def wait_running(fake: FakeComputeServer, name: str) -> dict:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        fake.cloud.settle()
        instance = fake.instances(PROJECT, ZONE).get(name) or {}
        if instance.get("status") == "RUNNING":
            return instance
        time.sleep(0.05)
    raise AssertionError(f"{name} never ran")


def test_a_flex_start_nodes_end_is_labelled_warned_of_and_it_is_gone_at_the_end(
        fake, ray_apis_at_fake, tmp_path, capsys):
    (name,) = autoscaler_launch(PROVIDER, CLUSTER, "gpu", BODY, 1)
    instance = wait_running(fake, name)
    end = end_of(instance)
    assert end is not None  # GCE's terminationTimestamp, set as the VM runs
    assert 0 < (end - datetime.now(timezone.utc)).total_seconds() <= RUN_LIMIT_S * SCALE

    ending = daemon(fake, tmp_path).end_check()

    assert ending == {name: end.strftime("%Y-%m-%dT%H:%M:%SZ")}
    assert fake.instances(PROJECT, ZONE)[name]["labels"][END_LABEL] == end_label(end)
    provider = HeadNodeProvider(PROVIDER, CLUSTER)
    assert provider.non_terminated_nodes({}) == [name]
    assert provider.node_tags(name)[END_LABEL] == end_label(end)  # what Ray's autoscaler sees
    log = capsys.readouterr().out
    assert f"node ending: {name} (gpu) ends at" in log and "deleted then" in log
    published = tmp_path / "guest-attributes" / "ray-capacity" / "ending"
    assert json.loads(published.read_text()) == ending

    time.sleep(max(0.0, (end - datetime.now(timezone.utc)).total_seconds()) + 0.2)
    fake.cloud.settle()
    assert name not in fake.instances(PROJECT, ZONE)  # GCE deleted it at its end
    assert provider.non_terminated_nodes({}) == []


def test_the_warning_comes_once_per_end(fake, ray_apis_at_fake, tmp_path, capsys):
    (name,) = autoscaler_launch(PROVIDER, CLUSTER, "gpu", BODY, 1)
    wait_running(fake, name)
    head_daemon = daemon(fake, tmp_path)
    head_daemon.end_check()
    head_daemon.end_check()
    assert capsys.readouterr().out.count(f"node ending: {name}") == 1


def test_a_cluster_without_time_limits_lists_nothing_more_for_ends(fake, ray_apis_at_fake,
                                                                   tmp_path):
    (name,) = autoscaler_launch(PROVIDER, CLUSTER, "gpu", BODY, 1)
    wait_running(fake, name)
    listed = fake.cloud.calls["aggregatedList"]

    assert daemon(fake, tmp_path, ends=False).end_check() == {}
    assert fake.cloud.calls["aggregatedList"] == listed


def test_the_program_tells_the_daemon_to_follow_ends_only_for_clusters_with_time_limits():
    from bootstrap.autostop_metadata import autostop_settings
    from model.config import parse_cluster_config
    from tests.support.program_runs import stack_yaml

    raw = stack_yaml("full")
    assert "ends" not in autostop_settings(parse_cluster_config(raw))  # as it was
    worker = next(name for name in raw["available_node_types"] if name != raw["head_node_type"])
    raw["provider"]["capacity"] = {worker: {"ladder": [{"market": "flex-start"},
                                                       {"market": "on-demand"}]}}
    assert autostop_settings(parse_cluster_config(raw))["ends"] is True


def test_a_node_with_an_end_is_counted_up_to_it_and_projected_for_what_is_left():
    now = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)
    created = now - timedelta(hours=2)
    item = {"name": "n", "labels": {"ray-user-node-type": "gpu"}, "status": "RUNNING",
            "creationTimestamp": created.isoformat(),
            "scheduling": {"provisioningModel": "FLEX_START"},
            "resourceStatus": {"scheduling": {
                "terminationTimestamp": (now + timedelta(minutes=15)).isoformat()}}}
    node = NodeUsage.of_instance(item, "ray-user-node-type", now)
    cap = SpendCap(None, None, "stop_workers", {"gpu": {"on-demand": Rate(4.0, 0.0)}},
                   node_type_label="ray-user-node-type")

    assert projection(cap, [node], now) == pytest.approx(1.0)  # a quarter of the hour left
    assert projection(cap, [node]) == pytest.approx(4.0)  # no time given: the full rate
    later = now + timedelta(hours=1)  # listed after its end: counted to the end, no further
    assert cap.accrued(node, now, later) == pytest.approx(1.0)
    assert cap.accrued(node, None, later) == pytest.approx(4.0 * 2.25)
    assert left(now + timedelta(minutes=15), now) == "15m 00s left"
    assert left(now + timedelta(hours=30), now) == "1d 6h left"
    assert left(now, now) == "ended"
