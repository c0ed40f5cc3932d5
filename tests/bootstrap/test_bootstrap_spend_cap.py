"""The spend cap's total, enforced by the head's daemon against a real Ray head and the fake
Compute API, on a clock the test moves: the ledger counts the nodes' hours at the prices the
program renders into the head's metadata; at `max_usd_total` every worker stops and the head
stays up (`stop_workers`), or every node stops, head last (`down`), busy or not; each stop is
recorded in labels, guest attributes and the ledger; and the ledger survives a daemon restart
and keeps what a deleted worker cost."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from bootstrap.autostop import LEDGER_FILE, Autostop, Cloud, Metadata, RayState
from bootstrap.autostop_metadata import autostop_entries, autostop_settings
from bootstrap.head_provider.spend import Ledger, NodeUsage, Rate, SpendCap
from bootstrap.node_metadata import node_metadata
from bootstrap.spend_metadata import spend_cap_entries, spend_cap_settings
from model.config import parse_cluster_config
from model.labels import ray_labels
from model.prices import node_type_price
from tests.fakes.compute import FakeComputeServer
from tests.support.local_ray_head import (
    WAIT_S,
    Clock,
    _wait_for,
    instance_statuses,
    ray_driver,
    run_for,
)
from tests.support.program_grants import local_metadata_token, programs_head

PROJECT, ZONE, CLUSTER = "my-proj", "us-west1-a", "capped"
POLL_S = 0.1
HOUR = 3600.0
# The fake stamps every instance it makes a millisecond after this.
CREATED = datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()
CONFIG_DATA = {
    "cluster_name": CLUSTER,
    "provider": {"type": "gcp", "region": "us-west1", "availability_zone": ZONE,
                 "project_id": PROJECT,
                 "spend_cap": {"max_usd_total": 1.0, "action": "stop_workers"}},
    "available_node_types": {
        "head": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}},
        "cpu": {"resources": {"CPU": 8}, "min_workers": 2, "max_workers": 4,
                "node_config": {"machineType": "n1-standard-8"}},
    },
    "head_node_type": "head",
}
NODES = (("head", "head", "ray-capped-head"), ("worker", "cpu", "ray-capped-worker-1"),
         ("worker", "cpu", "ray-capped-worker-2"))


def config_with(**spend_cap):
    data = copy.deepcopy(CONFIG_DATA)
    data["provider"]["spend_cap"] = {**data["provider"]["spend_cap"], **spend_cap}
    return parse_cluster_config(data)


def per_hour(config) -> float:
    """What the cluster costs an hour running, by the project's price table."""
    head = node_type_price(config.available_node_types["head"], config.provider.region)
    worker = node_type_price(config.available_node_types["cpu"], config.provider.region)
    return head.running + 2 * worker.running


@pytest.fixture
def fake():
    with FakeComputeServer() as server:
        for role, node_type, name in NODES:
            server.cloud.add_foreign_instance(PROJECT, ZONE, name,
                                              ray_labels(CLUSTER, role, node_type))
        server.cloud.add_foreign_instance(PROJECT, ZONE, "someone-else",
                                          ray_labels("other", "worker", "cpu"))
        yield server


def _daemon(dashboard: str, fake: FakeComputeServer, tmp_path: Path, config,
            clock: Clock) -> Autostop:
    """The daemon as the head runs it, its metadata as the program renders it for the head
    (autostop off, so only the cap can stop anything)."""
    metadata_dir, home, proc = tmp_path / "metadata", tmp_path / "home", tmp_path / "proc"
    for directory in (metadata_dir, home, proc):
        directory.mkdir(exist_ok=True)
    entries = {**autostop_entries(config), **spend_cap_entries(config)}
    for key, value in entries.items():
        (metadata_dir / key).write_text(value)
    local_metadata_token(metadata_dir, fake.vm_token(**programs_head(fake, PROJECT)))
    metadata = Metadata(str(metadata_dir))
    cloud = Cloud(metadata, f"http://{fake.endpoint}/compute/v1", f"http://{fake.endpoint}/v2")
    return Autostop(metadata, home, RayState(dashboard), cloud, proc, POLL_S, clock)


def _statuses(fake: FakeComputeServer) -> dict[str, str]:
    return instance_statuses(fake, PROJECT, ZONE)


