"""A worker group of a stack adopting a `ray up` cluster (`adopt`, model/adoption.py), against
the fake: the running workers it is given as `pinned` become its own (it makes only what they
leave missing; stacks adopted before adoption left every worker to the autoscaler), those
given as `autoscaler` stay the autoscaler's and gain only the stack's label: their launch hash
stays Ray's, which the head's autoscaler `ray up` started computes; a worker of another type
is left alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infra.workers import WorkerGroupProvider
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.helpers import (
    CLUSTER,
    FAST_DEADLINES,
    NODE_TYPE,
    PROJECT,
    ZONE,
    compute_body,
    fast_retry,
    group_props,
)

STACK = "adopter-0a1b2c3d"


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        yield server


def rays_worker(fake: FakeComputeServer, name: str, node_type: str = NODE_TYPE) -> None:
    """A worker as Ray's autoscaler launched it."""
    fake.cloud.add_foreign_instance(PROJECT, ZONE, name, {
        "ray-cluster-name": CLUSTER, "ray-node-type": "worker", "ray-user-node-type": node_type,
        "ray-node-name": f"ray-{CLUSTER}-worker", "ray-node-status": "up-to-date",
        "ray-launch-config": "rays-own-hash"})


def test_pinned_become_the_groups_and_the_rest_stay_the_autoscalers(fake) -> None:
    for name in ("ray-full-worker-00000001-compute", "ray-full-worker-00000002-compute",
                 "ray-full-worker-00000003-compute"):
        rays_worker(fake, name)
    rays_worker(fake, "ray-full-worker-0000000f-compute", node_type="other")
    body = compute_body(launch_config="stacks-hash")
    body["labels"]["ray-gcp-stack"] = STACK
    props = group_props(fake.endpoint, 2, body=body, adopt={
        "pinned": ["ray-full-worker-00000001-compute", "ray-full-worker-00000002-compute"],
        "autoscaler": ["ray-full-worker-00000003-compute", "ray-full-worker-0000000f-compute"]})

    made = WorkerGroupProvider(retry=fast_retry(), deadlines=FAST_DEADLINES).create(props).outs

    assert made["instance_names"] == ["ray-full-worker-00000001-compute",
                                      "ray-full-worker-00000002-compute"]  # none made
    nodes = fake.instances(PROJECT, ZONE)
    assert len(nodes) == 4
    for name in made["instance_names"]:
        labels = nodes[name]["labels"]
        assert labels["ray-node-type"] == "unmanaged" and labels["ray-gcp-group"]
        assert labels["ray-gcp-stack"] == STACK
    kept = nodes["ray-full-worker-00000003-compute"]["labels"]
    assert kept["ray-node-type"] == "worker" and "ray-gcp-group" not in kept
    assert (kept["ray-gcp-stack"], kept["ray-launch-config"]) == (STACK, "rays-own-hash")
    other = nodes["ray-full-worker-0000000f-compute"]["labels"]
    assert "ray-gcp-stack" not in other and other["ray-launch-config"] == "rays-own-hash"
    assert made["autoscaler_instance_names"] == ["ray-full-worker-00000003-compute"]


def test_fewer_running_than_the_count_makes_the_rest(fake) -> None:
    rays_worker(fake, "ray-full-worker-00000001-compute")
    props = group_props(fake.endpoint, 2, adopt={
        "pinned": ["ray-full-worker-00000001-compute"], "autoscaler": []})

    made = WorkerGroupProvider(retry=fast_retry(), deadlines=FAST_DEADLINES).create(props).outs

    assert len(made["instance_names"]) == 2
    assert "ray-full-worker-00000001-compute" in made["instance_names"]
