"""`invoke diff` rows: each YAML change shows up as exactly the rows a reviewer expects.

Every scenario edits a copy of stacks/clusters/full.yaml; expected rows and values are read
from the edit itself. The scenarios are planned in this process by `plan_stack`, the function
each interpreter of `invoke diff` runs, and read back from its JSON text as `invoke diff` reads
it; the tests of `diff_stack_markdown` below run `invoke diff`'s own interpreters. The head
carries the autoscaler's copy of the cluster config (`ray-bootstrap-config`), so every node
type change also updates the head, summarised by the config paths that changed; a worker count
does not (the autoscaler counts Pulumi's workers, its config does not hold them).
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from model.config.urls import short_name
from model.stack_config import PROJECT_ROOT
from ops.review.plan import Plan, plan_stack
from ops.review.plan_base import PLANNER, changed_stacks, diff_stack_markdown
from ops.review.plan_diff import DiffRow, diff_plans
from ops.review.plan_effects import REAPPLY_NOTE, node_effect
from ops.review.plan_markdown import change_lines, render_markdown
from ops.review.plan_values import BOOTSTRAP_CONFIG_KEY
from tests.support.plan_repos import BASE_YAML, as_printed, git_commit_all, write_stack

WORKER = "ray_worker_small"
HEAD_TYPE = BASE_YAML["head_node_type"]
IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"


def edited(edit) -> dict[str, Any]:
    cluster = copy.deepcopy(BASE_YAML)
    edit(cluster)
    return cluster


def _more_workers(cluster: dict[str, Any]) -> None:
    node_type = cluster["available_node_types"][WORKER]
    node_type["min_workers"] = node_type["max_workers"]


def _longer_idle_timeout(cluster: dict[str, Any]) -> None:
    cluster["idle_timeout_minutes"] = cluster["idle_timeout_minutes"] * 2


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
    "min_workers": 1,
    "max_workers": 1,
    "resources": {"TPU": 4},
    "node_config": {"acceleratorType": "v5litepod-4", "runtimeVersion": "v2-alpha-tpuv5-lite"},
}

def _queued_tpu(cluster: dict[str, Any], wait_minutes: int) -> None:
    cluster["available_node_types"].update(ray_tpu=TPU_TYPE)
    cluster["provider"]["tpu_queued_resources"] = {"wait_minutes": wait_minutes}


SCENARIOS = {
    "base": lambda c: None,
    "more_workers": _more_workers,
    "longer_idle_timeout": _longer_idle_timeout,
    "bigger_head": _bigger_head,
    "bigger_workers": _bigger_workers,
    "worker_setup": lambda c: c.update(worker_setup_commands=["pip install -q tqdm"]),
    "with_gpu": lambda c: c["available_node_types"].update(ray_worker_gpu=GPU_TYPE),
    "with_tpu": lambda c: c["available_node_types"].update(ray_tpu=TPU_TYPE),
    "with_tpu_queued": lambda c: _queued_tpu(c, 30),
    "with_tpu_queued_longer": lambda c: _queued_tpu(c, 90),
    "with_tpu_queued_new_setup": lambda c: (
        _queued_tpu(c, 30), c["worker_setup_commands"].append("echo new setup")),
}


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Plan]:
    planned = {}
    for name, edit in SCENARIOS.items():
        root = tmp_path_factory.mktemp(name)  # one stack name, as in a real diff
        write_stack(root, "s", edited(edit))
        planned[name] = as_printed(plan_stack("s", root))
    return planned


# The head's autoscaler config is a bucket object named after its content: any change to the
# config is a new object, which Pulumi shows as a replace (the engine's preview agrees,
# tests/engine/test_engine_diff.py); the config's fields read on the head's row.
NEW_CONFIG_OBJECT = ("replace", "ray-full-bucket-autoscaler-config")


def actions(rows: list[DiffRow]) -> set[tuple[str, str]]:
    return {(row.action, row.subject) for row in rows}


def only_row(rows: list[DiffRow], subject: str) -> DiffRow:
    matching = [row for row in rows if row.subject == subject]
    assert len(matching) == 1, rows
    return matching[0]


def head_config_line(rows: list[DiffRow]) -> str:
    """The head's `ray-bootstrap-config` change line (exactly one expected)."""
    prefix = f"head.metadata.{BOOTSTRAP_CONFIG_KEY}: "
    lines = [line for line in change_lines(only_row(rows, "head")) if line.startswith(prefix)]
    assert len(lines) == 1, change_lines(only_row(rows, "head"))
    return lines[0]


