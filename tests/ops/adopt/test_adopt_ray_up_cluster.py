"""`invoke adopt -c cluster.yaml` on a cluster Ray's own launcher made
(tests/support/ray_launcher.py: `bootstrap_gcp` and `GCPNodeProvider` from the wheel against the
fake cloud, as `ray up` calls them, without SSH), through the real engine and the stand-in gcp
plugin: the adoption imports the head under its own name and Ray's account and roles, replaces
and deletes nothing, and keeps every node Ray made; `up` then
changes nothing; Ray's provider still lists every adopted node, labelled as the head's autoscaler
expects; `down` removes everything, so that Ray's `teardown_cluster` would find no node left."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ray.autoscaler._private.util import hash_launch_conf

from model.config import parse_cluster_config
from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_stack import PROJECT_ROOT, EngineWorkspace, cluster_nodes, require_engine
from tests.support.ray_launcher import point_ray_at, ray_sees, ray_up

pytestmark = [pytest.mark.engine, pytest.mark.slow]

USERS_OWN = ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE")


def invoke(env: dict[str, str], *args: str, check: bool = True
           ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "invoke", *args], cwd=PROJECT_ROOT, env=env,
                          stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=900)
    if check:
        assert done.returncode == 0, f"invoke {' '.join(args)}:\n{done.stdout[-5000:]}" \
            f"{done.stderr[-3000:]}"
    return done


@pytest.fixture
def ray_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
             ) -> Iterator[tuple[dict[str, str], FakeComputeServer]]:
    """A user with Ray's launcher (its key goes to this test's ~/.ssh) and the tool, both at
    the fake cloud; the tool's state in a temp folder."""
    bin_dir = require_engine()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        point_ray_at(fake, monkeypatch)
        space = EngineWorkspace(fake, bin_dir, root=tmp_path / "engine")
        env = {key: value for key, value in {**os.environ, **space.env}.items()
               if key not in USERS_OWN}
        env["RAY_GCP_STATE_DIR"] = str(tmp_path / "state-dir")
        yield env, fake


def made_by_ray(fake: FakeComputeServer, tmp_path: Path, shape: str
                ) -> tuple[dict[str, Any], Path, Any]:
    data = yaml.safe_load((PROJECT_ROOT / f"stacks/clusters/{shape}.yaml").read_text())
    data["cluster_name"] = f"adopt-{shape}"
    for node_type in (data.get("available_node_types") or {}).values():
        # Ray's examples write scheduling as a list of one-key maps, which Ray's launcher
        # sends as it is and GCE refuses (the fake too): the object form `ray up` works with.
        scheduling = node_type["node_config"].get("scheduling")
        if isinstance(scheduling, list):
            node_type["node_config"]["scheduling"] = {
                key: value for entry in scheduling for key, value in entry.items()}
    provider = data["provider"]
    fake.cloud.catalogue.zones.setdefault(provider["region"], [provider["availability_zone"]])
    cluster_yaml = tmp_path / f"{shape}.yaml"
    cluster_yaml.write_text(yaml.safe_dump(data))
    # Where the YAML names its worker type: one worker more than min_workers, as the
    # autoscaler launches for pending work. (`minimal` keeps Ray's defaults, whose worker
    # node_config has Ray's list-form scheduling: the head alone.)
    types = [t for t in data.get("available_node_types") or {} if t != data["head_node_type"]]
    return data, cluster_yaml, ray_up(data, {types[0]: 1} if types else {})


def stack_output(env: dict[str, str], stack: str, key: str) -> str:
    """One output of a stack `-c` made, secrets shown (the state folder's backend)."""
    state = Path(env["RAY_GCP_STATE_DIR"])
    done = subprocess.run(
        [str(Path(env["ENGINE_ROOT"]) / "bin" / "pulumi"), "stack", "output", key, "--json",
         "--show-secrets", "--stack", stack, "--cwd", str(PROJECT_ROOT)],
        env={**env, "PULUMI_BACKEND_URL": f"file://{state}",
             "PULUMI_CONFIG_PASSPHRASE_FILE": str(state / ".pulumi-passphrase")},
        capture_output=True, text=True, timeout=300, check=True)
    return str(json.loads(done.stdout))


def bootstrap_config(fake: FakeComputeServer, project: str, zone: str, head: str) -> str:
    """The autoscaler config the head reads: the bucket object its `ray-bootstrap-config`
    metadata names."""
    items = fake.instances(project, zone)[head]["metadata"]["items"]
    reference = next(i["value"] for i in items if i["key"] == "ray-bootstrap-config")
    bucket, name = reference.removeprefix("gs://").split("/", 1)
    return fake.storage.objects[(bucket, name)].decode()


