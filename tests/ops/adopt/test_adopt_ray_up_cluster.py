"""`invoke adopt -c cluster.yaml` on a cluster Ray's own launcher made
(tests/support/ray_launcher.py: `bootstrap_gcp` and `GCPNodeProvider` from the wheel against the
fake cloud, as `ray up` calls them, without SSH), through the real engine and the stand-in gcp
plugin: the adoption imports the head under its own name and Ray's account and roles, replaces
and deletes nothing, and keeps every node Ray made; `up` then
changes nothing; Ray's provider still lists every adopted node, labelled as the head's autoscaler
expects; `down` removes everything, so that Ray's `teardown_cluster` would find no node left."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.compute import FakeComputeServer
from tests.support.adoption import (
    invoke,
    made_by_ray,
    shipped_yaml,
    summaries,
)
from tests.support.engine_stack import cluster_nodes
from tests.support.ray_launcher import RayMade, ray_sees

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.mark.parametrize("shape", ["minimal", "full", "gpu-docker"])
def test_adopt_takes_a_ray_up_cluster_without_touching_a_node(ray_user, tmp_path, shape):
    env, fake = ray_user
    data = shipped_yaml(shape)
    cluster_yaml, made = made_by_ray(fake, tmp_path, data)
    adopt_up_down(env, fake, data, cluster_yaml, made)


def test_adopt_takes_a_cluster_whose_head_ray_up_replaced_twice(ray_user, tmp_path) -> None:
    """`ray up` again after the head's node_config changed replaces the head (its launch hash
    differs); twice. The workers of the first `ray up` keep running; adopting with the last
    YAML takes the last head."""
    env, fake = ray_user
    data = shipped_yaml("full", "adopt-relaunched")
    cluster_yaml, first = made_by_ray(fake, tmp_path, data)
    boot = data["available_node_types"]["ray_head_default"]["node_config"]["disks"][0]
    heads = [first.head]
    for size in (60, 70):
        boot["initializeParams"]["diskSizeGb"] = size
        cluster_yaml, made = made_by_ray(fake, tmp_path, data, demand={})
        heads.append(made.head)
    assert len(set(heads)) == 3, heads  # a new head each time
    assert made.workers == first.workers  # the workers of the first `ray up` keep running
    adopt_up_down(env, fake, data, cluster_yaml, made)


def adopt_up_down(env: dict[str, str], fake: FakeComputeServer, data: dict[str, Any],
                  cluster_yaml: Path, made: RayMade) -> None:
    """Adopt the cluster `ray up` made (`made`, from `data` in `cluster_yaml`): nothing
    replaced, deleted or added; `up` refreshes and ups with nothing to change; Ray's
    provider still lists every node, labelled as its autoscaler expects; `down` leaves
    nothing it would list."""
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

    # `up` on the adopted stack, one engine run that refreshes as it goes: it reads back what
    # was imported and has nothing left to change (so no preview after it has either).
    up = invoke(env, "up", "-c", str(cluster_yaml), "-y").stdout
    said = summaries(up)
    assert len(said) == 1 and re.fullmatch(r"\d+ same", said[0]), up
    assert sorted(cluster_nodes(fake, project, zone, name)) == ray_nodes

    # Ray's provider still finds every node it made, each labelled as `ray up`'s autoscaler,
    # which the head goes on running, expects (tests/ops/adopt/test_adopt_rays_autoscaler.py
    # runs it): the head as its head, every worker its own, with the launch hash Ray gave it.
    assert ray_sees(made.config) == ray_nodes
    nodes = cluster_nodes(fake, project, zone, name)
    labels = {n: node["labels"] for n, node in nodes.items()}
    assert labels[made.head]["ray-node-type"] == "head"
    stack = labels[made.head]["ray-gcp-stack"]
    for node_type, names in made.workers.items():
        for worker in names:  # the autoscaler's as before, the stack's to remove
            assert labels[worker]["ray-node-type"] == "worker"
            assert labels[worker]["ray-user-node-type"] == node_type
            assert labels[worker]["ray-launch-config"] == \
                before[worker]["labels"]["ray-launch-config"]
            assert labels[worker]["ray-gcp-stack"] == stack

    invoke(env, "down", "-c", str(cluster_yaml), "-y")
    assert cluster_nodes(fake, project, zone, name) == {}
    assert ray_sees(made.config) == []


def test_adopt_without_a_terminal_asks_nothing_and_leaves_no_stack(ray_user, tmp_path) -> None:
    """No `-y` and no terminal to ask on: after the preview it refuses, as `down` does, and
    the stack it wrote for the preview is gone again; every node is as Ray left it."""
    env, fake = ray_user
    data = shipped_yaml("minimal")
    cluster_yaml, made = made_by_ray(fake, tmp_path, data)
    project, zone = data["provider"]["project_id"], data["provider"]["availability_zone"]
    before = cluster_nodes(fake, project, zone, data["cluster_name"])

    done = invoke(env, "adopt", "-c", str(cluster_yaml), check=False)
    assert done.returncode != 0
    assert "nothing adopted: no terminal to ask on; add -y (--yes)" in done.stderr, done.stderr
    stack_file = Path(env["RAY_GCP_STATE_DIR"]) / "stacks" / f"Pulumi.{data['cluster_name']}.yaml"
    assert not stack_file.exists()
    assert cluster_nodes(fake, project, zone, data["cluster_name"]) == before
    assert made.head in before