def test_same_config_has_no_rows(plans: dict[str, Plan]) -> None:
    assert diff_plans(plans["base"], plans["base"]) == []


def test_worker_count_change_updates_in_place(plans: dict[str, Plan]) -> None:
    rows = diff_plans(plans["base"], plans["more_workers"])
    node_type = BASE_YAML["available_node_types"][WORKER]
    # Under autoscaler v2 (Ray's default) the head's config leaves the type the room Pulumi's
    # workers do not take (they count as its pinned twin): its maximum changes, in place, and
    # nothing else of the head.
    assert actions(rows) == {("update", WORKER), ("update", "head"), NEW_CONFIG_OBJECT}
    assert head_config_line(rows).endswith(
        f"1 change: available_node_types.{WORKER}.max_workers: 1 -> 0")
    worker = only_row(rows, WORKER)
    assert change_lines(worker) == [
        f"{WORKER}.count: {node_type['min_workers']} -> {node_type['max_workers']}"
    ]
    assert worker.kind == "WorkerGroup"


def test_autoscaler_setting_change_updates_the_head_config_by_path_not_by_text(
    plans: dict[str, Plan],
) -> None:
    rows = diff_plans(plans["base"], plans["longer_idle_timeout"])
    minutes = BASE_YAML["idle_timeout_minutes"]
    assert actions(rows) == {("update", "head"), NEW_CONFIG_OBJECT}
    assert head_config_line(rows) == (
        f"head.metadata.{BOOTSTRAP_CONFIG_KEY}: 1 change: idle_timeout_minutes: "
        f"{minutes} -> {minutes * 2}"
    )
    assert change_lines(only_row(rows, "head")) == [head_config_line(rows)]


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
    assert actions(rows) == {("replace", "head"), NEW_CONFIG_OBJECT} | {
        ("replace", t) for t in worker_types}
    for name in worker_types:
        assert (f"{name}.metadata.ray-head-address: {head.old_name} -> {head.new_name}"
                in change_lines(only_row(rows, name)))


def test_worker_machine_type_change_replaces_the_group_with_a_cost_hint(
    plans: dict[str, Plan],
) -> None:
    rows = diff_plans(plans["base"], plans["bigger_workers"])
    assert actions(rows) == {("replace", WORKER), ("update", "head"), NEW_CONFIG_OBJECT}
    old_type = BASE_YAML["available_node_types"][WORKER]["node_config"]["machineType"]
    assert f"{WORKER}.machineType: {old_type} -> n2-standard-4" in change_lines(
        only_row(rows, WORKER))
    assert head_config_line(rows).endswith(
        f"2 changes: available_node_types.{WORKER}.node_config.machineType: "
        f"{old_type} -> n2-standard-4; available_node_types.{WORKER}.pinned.node_config."
        f"machineType: {old_type} -> n2-standard-4")
    markdown = render_markdown([only_row(rows, WORKER)], "s", "`main`", "working tree", 0)
    count = BASE_YAML["available_node_types"][WORKER]["min_workers"]
    assert f"cost hint: {old_type} $" in markdown
    assert f"for {count} node" in markdown


def test_adding_a_gpu_type_adds_only_its_worker_group(plans: dict[str, Plan]) -> None:
    rows = diff_plans(plans["base"], plans["with_gpu"])
    assert actions(rows) == {("add", "ray_worker_gpu"), ("update", "head"), NEW_CONFIG_OBJECT}
    assert only_row(rows, "ray_worker_gpu").kind == "WorkerGroup"
    assert head_config_line(rows).endswith(
        "3 changes: available_node_types.ray_worker_gpu added; available_node_types."
        "ray_worker_gpu.pinned added; provider.pinned_types.ray_worker_gpu.pinned added")


