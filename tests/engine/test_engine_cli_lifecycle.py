"""`pulumi preview --diff / up / refresh / destroy --stack S` through the pulumi CLI, as a
Pulumi user runs them on this project (Pulumi.yaml as it is, the stack's settings file from
stacks/), with the language host double (tests/fakes/language_host) running `main: infra/` in the
project's .venv, against the fake cloud and the stand-in gcp plugin.

`minimal` and `full` go through every step with a fresh workspace each; every other stack in
stacks/ shares one workspace (one copy of the project, one fake cloud) and goes through
preview --diff, up, a preview that finds nothing to do, a refresh that finds nothing changed
(--expect-no-changes) and destroy: five engine runs, about a minute each on a loaded 2-core
machine (marked slow).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_cli import CliProject
from tests.support.engine_stack import (
    EngineWorkspace,
    cluster_nodes,
    repo_stack_config,
    repo_stacks,
)

PROJECT, ZONE = "my-gcp-project", "us-west1-a"


@pytest.fixture
def cli(engine_bin: Path, tmp_path) -> Iterator[tuple[CliProject, FakeComputeServer]]:
    bin_dir = engine_bin
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        yield CliProject(EngineWorkspace(fake, bin_dir, root=tmp_path)), fake


def cluster_yaml(stack: str) -> dict[str, Any]:
    import yaml

    from tests.support.engine_stack import PROJECT_ROOT
    path = PROJECT_ROOT / repo_stack_config(stack)["ray-gcp:cluster"]
    return yaml.safe_load(path.read_text())


def cluster_name(stack: str) -> str:
    return cluster_yaml(stack)["cluster_name"]


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


LIFECYCLE_STACKS = ("minimal", "full")


@pytest.fixture(scope="module")
def shared_cli(engine_bin: Path) -> Iterator[tuple[CliProject, FakeComputeServer]]:
    bin_dir = engine_bin
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, bin_dir)
        try:
            yield CliProject(space), fake
        finally:
            space.cleanup()


@pytest.mark.slow
@pytest.mark.parametrize("stack", [s for s in repo_stacks() if s not in LIFECYCLE_STACKS])
def test_pulumi_cli_runs_every_stack(shared_cli, stack: str) -> None:
    project, fake = shared_cli
    provider = cluster_yaml(stack)["provider"]
    cluster, zone = cluster_name(stack), provider["availability_zone"]
    # The fake's regions have only `<region>-a` unless told: it offers the zone the stack names.
    zones = fake.cloud.catalogue.zones
    region = zone.rsplit("-", 1)[0]
    zones[region] = sorted({*zones.get(region, [f"{region}-a"]), zone})
    project.run("stack", "init", stack)

    shown = project.run("preview", "--diff", "--stack", stack).stdout
    assert re.search(r"^\s*\+ ray-gcp:index:RayCluster", shown, re.M), shown[-3000:]
    project.run("up", "--yes", "--stack", stack)
    nodes = cluster_nodes(fake, provider["project_id"], zone, cluster)
    assert [n["labels"].get("ray-node-type") for n in nodes.values()].count("head") == 1, nodes
    answer = json.loads(project.run("preview", "--json", "--stack", stack).stdout)
    assert set(answer.get("changeSummary") or {}) == {"same"}, answer.get("changeSummary")
    project.run("refresh", "--yes", "--expect-no-changes", "--stack", stack)

    project.run("destroy", "--yes", "--stack", stack)
    assert cluster_nodes(fake, provider["project_id"], zone, cluster) == {}
