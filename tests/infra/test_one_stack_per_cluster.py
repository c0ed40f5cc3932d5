"""One stack owns one cluster: two stacks whose YAMLs share a cluster_name in one project.

The sweeper's and worker group's inputs are what the real program declares for each stack
(run offline); their providers then act on one fake project, as `pulumi up`/`destroy` would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from infra.workers import ClusterSweeperProvider
from infra.workers.sweeper import ClusterClaimError
from ops.review.plan_engine import ProgramRun, run_program
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import FAST_DEADLINES, fast_provider, fast_retry
from tests.support.program_runs import head_config_text, stack_yaml

PROJECT, ZONE = "my-gcp-project", "us-west1-a"
GROUP = "full-ray_worker_small"


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        yield server


def program_for(stack: str) -> ProgramRun:
    """The `full` stack's YAML as stack `stack` would deploy it."""
    cluster = stack_yaml("full")
    return run_program({"ray-gcp:clusterConfig": json.dumps(cluster)}, stack=stack)


def sweeper(run: ProgramRun, endpoint: str) -> dict[str, Any]:
    (resource,) = [r for r in run.resources if r.name.endswith(".sweeper")]
    return {**resource.inputs, "credentials": None, "api_endpoint": endpoint}


def group(run: ProgramRun, endpoint: str, count: int) -> dict[str, Any]:
    return {**run.named(GROUP).inputs, "credentials": None, "api_endpoint": endpoint,
            "count": count}


def provider() -> ClusterSweeperProvider:
    return ClusterSweeperProvider(retry=fast_retry(), deadlines=FAST_DEADLINES)


def head_labels(run: ProgramRun) -> dict[str, str]:
    (head,) = run.of_type("gcp:compute/instance:Instance")
    return dict(head.inputs["labels"])


def autoscaler_labels(run: ProgramRun) -> dict[str, str]:
    """What Ray's GCP node provider puts on a worker it launches from the head's config: the
    node_config's labels, then Ray's tags."""
    (head,) = run.of_type("gcp:compute/instance:Instance")
    bootstrap = yaml.safe_load(head_config_text(run, head))
    node_config = bootstrap["available_node_types"]["ray_worker_small"]["node_config"]
    return {**node_config["labels"], "ray-cluster-name": "full", "ray-node-type": "worker",
            "ray-user-node-type": "ray_worker_small"}


def deploy(fake: FakeComputeServer, run: ProgramRun, stack: str) -> set[str]:
    """What `pulumi up` of `run` leaves: its claim, a head, a worker group of one, and one
    worker the head's autoscaler launched. Returns the cluster's node names."""
    provider().create(sweeper(run, fake.endpoint))
    fake.cloud.add_foreign_instance(PROJECT, ZONE, f"ray-full-head-{stack}", head_labels(run))
    fast_provider().create(group(run, fake.endpoint, 1))
    fake.cloud.add_foreign_instance(PROJECT, ZONE, f"ray-full-worker-{stack}-autoscaler",
                                    autoscaler_labels(run))
    return set(fake.instances(PROJECT, ZONE))


def test_a_second_stack_for_the_same_cluster_is_refused_naming_both_and_destroys_nothing(fake):
    alpha, beta = program_for("alpha"), program_for("beta")
    alpha_nodes = deploy(fake, alpha, "alpha")
    assert len(alpha_nodes) == 3

    with pytest.raises(ClusterClaimError) as refused:
        provider().create(sweeper(beta, fake.endpoint))
    message = str(refused.value)
    assert "\n" not in message
    assert sweeper(alpha, fake.endpoint)["stack"] in message
    assert sweeper(beta, fake.endpoint)["stack"] in message
    assert "cluster_name" in message

    # Had beta's sweeper reached its state (an up racing alpha's first), its destroy
    # would still leave alpha's cluster alone.
    assert provider().sweep(sweeper(beta, fake.endpoint)) == []
    assert set(fake.instances(PROJECT, ZONE)) == alpha_nodes


def test_destroy_sweeps_the_stacks_own_nodes_the_autoscalers_included(fake):
    alpha = program_for("alpha")
    alpha_nodes = deploy(fake, alpha, "alpha")
    fake.cloud.add_foreign_instance(PROJECT, ZONE, "ray-full-worker-beta-autoscaler",
                                    autoscaler_labels(program_for("beta")))

    deleted = provider().sweep(sweeper(alpha, fake.endpoint))

    assert set(deleted) == alpha_nodes
    assert set(fake.instances(PROJECT, ZONE)) == {"ray-full-worker-beta-autoscaler"}