def test_adding_a_tpu_type_adds_its_workers_and_the_tpu_admin_role(
    plans: dict[str, Plan],
) -> None:
    all_rows = diff_plans(plans["base"], plans["with_tpu"])
    # The sweeper learns to sweep TPU VMs too, in place.
    (sweeper,) = [row for row in all_rows if row.subject.endswith("sweeper")]
    assert sweeper.action == "update"
    assert (config_object := only_row(all_rows, NEW_CONFIG_OBJECT[1])).action == "replace"
    rows = [row for row in all_rows
            if row.subject != "head" and row is not sweeper and row is not config_object]
    iam = [row for row in rows if row.type == IAM_MEMBER]
    assert {row.action for row in rows} == {"add"}
    assert {row.subject for row in rows} - {row.subject for row in iam} == {"ray_tpu"}
    assert len(iam) == 1 and iam[0].subject.endswith("tpu-admin")
    # The reviewer sees the slice itself: a V2Vm of its own, not hidden in a WorkerGroup.
    (tpu_slice,) = [row for row in rows if row.type == "gcp:tpu/v2Vm:V2Vm"]
    assert tpu_slice.new_name == f"{BASE_YAML['cluster_name']}-ray_tpu-0"


def test_removing_a_type_removes_only_its_worker_group(plans: dict[str, Plan]) -> None:
    rows = diff_plans(plans["with_gpu"], plans["base"])
    assert actions(rows) == {("remove", "ray_worker_gpu"), ("update", "head"), NEW_CONFIG_OBJECT}
    assert head_config_line(rows).endswith(
        "3 changes: available_node_types.ray_worker_gpu removed; available_node_types."
        "ray_worker_gpu.pinned removed; provider.pinned_types.ray_worker_gpu.pinned removed")


def _head(plan: Plan) -> dict[str, Any]:
    return next(r for r in plan["resources"]
                if r["type"] == "gcp:compute/instance:Instance"
                and r["inputs"]["labels"].get("ray-node-type") == "head")


def test_changed_startup_script_is_summarised_by_line_counts_not_dumped(
    plans: dict[str, Plan],
) -> None:
    after = copy.deepcopy(plans["base"])
    script = _head(plans["base"])["inputs"]["metadata"]["startup-script"]
    edited_script = script.replace("\n", "\n# reviewed\n", 1) + "echo one more line\n"
    _head(after)["inputs"]["metadata"]["startup-script"] = edited_script

    rows = diff_plans(plans["base"], after)

    assert actions(rows) == {("update", "head")}
    assert change_lines(rows[0]) == [
        f"head.metadata.startup-script: changed (+2/-0 of "
        f"{len(edited_script.splitlines())} lines)"
    ]
    markdown = render_markdown(rows, "s", "`main`", "working tree", 0)
    assert "echo one more line" not in markdown and "# reviewed" not in markdown


def test_new_metadata_entry_holding_a_file_is_summarised_as_added(
    plans: dict[str, Plan],
) -> None:
    after = copy.deepcopy(plans["base"])
    content = "line one\nline two\nline three\n"
    _head(after)["inputs"]["metadata"]["ray-file-mount-extra"] = content

    rows = diff_plans(plans["base"], after)

    assert change_lines(only_row(rows, "head")) == [
        f"head.metadata.ray-file-mount-extra: added ({len(content.splitlines())} lines)"
    ]


def test_metadata_no_longer_masked_is_listed_by_entry_without_script_text(
    plans: dict[str, Plan],
) -> None:
    """The base from before the key left metadata had it all as one [secret]."""
    before = copy.deepcopy(plans["base"])
    _head(before)["inputs"]["metadata"] = "[secret]"
    metadata = _head(plans["base"])["inputs"]["metadata"]

    lines = change_lines(only_row(diff_plans(before, plans["base"]), "head"))

    assert f"head.metadata: [secret] -> <{len(metadata)} entries>" in lines
    script = metadata["startup-script"]
    assert (f"head.metadata.startup-script: added ({len(script.splitlines())} lines)"
            in lines)
    long_lines = [line for line in script.splitlines() if len(line) > 40]
    assert long_lines and not any(part in line for line in lines for part in long_lines)


def test_bootstrap_config_key_matches_bootstrap() -> None:
    from bootstrap.node_metadata import BOOTSTRAP_CONFIG_KEY as BOOTSTRAP_KEY

    assert BOOTSTRAP_CONFIG_KEY == BOOTSTRAP_KEY


