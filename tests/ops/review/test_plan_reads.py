"""`invoke plan` as people read it: the table by default, the JSON document only with
`--format json` (or `--json`, or an output file named `*.json`); it writes nothing (no plan
key, no archive in the state folder); each warning shows once, every line ends in a newline;
and the price at max_workers is one figure, capped by the cluster's max_workers (never
"every type at its max" beside it)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from model.config import parse_cluster_config
from model.stack_config import PROJECT_ROOT
from ops.review.plan import plan_yaml, render_table
from ops.review.prices import node_type_price
from tests.support.warm_python import run_module

MINIMAL = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/minimal.yaml").read_text())
IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"
OPEN_SSH = "provider.ssh_source_ranges: SSH to the head is open to the whole internet"


def cluster_with_mounts(folder: Path) -> Path:
    """A user's cluster outside the project, mounting a local file (the archive a plan once
    left in the state folder, keyed with a plan secret it also wrote there)."""
    (folder / "data.txt").write_text("hello")
    cluster = {**copy.deepcopy(MINIMAL), "cluster_name": "reads-plan",
               "file_mounts": {"~/data.txt": str(folder / "data.txt")}}
    path = folder / "cluster.yaml"
    path.write_text(yaml.safe_dump(cluster))
    return path


RUNNER = PROJECT_ROOT / "tests" / "support" / "task_runner.py"


def plan_env(folder: Path) -> dict[str, str]:
    return {**os.environ, "RAY_GCP_STATE_DIR": str(folder / "state"),
            "XDG_CACHE_HOME": str(folder / "cache")}


def invoke_plan(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The `invoke` binary, as a user runs it (its whole stderr is what the user sees)."""
    return run_module(["invoke", "plan", *args], cwd=PROJECT_ROOT, env=plan_env(folder),
                      timeout=300)


def invoke_plans(folder: Path, *argvs: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """More `invoke plan` command lines, in turn in one interpreter, through invoke's own
    parsing (tests/support/task_runner.py)."""
    ran = subprocess.run([sys.executable, str(RUNNER), json.dumps([["plan", *argv]
                                                                    for argv in argvs])],
                         cwd=PROJECT_ROOT, env=plan_env(folder), capture_output=True, text=True,
                         timeout=300)
    assert ran.returncode == 0, ran.stderr
    return [subprocess.CompletedProcess(run["argv"], run["code"], run["stdout"], run["stderr"])
            for run in json.loads(ran.stdout)]


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """The table and the JSON from the binary; the other forms of asking for them (a format
    option, an output file) through the task runner, one interpreter for the three."""
    folder = tmp_path_factory.mktemp("reads")
    path = cluster_with_mounts(folder)
    runs = {"default": invoke_plan(folder, "-c", str(path)),
            "json": invoke_plan(folder, "-c", str(path), "--json")}
    runs.update(zip(("format_json", "to_json_file", "to_text_file"), invoke_plans(
        folder, ["-c", str(path), "--format", "json"],
        ["-c", str(path), "-o", str(folder / "plan.json")],
        ["-c", str(path), "-o", str(folder / "plan.txt")]), strict=True))
    runs["files"] = {name: (folder / name).read_text()  # type: ignore[assignment]
                     for name in ("plan.json", "plan.txt")}
    runs["state"] = folder / "state"  # type: ignore[assignment]
    return runs


@pytest.mark.slow  # the module's `invoke plan` runs, ~10 CPU-s
def test_plan_prints_the_table_by_default_and_json_when_asked(shown):
    table = shown["default"]
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("stack reads-plan (")
    assert "NODE TYPE" in table.stdout and "KIND" in table.stdout
    assert len(table.stdout.splitlines()) < 80  # not 600 lines of JSON with base64 blobs
    document = json.loads(shown["json"].stdout)
    assert document["stack"] == "reads-plan" and document["resources"]
    assert shown["format_json"].stdout == shown["json"].stdout


@pytest.mark.slow  # the module's `invoke plan` runs, ~10 CPU-s
def test_an_output_file_named_json_gets_the_document_any_other_the_table(shown):
    assert shown["to_json_file"].returncode == 0, shown["to_json_file"].stderr
    assert shown["files"]["plan.json"] == shown["json"].stdout
    assert shown["files"]["plan.txt"] == shown["default"].stdout


@pytest.mark.slow  # the module's `invoke plan` runs, ~10 CPU-s
def test_plan_writes_nothing_into_the_state_folder(shown):
    assert shown["default"].returncode == 0
    assert not shown["state"].exists()


@pytest.mark.slow  # the module's `invoke plan` runs, ~10 CPU-s
def test_each_warning_shows_once_and_every_line_ends(shown):
    for run in (shown["default"], shown["json"]):
        assert run.stderr == ""  # warnings are in the plan, not printed beside it
    assert shown["default"].stdout.count(OPEN_SSH) == 1
    assert shown["default"].stdout.endswith("\n")
    assert [line for line in shown["default"].stdout.splitlines() if "warning:" in line] \
        == [line for line in shown["default"].stdout.splitlines() if line.startswith(
            "warning: ")]
    assert json.loads(shown["json"].stdout)["warnings"].count(
        next(w for w in json.loads(shown["json"].stdout)["warnings"] if w.startswith(OPEN_SSH))
    ) == 1


def test_the_price_at_max_workers_is_one_figure_capped_by_the_cluster_max(tmp_path,
                                                                          monkeypatch):
    """Two worker types of 4 at most each, the cluster's max_workers 3: at max_workers is
    the head and the 3 dearest workers, the one figure the table shows."""
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cluster = copy.deepcopy(MINIMAL)
    cluster["cluster_name"] = "capped-price"
    cluster["max_workers"] = 3
    def node(machine: str) -> dict:
        return {"machineType": machine, "disks": [{"boot": True, "autoDelete": True,
                "initializeParams": {"diskSizeGb": 50, "sourceImage": IMAGE}}]}

    worker = {"min_workers": 0, "max_workers": 4, "resources": {},
              "node_config": node("n1-standard-8")}
    cluster["available_node_types"] = {
        "ray_head_default": {"resources": {}, "node_config": node("n1-standard-2")},
        "big": worker, "bigger": {**worker, "node_config": node("n1-standard-16")}}
    cluster["head_node_type"] = "ray_head_default"
    path = tmp_path / "capped.yaml"
    path.write_text(yaml.safe_dump(cluster))
    plan = plan_yaml(str(path))
    config = parse_cluster_config(copy.deepcopy(cluster))
    region = config.provider.region
    price = {name: node_type_price(t, region).running
             for name, t in config.available_node_types.items()}
    expected = price["ray_head_default"] + 3 * price["bigger"]
    assert plan["price_per_hour"]["at_max_workers"] == pytest.approx(expected, abs=1e-4)
    table = render_table(plan)
    at_max = [line for line in table.splitlines() if "max" in line and "$" in line
              and not line.startswith(("big", "ray_head"))]
    assert at_max == [next(line for line in table.splitlines() if line.startswith("total:"))]
    assert f"up to ${expected:.2f}/h at max_workers" in at_max[0]
    assert "every type at its max" not in table
