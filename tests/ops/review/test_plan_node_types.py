"""`invoke plan --format table` reads in one glance: per node type its role, machine, zones,
pinned / max count, spot or on-demand, boot disk and price per hour; a type the price table
does not know is `unknown`, and the total is then a floor ("at least"), never $0.00."""

from __future__ import annotations

import copy

import yaml

from model.config import parse_cluster_config
from model.plan import resolve_worker_counts
from model.stack_config import PROJECT_ROOT
from ops.review.plan_node_types import node_type_rows, render_node_types
from ops.review.prices import cluster_price

FULL = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())


def _table(data: dict) -> tuple[list[dict], list[str]]:
    config = parse_cluster_config(data)
    counts = resolve_worker_counts(config, None)
    rows = node_type_rows(config, counts)
    return rows, render_node_types(rows, cluster_price(config, counts).as_dict())


def test_each_type_shows_role_machine_zones_counts_provisioning_disk_and_price():
    rows, lines = _table(FULL)
    head, worker = rows
    assert (head["role"], head["pinned"], head["max"]) == ("head", 1, 1)
    small = FULL["available_node_types"]["ray_worker_small"]
    assert (worker["node_type"], worker["pinned"], worker["max"]) == (
        "ray_worker_small", small["min_workers"], small["max_workers"])
    assert worker["spot"] is True  # preemptible: spot rates
    assert worker["machine"] == "n1-standard-2" and worker["disk"] == "50 GB pd-standard"
    assert worker["zones"] == "us-west1-a (+ other zones of us-west1)" and head["zones"] == \
        "us-west1-a"
    line = next(line for line in lines if line.startswith("ray_worker_small"))
    assert f"{small['min_workers']} / {small['max_workers']}" in line and "spot" in line
    assert f"${worker['price_per_hour']:.2f}" in line
    assert lines[-1].startswith("total: $") and "at least" not in lines[-1]


def test_an_unpriced_type_is_unknown_and_the_total_is_at_least():
    data = copy.deepcopy(FULL)
    odd_type = copy.deepcopy(data["available_node_types"]["ray_worker_small"])
    odd_type["node_config"]["machineType"] = "z9-imaginary-8"
    data["available_node_types"]["ray_worker_odd"] = odd_type
    data["provider"]["fallback_zones"] = ["us-west1-b"]
    rows, lines = _table(data)
    odd = next(row for row in rows if row["node_type"] == "ray_worker_odd")
    assert odd["price_per_hour"] is None and odd["zones"] == "us-west1-a, us-west1-b"
    assert next(line for line in lines if line.startswith("ray_worker_odd")).endswith("unknown")
    assert lines[-1].startswith("total: at least $") and "unpriced: z9-imaginary-8" in lines[-1]
    config = parse_cluster_config(data)
    summary = cluster_price(config, resolve_worker_counts(config, None)).summary()
    assert summary.startswith("at least $")


def test_a_spot_type_with_an_on_demand_fallback_says_so():
    data = copy.deepcopy(FULL)
    data["provider"]["capacity"] = {"ray_worker_small": {"fallback": "on-demand"}}
    rows, lines = _table(data)
    assert [row["on_demand_fallback"] for row in rows] == [False, True]
    line = next(line for line in lines if line.startswith("ray_worker_small"))
    assert "spot, else on-demand" in line
    plain = next(line for line in _table(FULL)[1] if line.startswith("ray_worker_small"))
    assert "else on-demand" not in plain