@pytest.mark.slow  # plan interpreters of both trees: over 5 CPU-s (tests/conftest.py)
def test_diff_against_a_ref_without_a_planner_plans_its_yaml_and_says_so(
    tmp_path: Path,
) -> None:
    write_stack(tmp_path, "s", BASE_YAML)
    git_commit_all(tmp_path, "base")
    write_stack(tmp_path, "s", edited(_more_workers))

    markdown = diff_stack_markdown("s", "HEAD", root=tmp_path)

    node_type = BASE_YAML["available_node_types"][WORKER]
    assert f"`{WORKER}.count: {node_type['min_workers']} -> {node_type['max_workers']}`" \
        in markdown
    assert "1 to replace" in markdown  # the autoscaler config's object, named after its text
    assert f"`HEAD` has no `{PLANNER}`" in markdown
    assert (tmp_path / "stacks/clusters/s.yaml").read_text() == yaml.safe_dump(
        edited(_more_workers)
    ), "the working tree must not be touched"


PROJECT_PARTS = ("model", "infra", "bootstrap", "ops", "stacks", "pyproject.toml")
DEFAULTS = "model/config/gcp_defaults.yaml"


def copy_project(dest: Path) -> None:
    for part in PROJECT_PARTS:
        source = PROJECT_ROOT / part
        if source.is_dir():
            shutil.copytree(source, dest / part,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, dest / part)


@pytest.mark.slow  # plan interpreters of both trees: over 5 CPU-s (tests/conftest.py)
def test_program_only_change_is_diffed_with_the_base_trees_own_program(
    tmp_path: Path,
) -> None:
    """The base commit's program has another default; the stack files are the same on both
    sides, so only running the base tree's own program can show the row."""
    copy_project(tmp_path)
    defaults = (tmp_path / DEFAULTS).read_text()
    current = yaml.safe_load(defaults)["idle_timeout_minutes"]
    line = f"idle_timeout_minutes: {current}\n"
    assert line in defaults
    (tmp_path / DEFAULTS).write_text(defaults.replace(line, f"idle_timeout_minutes: "
                                                            f"{current + 2}\n"))
    git_commit_all(tmp_path, "base: another default")
    (tmp_path / DEFAULTS).write_text(defaults)

    markdown = diff_stack_markdown("minimal", "HEAD", root=tmp_path)

    assert (f"`head.metadata.{BOOTSTRAP_CONFIG_KEY}: 1 change: idle_timeout_minutes: "
            f"{current + 2} -> {current}`") in markdown
    assert "has no" not in markdown, "the base tree has a planner: no fallback note"
    assert (tmp_path / DEFAULTS).read_text() == defaults, "the working tree is untouched"
    assert changed_stacks("HEAD", root=tmp_path) == sorted(
        p.name[len("Pulumi."):-len(".yaml")] for p in (tmp_path / "stacks").glob("Pulumi.*"))


def test_changed_stacks_are_only_the_touched_ones_unless_the_program_changed(
    tmp_path: Path,
) -> None:
    write_stack(tmp_path, "a", BASE_YAML)
    write_stack(tmp_path, "b", BASE_YAML)
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra/program.py").write_text("X = 1\n")
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops/plan_extra.py").write_text("Y = 1\n")
    (tmp_path / "ops/ssh.py").write_text("Z = 1\n")
    (tmp_path / "README.md").write_text("readme\n")
    git_commit_all(tmp_path, "base")
    assert changed_stacks("HEAD", root=tmp_path) == []

    (tmp_path / "ops/ssh.py").write_text("Z = 2\n")
    (tmp_path / "README.md").write_text("more\n")
    write_stack(tmp_path, "a", edited(_more_workers))
    assert changed_stacks("HEAD", root=tmp_path) == ["a"]

    for program_file in ("infra/program.py", "ops/plan_extra.py", "pyproject.toml"):
        git_commit_all(tmp_path, "next")
        (tmp_path / program_file).write_text("changed = True\n")
        assert changed_stacks("HEAD", root=tmp_path) == ["a", "b"], program_file


# ---- issue 13: what each change does to a running node (in place, stop/start, new nodes)


def test_changed_startup_script_is_said_to_be_reapplied_in_place(plans: dict[str, Plan]) -> None:
    from ops.review.plan_effects import REAPPLY_NOTE, node_effect

    after = copy.deepcopy(plans["base"])
    _head(after)["inputs"]["metadata"]["startup-script"] += "echo one more line\n"
    rows = diff_plans(plans["base"], after)
    assert node_effect(only_row(rows, "head")) == REAPPLY_NOTE
    assert f"  - effect: {REAPPLY_NOTE}" in render_markdown(rows, "s", "a", "b", 0)


