"""`invoke preview / up / refresh / down` as a user runs them, through the real pulumi CLI,
on a stack of this project (a test stack file in stacks/, removed afterwards) backed by the
fake cloud and the stand-in gcp plugin."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import yaml

from tests.engine_stack import PROJECT_ROOT, EngineWorkspace, cluster_nodes, require_engine
from tests.fake_compute import FakeComputeServer, Faults

pytestmark = pytest.mark.engine

STACK = "engine-invoke"
STACK_FILE = PROJECT_ROOT / "stacks" / f"Pulumi.{STACK}.yaml"
PROJECT, ZONE, CLUSTER = "my-gcp-project", "us-west1-a", "minimal"


@pytest.fixture
def user_stack(tmp_path) -> Iterator[tuple[EngineWorkspace, FakeComputeServer]]:
    bin_dir = require_engine()
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, bin_dir, root=tmp_path)
        env = {**os.environ, **space.env}
        STACK_FILE.write_text(yaml.safe_dump(
            {"config": {"ray-gcp:cluster": "stacks/clusters/minimal.yaml"}}))
        try:
            subprocess.run([str(bin_dir / "pulumi"), "stack", "init", STACK, "--cwd",
                            str(PROJECT_ROOT)], env=env, check=True, capture_output=True)
            yield space, fake
        finally:
            STACK_FILE.unlink(missing_ok=True)


def invoke(space: EngineWorkspace, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=PROJECT_ROOT,
                          env={**os.environ, **space.env}, capture_output=True, text=True,
                          timeout=900)


def test_invoke_lifecycle_tasks_drive_the_engine(user_stack) -> None:
    space, fake = user_stack
    for task in ("preview", "up", "refresh", "down"):
        done = invoke(space, task, "-s", STACK)
        assert done.returncode == 0, f"invoke {task}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        if task == "preview":
            assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}
        if task in ("up", "refresh"):
            kinds = [node["labels"].get("ray-node-type")
                     for node in cluster_nodes(fake, PROJECT, ZONE, CLUSTER).values()]
            assert kinds.count("head") == 1, kinds
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}
