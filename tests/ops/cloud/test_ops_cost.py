"""`invoke cost` against the fake Compute/TPU API (real google-cloud clients): hours from the
instances' timestamps with stopped periods left out, spot nodes at spot prices, the totals;
the price table's age and coverage of every shipped stack."""

from __future__ import annotations

import os
from datetime import date, datetime, timedelta, timezone

import pytest

from bootstrap.local_cluster import free_port
from model.config import load_cluster_config, parse_cluster_config
from model.labels import ray_labels
from ops.cloud.cost import cost_report, hours_run, node_costs
from ops.review.prices import (
    STALE_AFTER_DAYS,
    node_type_price,
    price_table,
    region_factor,
    staleness_warning,
)
from tests.fakes.compute import FakeComputeServer
from tests.support.bootstrap_stubs import REPO, SHIPPED_STACKS
from tests.support.ray_cooperation import (  # noqa: F401 (`ray_apis_at_fake`)
    as_the_programs_head,
    autoscaler_launch,
    ray_apis_fixture,
)
from tests.support.warm_python import run_module

PROJECT, ZONE, CLUSTER = "my-proj", "us-west1-c", "priced"  # us-west1-c offers TPU v5e
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)
CONFIG_DATA = {
    "cluster_name": CLUSTER,
    "max_workers": 4,
    "provider": {"type": "gcp", "region": "us-west1", "availability_zone": ZONE,
                 "project_id": PROJECT},
    "available_node_types": {
        "head": {"resources": {"CPU": 2}, "node_config": {
            "machineType": "n1-standard-2",
            "disks": [{"boot": True, "initializeParams": {"diskSizeGb": 100,
                                                          "diskType": "pd-ssd"}}]}},
        "spot_gpu": {"resources": {"CPU": 2, "GPU": 1}, "max_workers": 4, "node_config": {
            "machineType": "n1-standard-2",
            "guestAccelerators": [{"acceleratorType": "nvidia-tesla-t4",
                                   "acceleratorCount": 1}],
            "scheduling": [{"preemptible": True}, {"onHostMaintenance": "TERMINATE"}]}},
        "tpu": {"resources": {"TPU": 4}, "max_workers": 1, "node_config": {
            "acceleratorType": "v5litepod-4", "runtimeVersion": "v2-alpha-tpuv5-lite"}},
    },
    "head_node_type": "head",
}
CONFIG = parse_cluster_config(CONFIG_DATA)
FALLBACK_CONFIG = parse_cluster_config({**CONFIG_DATA, "provider": {
    **CONFIG_DATA["provider"], "capacity": {"spot_gpu": {"fallback": "on-demand"}}}})


def _stamp(hours_ago: float | None) -> str | None:
    return None if hours_ago is None else (NOW - timedelta(hours=hours_ago)).isoformat()


def _instance(fake: FakeComputeServer, name: str, node_type: str, status: str,
              created: float, last_start: float | None = None,
              last_stop: float | None = None, cluster: str = CLUSTER,
              zone: str = ZONE, on_demand: bool = False) -> None:
    """An instance whose timestamps say `created` / `last_start` / `last_stop` hours ago; a
    spot_gpu one is preemptible, as its node_config asks, unless created `on_demand` (the
    capacity fallback)."""
    role = "head" if node_type == "head" else "worker"
    fake.cloud.add_foreign_instance(PROJECT, zone, name, ray_labels(cluster, role, node_type))
    with fake.cloud.lock:
        instance = fake.cloud.zone_instances(PROJECT, zone)[name]
        instance.update({"status": status, "creationTimestamp": _stamp(created)})
        if node_type == "spot_gpu":
            instance["scheduling"] = ({"provisioningModel": "STANDARD"} if on_demand else
                                      {"preemptible": True, "onHostMaintenance": "TERMINATE"})
        for key, hours in (("lastStartTimestamp", last_start), ("lastStopTimestamp", last_stop)):
            if hours is not None:
                instance[key] = _stamp(hours)