def test_config_change_rewrites_in_place_scaling_leaves_nodes_a_new_head_is_new_nodes(
    plans: dict[str, Plan],
) -> None:
    from ops.review.plan_effects import CONFIG_NOTE, NEW_NODE_NOTE, NEW_WORKERS_NOTE, node_effect

    tuned = diff_plans(plans["base"], plans["longer_idle_timeout"])
    assert node_effect(only_row(tuned, "head")) == CONFIG_NOTE
    scaled = diff_plans(plans["base"], plans["more_workers"])
    assert node_effect(only_row(scaled, WORKER)) is None  # a count change: scaled in place
    bigger = diff_plans(plans["base"], plans["bigger_head"])
    assert node_effect(only_row(bigger, "head")) == NEW_NODE_NOTE
    assert node_effect(only_row(bigger, WORKER)) == NEW_WORKERS_NOTE


def test_a_worker_script_change_updates_the_group_in_place_and_is_said_to_be_reapplied(
    plans: dict[str, Plan],
) -> None:
    from ops.review.plan_effects import REAPPLY_NOTE, node_effect

    rows = diff_plans(plans["base"], plans["worker_setup"])
    worker = only_row(rows, WORKER)
    assert worker.action == "update"
    assert "metadata.startup-script" in {change.path for change in worker.changes}
    assert node_effect(worker) == REAPPLY_NOTE


def test_a_head_input_outside_metadata_is_said_to_stop_and_start_it(
    plans: dict[str, Plan],
) -> None:
    from ops.review.plan_effects import STOP_START_NOTE, node_effect

    after = copy.deepcopy(plans["base"])
    _head(after)["inputs"]["minCpuPlatform"] = "Intel Ice Lake"
    assert node_effect(only_row(diff_plans(plans["base"], after), "head")) == STOP_START_NOTE


def test_queued_tpu_slices_replace_the_v2vm_and_a_longer_wait_is_an_in_place_update(
    plans: dict[str, Plan],
) -> None:
    switched = diff_plans(plans["with_tpu"], plans["with_tpu_queued"])
    assert ("remove", "ray_tpu") in actions(switched) and ("add", "ray_tpu") in actions(switched)
    (added,) = [row for row in switched if row.action == "add"]
    assert added.kind == "QueuedTpuSlice"
    longer = diff_plans(plans["with_tpu_queued"], plans["with_tpu_queued_longer"])
    assert actions(longer) == {("update", "ray_tpu")}
    assert "ray_tpu.wait_minutes: 30 -> 90" in change_lines(only_row(longer, "ray_tpu"))


def test_a_new_worker_script_reapplies_on_queued_slices_in_place(plans: dict[str, Plan]) -> None:
    rows = diff_plans(plans["with_tpu_queued"], plans["with_tpu_queued_new_setup"])
    tpu_slice = only_row(rows, "ray_tpu")
    assert tpu_slice.action == "update" and tpu_slice.kind == "QueuedTpuSlice"
    assert any(line.startswith("ray_tpu.metadata.startup-script: changed")
               for line in change_lines(tpu_slice))
    assert node_effect(tpu_slice) == REAPPLY_NOTE


@pytest.mark.slow  # plan interpreters of both trees: over 5 CPU-s (tests/conftest.py)
def test_a_mounted_file_is_one_replaced_archive_in_the_diff_and_unchanged_is_no_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive is named with the stack's plan secret: the base tree (planned from its
    temp folder) and the working tree must use the same one, or an untouched mount would
    show as a new archive in every diff."""
    monkeypatch.delenv("RAY_GCP_STATE_DIR", raising=False)  # each side's default folder
    root = tmp_path / "repo"
    copy_project(root)
    (root / "secrets").mkdir()
    (root / "secrets/pin").write_text("4821")
    write_stack(root, "pin", edited(lambda c: c.update(file_mounts={"~/pin": "secrets/pin"})))
    git_commit_all(root, "base")

    unchanged = diff_stack_markdown("pin", "HEAD", root=root)
    (root / "secrets/pin").write_text("4822")
    changed = diff_stack_markdown("pin", "HEAD", root=root)

    assert "file-mounts" not in unchanged
    assert "0 to replace, 0 to update" in unchanged
    # The new archive, and the autoscaler config whose worker bodies carry the scripts that
    # name it (the nodes' scripts update in place).
    assert "2 to replace, 2 to update" in changed
    assert "ray-full-bucket-file-mounts.source: changed" in changed
    assert "4821" not in changed and "4822" not in changed