def test_a_stack_reclaims_its_own_cluster_after_a_failed_up(fake):
    alpha = program_for("alpha")
    deploy(fake, alpha, "alpha")

    assert provider().create(sweeper(alpha, fake.endpoint)).id


def test_nodes_of_a_stack_deployed_before_the_label_refuse_a_new_stack(fake):
    legacy = {key: value for key, value in head_labels(program_for("old")).items()
              if key != "ray-gcp-stack"}
    fake.cloud.add_foreign_instance(PROJECT, ZONE, "ray-full-head-old", legacy)

    with pytest.raises(ClusterClaimError, match="a stack deployed before nodes carried"):
        provider().create(sweeper(program_for("alpha"), fake.endpoint))


def alphas_unlabelled_and_head_and_betas(fake: FakeComputeServer, run: ProgramRun,
                                         unlabelled: str, head: str) -> None:
    """In the fake: a worker of `run`'s cluster with no stack's label (`unlabelled`), its
    head, and stack beta's autoscaler worker `ray-full-worker-beta-autoscaler`."""
    labels = {key: value for key, value in autoscaler_labels(run).items()
              if key != "ray-gcp-stack"}
    fake.cloud.add_foreign_instance(PROJECT, ZONE, unlabelled, labels)
    fake.cloud.add_foreign_instance(PROJECT, ZONE, head, head_labels(run))
    fake.cloud.add_foreign_instance(PROJECT, ZONE, "ray-full-worker-beta-autoscaler",
                                    autoscaler_labels(program_for("beta")))


def test_a_sweeper_recorded_before_the_label_sweeps_its_unlabelled_nodes_once_updated(fake):
    run = program_for("alpha")
    news = sweeper(run, fake.endpoint)
    olds = {key: value for key, value in news.items() if key != "stack"}
    alphas_unlabelled_and_head_and_betas(fake, run, "ray-full-worker-old-autoscaler",
                                         "ray-full-head-alpha")

    diff = provider().diff("id", olds, news)
    updated = provider().update("id", olds, news)

    assert diff.changes and not diff.replaces, "adding the label never replaces (sweeps)"
    assert set(provider().sweep(updated.outs)) == {
        "ray-full-worker-old-autoscaler", "ray-full-head-alpha"}
    assert set(fake.instances(PROJECT, ZONE)) == {"ray-full-worker-beta-autoscaler"}


@pytest.mark.parametrize("adopted", [True, False])
def test_an_adopted_stack_sweeps_the_unlabelled_workers_ray_ups_autoscaler_launched(
        fake, adopted: bool) -> None:
    """The head of a stack that adopted a `ray up` cluster goes on running `ray up`'s
    autoscaler, whose new workers carry no stack's label: that stack's sweep takes them; any
    other stack's leaves unlabelled nodes alone, and no sweep takes another stack's."""
    run = program_for("alpha")
    props = {**sweeper(run, fake.endpoint), "adopted": ["ray-full-head-adopted"] if adopted
             else []}
    alphas_unlabelled_and_head_and_betas(fake, run, "ray-full-worker-launched",
                                         "ray-full-head-adopted")

    swept = set(provider().sweep(props))

    assert swept == ({"ray-full-worker-launched", "ray-full-head-adopted"} if adopted
                     else {"ray-full-head-adopted"})
    assert "ray-full-worker-beta-autoscaler" in fake.instances(PROJECT, ZONE)


@pytest.mark.parametrize("stack", ["full", "tpu"])
def test_the_stack_label_renames_no_node(stack):
    """Node names derive from the config, not from the stack: the label reaches the nodes of
    a stack deployed before it by an in-place label update, never a replacement."""
    cluster = json.dumps(stack_yaml(stack))
    runs = [run_program({"ray-gcp:clusterConfig": cluster}, stack=name)
            for name in ("alpha", "beta")]

    def names(run: ProgramRun) -> list[Any]:
        # Bucket objects are named by their content's hash: the head's config holds the
        # worker bodies, labels included, so it is another object (a node is never renamed).
        return sorted([r.inputs.get("name") or r.inputs.get("name_prefix") or ""
                       for r in run.resources
                       if r.custom and r.type != "gcp:storage/bucketObject:BucketObject"])

    alpha, beta = (names(run) for run in runs)
    assert alpha == beta
    stacks = {json.dumps(run.outputs.get("nodes")) for run in runs}
    assert len(stacks) == 1
