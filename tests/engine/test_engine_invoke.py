"""`invoke preview / up / refresh / down` as a user runs them, through the real pulumi CLI,
on a stack of this project (a test stack file in stacks/, removed afterwards) backed by the
fake cloud and the stand-in gcp plugin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_stack import EngineWorkspace, cluster_nodes

# Writes or compares the checkout's stacks/ folder (EngineWorkspace.repo_stack, the stack files a
# refused up must not leave): one worker runs every such test (tests/conftest.py's groups).
pytestmark = pytest.mark.xdist_group("checkout-stacks")

STACK = "engine-invoke"
PROJECT, ZONE, CLUSTER = "my-gcp-project", "us-west1-a", "minimal"


@pytest.fixture
def user_stack(engine_bin: Path, tmp_path) -> Iterator[tuple[EngineWorkspace, FakeComputeServer]]:
    bin_dir = engine_bin
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, bin_dir, root=tmp_path)
        with space.repo_stack(STACK, {"ray-gcp:cluster": "stacks/clusters/minimal.yaml"}):
            yield space, fake


@pytest.mark.slow  # over 60 s on the loaded 2-core machine
def test_invoke_lifecycle_tasks_drive_the_engine(user_stack) -> None:
    space, fake = user_stack
    for task in ("preview", "up", "refresh", "down"):
        done = space.invoke(task, "-s", STACK, *(["-y"] if task == "down" else []))
        assert done.returncode == 0, f"invoke {task}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        if task == "preview":
            assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}
            asked = space.invoke("get-head-ip", "-s", STACK)  # nothing deployed: no outputs
            assert asked.returncode != 0
            assert f"deploy it first with `invoke up --stack {STACK}`" in asked.stderr
        if task in ("up", "refresh"):
            nodes = cluster_nodes(fake, PROJECT, ZONE, CLUSTER)
            kinds = [node["labels"].get("ray-node-type") for node in nodes.values()]
            assert kinds.count("head") == 1, kinds
            # The day-two tasks read the stack's outputs through the CLI too.
            (head,) = [node for node in nodes.values()
                       if node["labels"].get("ray-node-type") == "head"]
            asked = space.invoke("get-head-ip", "--internal", "-s", STACK)
            assert asked.returncode == 0, asked.stderr[-3000:]
            assert asked.stdout.split() == [head["networkInterfaces"][0]["networkIP"]]
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}
