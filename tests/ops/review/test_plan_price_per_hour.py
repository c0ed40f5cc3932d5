"""The cluster's price per hour in `invoke plan` (pinned size and max_workers) and in the PR
diff, from real offline plans of the `full` stack and an edit of it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from model.config import parse_cluster_config
from model.stack_config import PROJECT_ROOT
from ops.review.plan import plan_stack, render_table
from ops.review.plan_diff import diff_plans, unchanged_count
from ops.review.plan_markdown import price_line, render_markdown
from ops.review.prices import cluster_price, node_type_price
from tests.support.plan_repos import as_printed

FULL = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
WORKER = "ray_worker_small"


def _write_stack(root: Path, cluster: dict) -> None:
    (root / "stacks/clusters").mkdir(parents=True)
    (root / "stacks/clusters/s.yaml").write_text(yaml.safe_dump(cluster))
    (root / "stacks/Pulumi.s.yaml").write_text(
        yaml.safe_dump({"config": {"ray-gcp:cluster": "stacks/clusters/s.yaml"}}))


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    """`full` as shipped (1 worker pinned, 2 at most) and with both workers pinned, planned
    in this process by `plan_stack` (what `invoke plan`'s interpreter runs), read back from
    its JSON document."""
    more = copy.deepcopy(FULL)
    more["available_node_types"][WORKER]["min_workers"] = 2
    planned = {}
    for name, cluster in (("base", FULL), ("more", more)):
        root = tmp_path_factory.mktemp(name)
        _write_stack(root, cluster)
        planned[name] = as_printed(plan_stack("s", root))
    return planned


def _prices(cluster: dict) -> tuple[float, float]:
    config = parse_cluster_config(copy.deepcopy(cluster))
    region = config.provider.region
    return (node_type_price(config.head_type, region).running,
            node_type_price(config.available_node_types[WORKER], region).running)


def test_plan_prices_the_pinned_size_and_max_workers(plans):
    head, worker = _prices(FULL)
    price = plans["base"]["price_per_hour"]
    assert price["pinned"] == pytest.approx(head + 1 * worker, abs=1e-4)
    assert price["at_max_workers"] == pytest.approx(head + 2 * worker, abs=1e-4)
    assert plans["more"]["price_per_hour"]["pinned"] == pytest.approx(head + 2 * worker,
                                                                      abs=1e-4)
    assert f"${price['pinned']:.2f}/h at the pinned size" in render_table(plans["base"])


def test_diff_shows_the_price_per_hour_before_and_after(plans):
    base, head = plans["base"], plans["more"]
    line = price_line(base["price_per_hour"], head["price_per_hour"])
    markdown = render_markdown(diff_plans(base, head), "s", "`main`", "working tree",
                               unchanged_count(base, head), price=line)
    old, new = base["price_per_hour"]["pinned"], head["price_per_hour"]["pinned"]
    assert f"**Price per hour:** ${old:.2f} → ${new:.2f} at the pinned size" in markdown
    assert f"${head['price_per_hour']['at_max_workers']:.2f} at max_workers" in markdown
    assert "as of" in markdown  # the table's date travels with the figure


def test_a_base_planned_by_older_code_shows_the_new_price_alone(plans):
    price = plans["base"]["price_per_hour"]
    assert price_line(None, price).startswith(f"**Price per hour:** ${price['pinned']:.2f} at")


def test_max_workers_fills_the_dearest_types_first():
    cluster = copy.deepcopy(FULL)
    cluster["max_workers"] = 3
    gpu = copy.deepcopy(cluster["available_node_types"][WORKER])
    gpu.update(min_workers=0, max_workers=2)
    gpu["node_config"]["machineType"] = "n1-standard-8"
    cluster["available_node_types"]["big"] = gpu
    config = parse_cluster_config(cluster)
    head, small = _prices(cluster)
    big = node_type_price(config.available_node_types["big"], config.provider.region).running
    price = cluster_price(config, {WORKER: 1, "big": 0})
    assert price.pinned == pytest.approx(head + small)
    assert price.at_max_workers == pytest.approx(head + 2 * big + 1 * small)
