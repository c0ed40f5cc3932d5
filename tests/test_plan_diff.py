"""`invoke diff` rows: each YAML change shows up as exactly the rows a reviewer expects.

Every scenario edits a copy of stacks/clusters/full.yaml; expected rows and values are read
from the edit itself. All stacks are planned at once, each in its own interpreter.
"""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config.urls import short_name
from infra.stack_config import PROJECT_ROOT
from ops.plan import Plan, collect_plan, plan_stack_isolated
from ops.plan_base import diff_stack_markdown
from ops.plan_diff import WORKER_GROUP_IN_PLACE, DiffRow, diff_plans
from ops.plan_markdown import change_lines, render_markdown

BASE_YAML = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
WORKER = "ray_worker_small"
HEAD_TYPE = BASE_YAML["head_node_type"]
IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"


def write_stack(root: Path, stack: str, cluster: dict[str, Any]) -> None:
    (root / "stacks/clusters").mkdir(parents=True, exist_ok=True)
    (root / f"stacks/clusters/{stack}.yaml").write_text(yaml.safe_dump(cluster))
    (root / f"stacks/Pulumi.{stack}.yaml").write_text(
        yaml.safe_dump({"config": {"ray-gcp:cluster": f"stacks/clusters/{stack}.yaml"}})
    )


def edited(edit) -> dict[str, Any]:
    cluster = copy.deepcopy(BASE_YAML)
    edit(cluster)
    return cluster


def _more_workers(cluster: dict[str, Any]) -> None:
    node_type = cluster["available_node_types"][WORKER]
    node_type["min_workers"] = node_type["max_workers"]


def _bigger_head(cluster: dict[str, Any]) -> None:
    cluster["available_node_types"][HEAD_TYPE]["node_config"]["machineType"] = "n1-standard-8"


def _bigger_workers(cluster: dict[str, Any]) -> None:
    cluster["available_node_types"][WORKER]["node_config"]["machineType"] = "n2-standard-4"