def _spend_status(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "guest-attributes" / "ray-spend" / "status").read_text())


def test_at_the_total_cap_every_worker_stops_and_the_head_stays_up_though_ray_is_busy(
        ray_head, fake, tmp_path):
    config = config_with()
    busy = ray_driver(ray_head, "@ray.remote\ndef work():\n    time.sleep(600)\n"
                                "ray.get(work.remote())")
    try:
        state = RayState(ray_head["dashboard"])
        _wait_for(lambda: "task work is RUNNING" in state.activity().busy, "the task runs")
        clock = Clock()
        clock.now = CREATED
        daemon = _daemon(ray_head["dashboard"], fake, tmp_path, config, clock)
        under_cap = 0.9 / per_hour(config) * HOUR  # 90% of the cap spent
        clock.now = CREATED + under_cap
        assert run_for(daemon, 1.0) == []
        assert _spend_status(tmp_path)["total_usd"] == pytest.approx(0.9, abs=0.01)
        assert _spend_status(tmp_path)["per_hour"] == pytest.approx(per_hour(config), rel=1e-3)
        assert set(_statuses(fake).values()) == {"RUNNING"}

        clock.now += 0.2 / per_hour(config) * HOUR  # 110%
        assert sorted(run_for(daemon, 1.0)) == ["ray-capped-worker-1", "ray-capped-worker-2"]
    finally:
        busy.kill()
        busy.wait()
    assert _statuses(fake) == {"ray-capped-head": "RUNNING", "ray-capped-worker-1": "TERMINATED",
                               "ray-capped-worker-2": "TERMINATED", "someone-else": "RUNNING"}
    worker = fake.instances(PROJECT, ZONE)["ray-capped-worker-1"]
    assert worker["labels"]["ray-spend-cap"] == "stopped"
    assert worker["labels"]["ray-spend-cap-at"].endswith("z")
    capped = _spend_status(tmp_path)["capped"]
    assert capped["action"] == "stop_workers"
    assert sorted(capped["nodes"]) == ["ray-capped-worker-1", "ray-capped-worker-2"]
    assert not (tmp_path / "guest-attributes" / "ray-bootstrap" / "status").exists()


def test_a_worker_started_again_after_the_cap_is_stopped_at_the_next_check(ray_head, fake,
                                                                            tmp_path):
    clock = Clock()
    clock.now = CREATED + 2 * HOUR  # over the $1 cap already
    daemon = _daemon(ray_head["dashboard"], fake, tmp_path, config_with(), clock)
    assert len(run_for(daemon, 1.0)) == 2
    with fake.cloud.lock:  # started again (by `invoke up`, or Ray's v1 autoscaler)
        fake.cloud.zone_instances(PROJECT, ZONE)["ray-capped-worker-2"]["status"] = "RUNNING"
    assert run_for(daemon, 1.0) == ["ray-capped-worker-2"]
    assert _statuses(fake)["ray-capped-head"] == "RUNNING"


def test_down_at_the_total_cap_stops_every_node_head_last(ray_head, fake, tmp_path):
    clock = Clock()
    clock.now = CREATED + 2 * HOUR
    daemon = _daemon(ray_head["dashboard"], fake, tmp_path, config_with(action="down"), clock)
    stopped = run_for(daemon, WAIT_S)
    assert stopped[-1] == "ray-capped-head" and len(stopped) == 3
    assert _statuses(fake) == {"ray-capped-head": "TERMINATED",
                               "ray-capped-worker-1": "TERMINATED",
                               "ray-capped-worker-2": "TERMINATED", "someone-else": "RUNNING"}
    assert fake.instances(PROJECT, ZONE)["ray-capped-head"]["labels"]["ray-spend-cap"] == (
        "stopped")
    status = (tmp_path / "guest-attributes" / "ray-bootstrap" / "status").read_text()
    assert status.startswith("spend-capped:") and ":stopped:spend cap: $" in status


