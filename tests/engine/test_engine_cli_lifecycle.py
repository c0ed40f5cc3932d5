"""`pulumi preview --diff / up / refresh / destroy --stack S` through the pulumi CLI, as a
Pulumi user runs them on this project (Pulumi.yaml as it is, the stack's settings file from
stacks/), with the language host double (tests/fakes/language_host) running `main: infra/` in the
project's .venv, against the fake cloud and the stand-in gcp plugin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_cli import CliProject
from tests.support.engine_stack import EngineWorkspace, cluster_nodes, repo_stack_config

PROJECT, ZONE = "my-gcp-project", "us-west1-a"


@pytest.fixture
def cli(engine_bin: Path, tmp_path) -> Iterator[tuple[CliProject, FakeComputeServer]]:
    bin_dir = engine_bin
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        yield CliProject(EngineWorkspace(fake, bin_dir, root=tmp_path)), fake


def cluster_name(stack: str) -> str:
    import yaml

    from tests.support.engine_stack import PROJECT_ROOT
    path = PROJECT_ROOT / repo_stack_config(stack)["ray-gcp:cluster"]
    return yaml.safe_load(path.read_text())["cluster_name"]


@pytest.mark.parametrize("stack", ["minimal", "full"])
def test_pulumi_cli_runs_the_project_through_its_lifecycle(cli, stack: str) -> None:
    project, fake = cli
    cluster = cluster_name(stack)
    project.run("stack", "init", stack)

    planned = project.preview_changes(stack)
    assert planned.get("create", 0) > 1 and set(planned) == {"create"}, planned
    assert cluster_nodes(fake, PROJECT, ZONE, cluster) == {}  # a preview creates nothing

    project.run("up", "--yes", "--stack", stack)
    nodes = cluster_nodes(fake, PROJECT, ZONE, cluster)
    assert [n["labels"].get("ray-node-type") for n in nodes.values()].count("head") == 1
    assert set(project.preview_changes(stack)) == {"same"}  # up left nothing to do

    project.run("refresh", "--yes", "--stack", stack)
    assert set(project.preview_changes(stack)) == {"same"}  # refresh read back what up made

    project.run("destroy", "--yes", "--stack", stack)
    assert cluster_nodes(fake, PROJECT, ZONE, cluster) == {}
    assert project.export(stack).get("resources") in (None, [])