@pytest.mark.parametrize("shape", ["minimal", "full", "gpu-docker"])
def test_adopt_takes_a_ray_up_cluster_without_touching_a_node(ray_user, tmp_path, shape):
    env, fake = ray_user
    data, cluster_yaml, made = made_by_ray(fake, tmp_path, shape)
    project, zone = data["provider"]["project_id"], data["provider"]["availability_zone"]
    name = data["cluster_name"]
    before = cluster_nodes(fake, project, zone, name)
    ray_nodes = sorted([made.head, *(n for names in made.workers.values() for n in names)])
    assert sorted(before) == ray_nodes

    said = invoke(env, "adopt", "-c", str(cluster_yaml), "-y").stdout
    Path(os.environ.get("ADOPT_TEST_LOG", os.devnull)).write_text(said)
    assert f"head      {made.head}" in said, said
    assert "ray-autoscaler-sa-v1@" in said
    adopted = cluster_nodes(fake, project, zone, name)
    assert sorted(adopted) == ray_nodes  # nothing replaced, deleted or added
    for node in adopted.values():  # the same instances, not new ones of the same name
        assert node["id"] == before[node["name"]]["id"]

    # `up` on the adopted stack: its refresh reads back what was imported and its up has
    # nothing left to change (so neither has any preview after it).
    up = invoke(env, "up", "-c", str(cluster_yaml), "-y").stdout
    summaries = re.findall(r"^summary: (.*) in [\d.]+s$", up, re.M)
    assert len(summaries) == 2 and all(re.fullmatch(r"\d+ same", s) for s in summaries), up
    assert sorted(cluster_nodes(fake, project, zone, name)) == ray_nodes

    # Ray's provider still finds every node it made, each labelled as the head's autoscaler
    # expects: the head as its head, workers of their type.
    assert ray_sees(made.config) == ray_nodes
    nodes = cluster_nodes(fake, project, zone, name)
    labels = {n: node["labels"] for n, node in nodes.items()}
    assert labels[made.head]["ray-node-type"] == "head"
    stack = labels[made.head]["ray-gcp-stack"]
    head_config = yaml.safe_load(bootstrap_config(fake, project, zone, made.head))
    key_file = tmp_path / "head-key.pem"  # the key the head's config names, as the head has it
    key_file.write_text(stack_output(env, name, "ssh_private_key"))
    for node_type, names in made.workers.items():
        oldest_first = sorted(names, key=lambda n: (nodes[n]["creationTimestamp"], n))
        kinds = [labels[worker]["ray-node-type"] for worker in oldest_first]
        pinned = parse_cluster_config(copy.deepcopy(data)).available_node_types[
            node_type].min_workers
        # The type's pinned count taken by its worker group, the rest left to the autoscaler.
        assert kinds == ["unmanaged"] * min(pinned, len(names)) + \
            ["worker"] * (len(names) - min(pinned, len(names))), kinds
        # Every one, the autoscaler's too, carries the launch hash Ray's autoscaler on the
        # head computes for its type (Ray's own hash_launch_conf over the head's config and
        # key): it is up to date to the autoscaler, never terminated as outdated.
        expected = hash_launch_conf(head_config["available_node_types"][node_type]["node_config"],
                                    {**head_config["auth"], "ssh_private_key": str(key_file)})
        assert {labels[worker]["ray-launch-config"] for worker in names} == {expected}
        for worker in names:
            assert labels[worker]["ray-user-node-type"] == node_type
            assert labels[worker]["ray-gcp-stack"] == stack  # the stack's down removes it

    invoke(env, "down", "-c", str(cluster_yaml), "-y")
    assert cluster_nodes(fake, project, zone, name) == {}
    assert ray_sees(made.config) == []


def test_adopt_without_a_terminal_asks_nothing_and_leaves_no_stack(ray_user, tmp_path) -> None:
    """No `-y` and no terminal to ask on: after the preview it refuses, as `down` does, and
    the stack it wrote for the preview is gone again; every node is as Ray left it."""
    env, fake = ray_user
    data, cluster_yaml, made = made_by_ray(fake, tmp_path, "minimal")
    project, zone = data["provider"]["project_id"], data["provider"]["availability_zone"]
    before = cluster_nodes(fake, project, zone, data["cluster_name"])

    done = invoke(env, "adopt", "-c", str(cluster_yaml), check=False)
    assert done.returncode != 0
    assert "nothing adopted: no terminal to ask on; add -y (--yes)" in done.stderr, done.stderr
    stack_file = Path(env["RAY_GCP_STATE_DIR"]) / "stacks" / f"Pulumi.{data['cluster_name']}.yaml"
    assert not stack_file.exists()
    assert cluster_nodes(fake, project, zone, data["cluster_name"]) == before
    assert made.head in before