GPU_TYPE = {
    "min_workers": 0,
    "max_workers": 1,
    "resources": {"CPU": 4, "GPU": 1},
    "node_config": {
        "machineType": "n1-standard-4",
        "guestAccelerators": [{"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 1}],
        "scheduling": [{"onHostMaintenance": "TERMINATE"}],
        "disks": BASE_YAML["available_node_types"][WORKER]["node_config"]["disks"],
    },
}
TPU_TYPE = {
    "min_workers": 0,
    "max_workers": 1,
    "resources": {"TPU": 4},
    "node_config": {"acceleratorType": "v4-8", "runtimeVersion": "tpu-ubuntu2204-base"},
}

SCENARIOS = {
    "base": lambda c: None,
    "more_workers": _more_workers,
    "bigger_head": _bigger_head,
    "bigger_workers": _bigger_workers,
    "with_gpu": lambda c: c["available_node_types"].update(ray_worker_gpu=GPU_TYPE),
    "with_tpu": lambda c: c["available_node_types"].update(ray_tpu=TPU_TYPE),
}


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Plan]:
    running = {}
    for name, edit in SCENARIOS.items():
        root = tmp_path_factory.mktemp(name)  # one stack name, as in a real diff
        write_stack(root, "s", edited(edit))
        running[name] = plan_stack_isolated("s", root)
    return {name: collect_plan(process, name) for name, process in running.items()}


def actions(rows: list[DiffRow]) -> set[tuple[str, str]]:
    return {(row.action, row.subject) for row in rows}


def only_row(rows: list[DiffRow], subject: str) -> DiffRow:
    matching = [row for row in rows if row.subject == subject]
    assert len(matching) == 1, rows
    return matching[0]


def test_same_config_has_no_rows(plans: dict[str, Plan]) -> None:
    assert diff_plans(plans["base"], plans["base"]) == []


def test_worker_count_change_is_one_in_place_update(plans: dict[str, Plan]) -> None:
    rows = diff_plans(plans["base"], plans["more_workers"])
    node_type = BASE_YAML["available_node_types"][WORKER]
    assert actions(rows) == {("update", WORKER)}
    assert change_lines(rows[0]) == [
        f"{WORKER}.count: {node_type['min_workers']} -> {node_type['max_workers']}"
    ]
    assert rows[0].kind == "WorkerGroup"


def test_head_machine_type_change_replaces_the_head_under_a_new_name(
    plans: dict[str, Plan],
) -> None:
    rows = diff_plans(plans["base"], plans["bigger_head"])
    head = only_row(rows, "head")
    assert head.action == "replace" and head.type == "gcp:compute/instance:Instance"
    assert head.old_name != head.new_name
    old_type = short_name(BASE_YAML["available_node_types"][HEAD_TYPE]["node_config"]
                          ["machineType"])
    assert f"head.machineType: {old_type} -> n1-standard-8" in change_lines(head)


def test_head_replacement_replaces_workers_that_carry_its_address(
    plans: dict[str, Plan],
) -> None:
    rows = diff_plans(plans["base"], plans["bigger_head"])
    head = only_row(rows, "head")
    worker_types = {name for name in BASE_YAML["available_node_types"] if name != HEAD_TYPE}
    assert actions(rows) == {("replace", "head")} | {("replace", t) for t in worker_types}
    for name in worker_types:
        assert (f"{name}.metadata.ray-head-address: {head.old_name} -> {head.new_name}"
                in change_lines(only_row(rows, name)))


def test_worker_machine_type_change_replaces_the_group_with_a_cost_hint(
    plans: dict[str, Plan],
) -> None:
    rows = diff_plans(plans["base"], plans["bigger_workers"])
    assert actions(rows) == {("replace", WORKER)}
    old_type = BASE_YAML["available_node_types"][WORKER]["node_config"]["machineType"]
    assert f"{WORKER}.machineType: {old_type} -> n2-standard-4" in change_lines(rows[0])
    markdown = render_markdown(rows, "s", "`main`", "working tree", 0)
    count = BASE_YAML["available_node_types"][WORKER]["min_workers"]
    assert f"cost hint: {old_type} $" in markdown
    assert f"for {count} node" in markdown


def test_adding_a_gpu_type_adds_only_its_worker_group(plans: dict[str, Plan]) -> None:
    rows = diff_plans(plans["base"], plans["with_gpu"])
    assert actions(rows) == {("add", "ray_worker_gpu")}
    assert rows[0].kind == "WorkerGroup"


def test_adding_a_tpu_type_adds_its_workers_and_the_tpu_admin_role(
    plans: dict[str, Plan],
) -> None:
    rows = diff_plans(plans["base"], plans["with_tpu"])
    iam = [row for row in rows if row.type == IAM_MEMBER]
    assert {row.action for row in rows} == {"add"}
    assert {row.subject for row in rows} - {row.subject for row in iam} == {"ray_tpu"}
    assert len(iam) == 1 and iam[0].subject.endswith("tpu-admin")


def test_removing_a_type_removes_only_its_worker_group(plans: dict[str, Plan]) -> None:
    rows = diff_plans(plans["with_gpu"], plans["base"])
    assert actions(rows) == {("remove", "ray_worker_gpu")}


def test_worker_group_in_place_keys_match_the_provider() -> None:
    from infra.workers.provider import IN_PLACE_KEYS

    assert set(IN_PLACE_KEYS) == WORKER_GROUP_IN_PLACE


def test_diff_against_a_git_ref_plans_the_committed_yaml(tmp_path: Path) -> None:
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write_stack(tmp_path, "s", BASE_YAML)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], check=True)
    write_stack(tmp_path, "s", edited(_more_workers))

    markdown = diff_stack_markdown("s", "HEAD", root=tmp_path)

    node_type = BASE_YAML["available_node_types"][WORKER]
    assert f"`{WORKER}.count: {node_type['min_workers']} -> {node_type['max_workers']}`" \
        in markdown
    assert "1 to update" in markdown and "0 to replace" in markdown
    assert (tmp_path / "stacks/clusters/s.yaml").read_text() == yaml.safe_dump(
        edited(_more_workers)
    ), "the working tree must not be touched"
