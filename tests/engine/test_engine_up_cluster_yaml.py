"""`invoke up -c cluster.yaml` as a Ray user types it, through the real pulumi CLI: with no
backend and no passphrase of the user's, the stack named after the YAML's cluster_name is
created in the file backend under the state folder (here $RAY_GCP_STATE_DIR in a temp dir) with
a generated 0600 passphrase, runs against the fake cloud and the stand-in gcp plugin, is
reused by a second `up -c`, and `down -c -y` deletes the cluster. `up` ends with the head's
address, whether Ray is up on it, and what to type next."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_stack import PROJECT_ROOT, EngineWorkspace, cluster_nodes
from tests.support.warm_python import run_module

CLUSTER = "engine-up-yaml"
TRACKED_STACKS = PROJECT_ROOT / "stacks"
PROJECT, ZONE = "my-gcp-project", "us-west1-a"
USERS_OWN = ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE",
             "RAY_GCP_SECRETS_PROVIDER")


@pytest.fixture
def user(engine_bin: Path,
         tmp_path: Path) -> Iterator[tuple[dict[str, str], FakeComputeServer, Path]]:
    """The environment of a user who set up nothing for pulumi (the engine pointed at the
    fake), the fake cloud, and the user's own cluster YAML outside the project."""
    bin_dir = engine_bin
    cluster = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/minimal.yaml").read_text())
    cluster["cluster_name"] = CLUSTER
    cluster_yaml = tmp_path / "my-cluster.yaml"
    cluster_yaml.write_text(yaml.safe_dump(cluster))
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, bin_dir, root=tmp_path / "engine")
        env = {key: value for key, value in {**os.environ, **space.env}.items()
               if key not in USERS_OWN}
        env["RAY_GCP_STATE_DIR"] = str(tmp_path / "state-dir")
        yield env, fake, cluster_yaml


def invoke(env: dict[str, str], *args: str) -> str:
    done = run_module(["invoke", *args], cwd=PROJECT_ROOT, env=env, timeout=900)
    assert done.returncode == 0, f"invoke {' '.join(args)}:\n{done.stdout[-3000:]}" \
        f"{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def local_stacks(env: dict[str, str], state_dir: Path) -> dict[str, int]:
    """`pulumi stack ls` of the file backend under the state folder: name -> resources."""
    listed = subprocess.run(
        [str(Path(env["ENGINE_ROOT"]) / "bin" / "pulumi"), "stack", "ls", "--json",
         "--cwd", str(PROJECT_ROOT)],
        env={**env, "PULUMI_BACKEND_URL": f"file://{state_dir}"}, capture_output=True,
        text=True, timeout=300, check=True)
    return {stack["name"]: stack.get("resourceCount", 0) for stack in json.loads(listed.stdout)}


def heads(fake: FakeComputeServer) -> dict[str, str]:
    """The cluster's head instances: name -> creation timestamp."""
    return {name: node.get("creationTimestamp", "")
            for name, node in cluster_nodes(fake, PROJECT, ZONE, CLUSTER).items()
            if node["labels"].get("ray-node-type") == "head"}


@pytest.mark.slow  # over 60 s on the loaded 2-core machine
def test_up_with_a_cluster_yaml_creates_its_stack_locally_and_down_deletes_it(user) -> None:
    env, fake, cluster_yaml = user
    state_dir = Path(env["RAY_GCP_STATE_DIR"])

    said = invoke(env, "up", "-c", str(cluster_yaml))
    passphrase = state_dir / ".pulumi-passphrase"
    assert stat.S_IMODE(passphrase.stat().st_mode) == 0o600
    assert passphrase.read_text().strip() not in said
    stack_file = state_dir / "stacks" / f"Pulumi.{CLUSTER}.yaml"
    assert yaml.safe_load(stack_file.read_text())["config"] == {
        "ray-gcp:cluster": str(cluster_yaml)}
    assert not (TRACKED_STACKS / f"Pulumi.{CLUSTER}.yaml").exists()  # never in the tool's tree
    created = local_stacks(env, state_dir)
    assert created.get(CLUSTER, 0) > 0, created
    first = heads(fake)
    assert len(first) == 1, first
    [head] = first
    ip = fake.instances(PROJECT, ZONE)[head]["networkInterfaces"][0]["accessConfigs"][0]["natIP"]
    *_, state, next_commands = said.strip().splitlines()
    assert state == f"head {head} at {ip}: Ray is not up yet (the head has not reported yet)"
    for command in ("attach", "dashboard", "down"):
        assert f"`invoke {command} -s {CLUSTER}`" in next_commands

    said = invoke(env, "up", "--config", str(cluster_yaml), "--yes")
    assert "wrote" not in said
    assert local_stacks(env, state_dir).keys() == created.keys()
    assert heads(fake) == first  # the same stack: its head kept, not created again

    invoke(env, "down", "-c", str(cluster_yaml), "-y")
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}
    assert local_stacks(env, state_dir)[CLUSTER] == 0


@pytest.mark.slow  # over 60 s on the loaded 2-core machine
def test_up_of_a_tracked_stack_never_writes_its_file_and_runs_again(user) -> None:
    """`invoke up -s minimal` (a stack file git tracks) with the user's own backend and
    passphrase: the engine's encryption salt goes to the state folder's copy, the tracked file
    stays as git has it, and the next up unlocks the stack with that salt."""
    env, fake, _ = user
    env = {**env, "PULUMI_BACKEND_URL": f"file://{Path(env['RAY_GCP_STATE_DIR']).parent}",
           "PULUMI_CONFIG_PASSPHRASE": "the-users-own"}
    tracked = TRACKED_STACKS / "Pulumi.minimal.yaml"
    before = tracked.read_bytes()
    copy = Path(env["RAY_GCP_STATE_DIR"]) / "stacks" / "Pulumi.minimal.yaml"
    try:
        invoke(env, "up", "-s", "minimal")
        assert tracked.read_bytes() == before
        salt = yaml.safe_load(copy.read_text())["encryptionsalt"]
        assert salt.startswith("v1:")
        assert yaml.safe_load(copy.read_text())["config"]["ray-gcp:cluster"] == str(
            PROJECT_ROOT / "stacks/clusters/minimal.yaml")
        first = cluster_nodes(fake, PROJECT, ZONE, "minimal")
        assert first

        invoke(env, "up", "-s", "minimal")  # unlocked with the kept salt
        assert yaml.safe_load(copy.read_text())["encryptionsalt"] == salt
        assert tracked.read_bytes() == before
    finally:
        invoke(env, "down", "-s", "minimal", "-y")
    assert cluster_nodes(fake, PROJECT, ZONE, "minimal") == {}
    assert tracked.read_bytes() == before