def test_the_ledger_keeps_a_deleted_workers_cost_across_a_daemon_restart(ray_head, fake,
                                                                        tmp_path):
    config = config_with(max_usd_total=1000.0)
    clock = Clock()
    clock.now = CREATED + HOUR
    assert _daemon(ray_head["dashboard"], fake, tmp_path, config, clock).spend_check() is None
    first_hour = per_hour(config)
    assert _spend_status(tmp_path)["total_usd"] == pytest.approx(first_hour, rel=1e-3)

    fake.cloud.preempt(PROJECT, ZONE, "ray-capped-worker-2")  # gone: no longer listed
    clock.now += HOUR
    restarted = _daemon(ray_head["dashboard"], fake, tmp_path, config, clock)
    assert restarted.spend_check() is None
    worker = node_type_price(config.available_node_types["cpu"], config.provider.region)
    ledger = json.loads((tmp_path / "home" / LEDGER_FILE).read_text())
    assert ledger["total_usd"] == pytest.approx(2 * first_hour - worker.running, rel=1e-3)
    assert ledger["nodes"] == 2  # the two left; the other cluster's node is not ours
    assert _spend_status(tmp_path)["max_usd_total"] == 1000.0


def test_the_program_renders_the_cap_and_each_types_prices_by_market_for_the_head():
    config = config_with(max_usd_per_hour=5.0)
    settings = spend_cap_settings(config)
    worker = config.available_node_types["cpu"]
    assert settings["prices"]["cpu"]["spot"]["running"] == pytest.approx(
        node_type_price(worker, "us-west1", spot=True).running)
    assert settings["prices"]["cpu"]["on-demand"]["running"] > settings["prices"]["cpu"][
        "spot"]["running"] > settings["prices"]["cpu"]["on-demand"]["stopped"] > 0
    assert (settings["max_usd_per_hour"], settings["max_usd_total"]) == (5.0, 1.0)
    without = copy.deepcopy(CONFIG_DATA)
    del without["provider"]["spend_cap"]
    assert "ray-spend-cap" not in node_metadata(parse_cluster_config(without), "head", "head")
    assert "ray-spend-cap" not in node_metadata(config, "worker", "cpu")


def test_changing_the_cap_changes_only_the_heads_spend_cap_entry():
    """In place, as autostop's setting: no startup script, no worker, no autostop change."""
    before, after = config_with(), config_with(max_usd_total=50.0, action="down")
    old, new = node_metadata(before, "head", "head"), node_metadata(after, "head", "head")
    assert {key for key in old if old[key] != new[key]} == {"ray-spend-cap"}
    assert autostop_settings(before) == autostop_settings(after)
    assert node_metadata(before, "worker", "cpu") == node_metadata(after, "worker", "cpu")


def test_the_ledger_counts_a_stopped_period_as_disks_only():
    """A worker stopped between two checks and started again before the next: the check
    counts its compute for the time it ran, its disks throughout (the timestamps' rule)."""
    cap = SpendCap(None, 100.0, "stop_workers", {"cpu": {"on-demand": Rate(1.0, 0.25)}})
    start = datetime(2026, 12, 5, tzinfo=timezone.utc)
    ledger = Ledger(Path("unused"))
    created = NodeUsage("w", "cpu", "on-demand", "RUNNING", start)
    assert ledger.count(cap, [created], start) == 0.0
    later = datetime(2026, 12, 5, 4, tzinfo=timezone.utc)  # stopped from 1:00 to 3:00
    restarted = NodeUsage("w", "cpu", "on-demand", "RUNNING", start,
                          last_start=datetime(2026, 12, 5, 3, tzinfo=timezone.utc),
                          last_stop=datetime(2026, 12, 5, 1, tzinfo=timezone.utc))
    assert ledger.count(cap, [restarted], later) == pytest.approx(0.75 * 2 + 0.25 * 4)


def test_a_tpu_node_with_a_nanosecond_create_time_is_priced_at_its_market():
    """The TPU API writes nanoseconds, which a head's python3 before 3.11 cannot parse as
    they are."""
    node = {"name": "projects/p/locations/z/nodes/ray-capped-worker-tpu",
            "labels": {"ray-user-node-type": "tpu"}, "state": "READY",
            "createTime": "2026-12-05T00:00:00.123456789Z", "schedulingConfig": {"spot": True}}
    usage = NodeUsage.of_tpu_node(node, "ray-user-node-type",
                                  datetime(2026, 12, 5, 2, tzinfo=timezone.utc))
    assert (usage.name, usage.node_type, usage.market, usage.running) == (
        "ray-capped-worker-tpu", "tpu", "spot", True)
    assert usage.created == datetime(2026, 12, 5, 0, 0, 0, 123456, tzinfo=timezone.utc)