@pytest.fixture
def fake():
    with FakeComputeServer() as server:
        _instance(server, "head-1", "head", "RUNNING", created=10)
        # Ran 10 -> 4 hours ago, stopped since.
        _instance(server, "gpu-stopped", "spot_gpu", "TERMINATED", created=10, last_start=10,
                  last_stop=4)
        # Ran 10 -> 8 hours ago, stopped, started again 3 hours ago: 5 hours run.
        _instance(server, "gpu-restarted", "spot_gpu", "RUNNING", created=10, last_start=3,
                  last_stop=8)
        _instance(server, "not-ours", "head", "RUNNING", created=10, cluster="other")
        operation = server.cloud.create_node(PROJECT, ZONE, "tpu-1", {
            "labels": ray_labels(CLUSTER, "worker", "tpu")})
        server.cloud.wait_for(operation, 5)
        with server.cloud.lock:
            server.cloud.location_nodes(PROJECT, ZONE)["tpu-1"]["createTime"] = _stamp(2)
        yield server


def test_hours_leave_out_the_stopped_period_the_timestamps_show(fake):
    costs = {c.name: c for c in node_costs(CONFIG, NOW, fake.endpoint)}
    assert set(costs) == {"head-1", "gpu-stopped", "gpu-restarted", "tpu-1"}
    assert costs["head-1"].hours_run == pytest.approx(10)
    assert costs["gpu-stopped"].hours_run == pytest.approx(6)
    assert costs["gpu-restarted"].hours_run == pytest.approx(5)
    assert costs["tpu-1"].hours_run == pytest.approx(2)
    assert costs["gpu-stopped"].hours_existed == pytest.approx(10)


def test_spot_nodes_are_priced_at_spot_rates_and_stopped_ones_pay_for_disks(fake):
    table = price_table()
    rates, t4 = table["machine_families"]["n1"], table["gpus"]["nvidia-tesla-t4"]
    spot_machine = 2 * rates["spot_vcpu"] + 7.5 * rates["spot_gib"]  # n1-standard-2: 7.5 GiB
    costs = {c.name: c for c in node_costs(CONFIG, NOW, fake.endpoint)}
    stopped, restarted = costs["gpu-stopped"], costs["gpu-restarted"]
    assert stopped.price.spot
    assert stopped.price.machine == pytest.approx(spot_machine, abs=1e-6)
    assert stopped.price.accelerators == pytest.approx(t4["spot"])
    disk = 10 * table["disks"]["pd-standard"] / table["hours_per_month"]  # GCE's default boot
    assert stopped.per_hour_now == pytest.approx(disk, abs=1e-6)
    assert restarted.per_hour_now == pytest.approx(spot_machine + t4["spot"] + disk, abs=1e-5)
    assert stopped.so_far == pytest.approx((spot_machine + t4["spot"]) * 6 + disk * 10, abs=1e-4)


def test_head_disk_type_size_and_tpu_chips_are_priced(fake):
    table = price_table()
    costs = {c.name: c for c in node_costs(CONFIG, NOW, fake.endpoint)}
    assert costs["head-1"].price.disks == pytest.approx(
        100 * table["disks"]["pd-ssd"] / table["hours_per_month"], abs=1e-6)
    assert costs["tpu-1"].price.accelerators == pytest.approx(4 * table["tpu_chips"]["v5litepod"]
                                                              ["on_demand"])


def test_report_totals_are_the_sums_of_the_nodes(fake):
    costs = node_costs(CONFIG, NOW, fake.endpoint)
    report = cost_report("test", CONFIG, costs, today=date(2026, 12, 3))
    total, per_hour = sum(c.so_far for c in costs), sum(c.per_hour_now for c in costs)
    assert f"total so far: ${total:.2f}   per hour now: ${per_hour:.2f}/h" in report
    assert "spot_gpu" in report and "spot/preemptible" in report
    assert "warning" not in report


