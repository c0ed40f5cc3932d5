"""`invoke scale`: the count lands in the stack file, in range (the type's and the cluster's, as
the plan checks them), and pulumi's absence is clear before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from invoke import Context
from invoke.exceptions import Exit

import tasks
from ops.lifecycle.scale import COUNTS_KEY, ScaleError, set_worker_count

CLUSTER_YAML = """
cluster_name: full
max_workers: 4
provider: {type: gcp, region: us-west1, availability_zone: us-west1-a, project_id: p}
auth: {ssh_user: ubuntu}
available_node_types:
  ray_head_default:
    resources: {}
    node_config: {machineType: n1-standard-2}
  ray_worker_small:
    min_workers: 1
    max_workers: 3
    resources: {}
    node_config: {machineType: n1-standard-2}
  ray_worker_gpu:
    max_workers: 3
    resources: {}
    node_config: {machineType: n1-standard-2}
head_node_type: ray_head_default
"""


@pytest.fixture
def stacks(tmp_path: Path) -> Path:
    cluster = tmp_path / "full.yaml"
    cluster.write_text(CLUSTER_YAML)
    (tmp_path / "Pulumi.full.yaml").write_text(yaml.safe_dump(
        {"config": {"ray-gcp:cluster": str(cluster), "gcp:project": "p"}}))
    return tmp_path


def test_count_is_written_under_worker_counts_keeping_other_keys(stacks):
    set_worker_count("full", "ray_worker_small", 3, stacks)

    config = yaml.safe_load((stacks / "Pulumi.full.yaml").read_text())["config"]
    assert config[COUNTS_KEY] == {"ray_worker_small": 3}
    assert config["gcp:project"] == "p"
    assert config["ray-gcp:cluster"].endswith("full.yaml")


@pytest.mark.parametrize("count", [0, 4])
def test_count_outside_min_and_max_workers_is_refused_in_one_line(stacks, count):
    with pytest.raises(ScaleError) as refused:
        set_worker_count("full", "ray_worker_small", count, stacks)

    assert "min_workers 1 to max_workers 3" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert COUNTS_KEY not in (stacks / "Pulumi.full.yaml").read_text()


def test_counts_over_the_clusters_max_workers_are_refused_beside_those_pinned(stacks):
    set_worker_count("full", "ray_worker_small", 3, stacks)
    before = (stacks / "Pulumi.full.yaml").read_text()

    with pytest.raises(ScaleError) as refused:
        set_worker_count("full", "ray_worker_gpu", 2, stacks)  # 3 + 2 > max_workers 4

    assert "5 workers exceed the cluster's max_workers (4)" in str(refused.value)
    assert (stacks / "Pulumi.full.yaml").read_text() == before
    set_worker_count("full", "ray_worker_gpu", 1, stacks)  # 3 + 1 fits


def test_scale_task_refuses_a_count_over_the_clusters_max_workers(stacks, monkeypatch,
                                                                 tmp_path, capsys):
    own = tmp_path / "state" / "stacks"
    own.mkdir(parents=True)
    document = yaml.safe_load((stacks / "Pulumi.full.yaml").read_text())
    document["config"][COUNTS_KEY] = {"ray_worker_small": 3}
    (own / "Pulumi.mine.yaml").write_text(yaml.safe_dump(document))
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PATH", "/nonexistent")  # refused before the CLI is looked for
    before = (own / "Pulumi.mine.yaml").read_text()

    with pytest.raises(Exit) as exited:
        tasks.scale(Context(), stack="mine", type="ray_worker_gpu", count="2")

    assert exited.value.code != 0
    said = f"{exited.value.message or ''}{capsys.readouterr().err}"
    assert "5 workers exceed the cluster's max_workers (4): lower a count" in said
    assert (own / "Pulumi.mine.yaml").read_text() == before


def test_unknown_node_type_names_the_known_ones(stacks):
    with pytest.raises(ScaleError, match="ray_worker_small"):
        set_worker_count("full", "ray_worker_huge", 1, stacks)


def test_scale_task_without_the_cli_exits_non_zero_and_writes_nothing(stacks, monkeypatch,
                                                                     tmp_path):
    own = tmp_path / "state" / "stacks"  # the project folder's own stack files
    own.mkdir(parents=True)
    (own / "Pulumi.mine.yaml").write_text((stacks / "Pulumi.full.yaml").read_text())
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no engine installed there
    before = (own / "Pulumi.mine.yaml").read_text()

    with pytest.raises(Exit) as exited:
        tasks.scale(Context(), stack="mine", type="ray_worker_small", count="2")

    assert exited.value.code != 0
    assert "the pulumi CLI is not on PATH nor in" in str(exited.value.message)
    assert (own / "Pulumi.mine.yaml").read_text() == before