def test_invoke_cost_prints_the_report_for_a_stack(fake):
    config = load_cluster_config(REPO / "stacks" / "clusters" / "full.yaml")
    fake.cloud.add_foreign_instance(config.provider.project, config.provider.availability_zone,
                                    "ray-full-head-1", ray_labels("full", "head",
                                                                  config.head_node_type))
    result = run_module(["invoke", "cost", "--stack", "full"], cwd=REPO,
                        env={**os.environ, "RAY_GCP_API_ENDPOINT": fake.endpoint}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "ray-full-head-1" in result.stdout and "ray_worker_small" in result.stdout
    assert "total so far: $" in result.stdout


def test_a_running_node_without_timestamps_of_stops_ran_since_creation():
    created = NOW - timedelta(hours=3)
    assert hours_run("RUNNING", created, created, None, NOW) == pytest.approx(3)
    assert hours_run("TERMINATED", created, created, None, NOW) == 0


def test_the_table_warns_once_it_is_older_than_six_months():
    as_of = date.fromisoformat(price_table()["as_of"])
    assert staleness_warning(as_of + timedelta(days=STALE_AFTER_DAYS)) is None
    warning = staleness_warning(as_of + timedelta(days=STALE_AFTER_DAYS + 1))
    assert warning and price_table()["as_of"] in warning and "months old" in warning


def test_the_table_names_its_source_and_date():
    table = price_table()
    assert "cloud.google.com" in table["source"]
    assert date.fromisoformat(table["as_of"]) <= date.today()


@pytest.mark.parametrize("path", SHIPPED_STACKS, ids=lambda p: p.stem)
def test_every_machine_family_and_accelerator_of_the_shipped_stacks_is_priced(path):
    config = load_cluster_config(path)
    assert region_factor(config.provider.region)[1] is None
    for name, node_type in config.available_node_types.items():
        price = node_type_price(node_type, config.provider.region)
        assert price.unpriced == [], f"{path.name} {name}"
        assert price.running > 0


def test_an_unreachable_api_is_one_line_naming_project_and_zone():
    from infra.workers.retry import RetryPolicy
    from ops.errors import OpsError

    quick = RetryPolicy(initial_s=0.01, cap_s=0.01, max_attempts=2, deadline_s=1)
    with pytest.raises(OpsError) as error:
        node_costs(CONFIG, NOW, f"127.0.0.1:{free_port()}", quick)
    message = str(error.value)
    assert f"{PROJECT}/{ZONE}" in message and "\n" not in message


def test_a_spot_type_created_on_demand_in_fallback_is_priced_and_shown_on_demand(fake):
    table = price_table()
    rates, t4 = table["machine_families"]["n1"], table["gpus"]["nvidia-tesla-t4"]
    _instance(fake, "gpu-on-demand", "spot_gpu", "RUNNING", created=2, on_demand=True)

    costs = {c.name: c for c in node_costs(FALLBACK_CONFIG, NOW, fake.endpoint)}

    fallback, spot = costs["gpu-on-demand"], costs["gpu-restarted"]
    assert (fallback.market, spot.market) == ("on-demand", "spot")
    assert not fallback.price.spot and spot.price.spot
    on_demand_machine = 2 * rates["vcpu"] + 7.5 * rates["gib"]
    assert fallback.price.machine == pytest.approx(on_demand_machine, abs=1e-6)
    assert fallback.price.accelerators == pytest.approx(t4["on_demand"])
    report = cost_report("test", FALLBACK_CONFIG, list(costs.values()), today=date(2026, 12, 3))
    rows = {line.split()[0]: line.split() for line in report.splitlines() if line.strip()}
    assert rows["gpu-on-demand"][1:3] == ["spot_gpu", "on-demand"]
    assert rows["gpu-restarted"][1:3] == ["spot_gpu", "spot"]
    assert "on-demand (spot's fallback)" in report


def test_an_autoscaled_worker_the_heads_provider_made_on_demand_is_priced_on_demand(
        fake, ray_apis_at_fake):
    from bootstrap.autoscaler_config import autoscaler_config

    bodies = {name: t.node_config.body() for name, t in
              FALLBACK_CONFIG.available_node_types.items()}
    head_config = autoscaler_config(FALLBACK_CONFIG, bodies)
    fake.faults.spot_capacity[ZONE] = 0
    # Compute only: Ray's TPU client (`_has_tpus`) is not pointed at the fake.
    provider = {k: v for k, v in head_config["provider"].items() if k != "_has_tpus"}
    as_the_programs_head(fake, provider["project_id"])
    (launched,) = autoscaler_launch(provider, CLUSTER, "spot_gpu",
                                    head_config["available_node_types"]["spot_gpu"]["node_config"],
                                    1)

    cost = {c.name: c for c in node_costs(FALLBACK_CONFIG, NOW, fake.endpoint)}[launched]

    assert cost.node_type == "spot_gpu" and cost.market == "on-demand"
    assert not cost.price.spot
    assert cost.price.accelerators == pytest.approx(price_table()["gpus"]["nvidia-tesla-t4"]
                                                    ["on_demand"])


def test_workers_in_a_failover_zone_are_priced_too(fake):
    _instance(fake, "gpu-elsewhere", "spot_gpu", "RUNNING", created=1, zone="us-west1-b")
    _instance(fake, "other-region", "spot_gpu", "RUNNING", created=1, zone="us-east1-b")

    names = {c.name for c in node_costs(CONFIG, NOW, fake.endpoint)}

    assert "gpu-elsewhere" in names and "other-region" not in names
