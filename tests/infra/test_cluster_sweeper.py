"""ClusterSweeper: destroying it deletes every node of the cluster that Pulumi's state misses."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pulumi
import pytest
from pulumi.dynamic.dynamic import serialize_provider

from infra.workers import ClusterSweeperProvider, ClusterSweepError, WorkerGroupError
from infra.workers.apis import queued_slices
from infra.workers.queued_api import request_body
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import (
    CLUSTER,
    FAST_DEADLINES,
    PROJECT,
    ZONE,
    RegisteringMocks,
    fast_provider,
    fast_retry,
    fast_sweeper,
    group_props,
    install_registering_mocks,
    sweeper_props,
    tpu_body,
)

SECRET = "very-secret-token-value"
OTHER = "other-cluster"


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        yield server


def ray_labels(cluster: str, node_type: str = "worker") -> dict[str, str]:
    return {"ray-cluster-name": cluster, "ray-node-type": node_type,
            "ray-user-node-type": "ray_worker_small"}


def cluster_instances(fake: FakeComputeServer, cluster: str = CLUSTER) -> set[str]:
    return set(fake.instances(PROJECT, ZONE, **{"ray-cluster-name": cluster}))


def cluster_tpu_nodes(fake: FakeComputeServer, cluster: str = CLUSTER) -> set[str]:
    return {name for name, node in fake.tpu_nodes(PROJECT, ZONE).items()
            if node.get("labels", {}).get("ray-cluster-name") == cluster}


def add_tpu_node(fake: FakeComputeServer, name: str, cluster: str) -> None:
    body = tpu_body()
    body["labels"] = {**body["labels"], "ray-cluster-name": cluster}
    fake.cloud.create_node(PROJECT, ZONE, name, body)


@pytest.fixture
def leftovers(fake: FakeComputeServer) -> set[str]:
    """What a destroy of a half-failed up leaves: a group's partial create (which raised, so
    Pulumi recorded nothing), the autoscaler's own workers, a head, a TPU node; plus another
    cluster's nodes in the same zone. Returns the names of this cluster's nodes."""
    fake.faults.instance_quota = 2
    with pytest.raises(WorkerGroupError):
        fast_provider().create(group_props(fake.endpoint, 4))
    fake.faults.instance_quota = None
    fake.cloud.add_foreign_instance(PROJECT, ZONE, f"ray-{CLUSTER}-worker-aa-compute",
                                    ray_labels(CLUSTER))
    fake.cloud.add_foreign_instance(PROJECT, ZONE, f"ray-{CLUSTER}-worker-bb-compute",
                                    ray_labels(CLUSTER))
    fake.cloud.add_foreign_instance(PROJECT, ZONE, f"ray-{CLUSTER}-head-cc-compute",
                                    ray_labels(CLUSTER, "head"))
    add_tpu_node(fake, f"ray-{CLUSTER}-worker-dd-tpu", CLUSTER)
    fake.cloud.add_foreign_instance(PROJECT, ZONE, "ray-other-worker-ee-compute",
                                    ray_labels(OTHER))
    fake.cloud.add_foreign_instance(PROJECT, ZONE, "unlabelled-vm", {})
    add_tpu_node(fake, "ray-other-worker-ff-tpu", OTHER)
    ours = cluster_instances(fake) | cluster_tpu_nodes(fake)
    assert len(ours) == 2 + 3 + 1
    return ours


def test_delete_leaves_no_node_of_the_cluster_after_a_half_failed_up(fake, leftovers):
    deleted = fast_sweeper().sweep(sweeper_props(fake.endpoint))

    assert set(deleted) == leftovers
    assert cluster_instances(fake) == set()
    assert cluster_tpu_nodes(fake) == set()
    assert set(fake.instances(PROJECT, ZONE)) == {"ray-other-worker-ee-compute", "unlabelled-vm"}
    assert set(fake.tpu_nodes(PROJECT, ZONE)) == {"ray-other-worker-ff-tpu"}


def test_provider_delete_is_the_sweep(fake, leftovers):
    fast_sweeper().delete("id", sweeper_props(fake.endpoint))

    assert cluster_instances(fake) | cluster_tpu_nodes(fake) == set()


@pytest.mark.parametrize(
    "methods",
    [{"aggregatedList", "tpu.list"}, {"delete", "tpu.delete"}, {"wait", "tpu.operations.get"}],
    ids=["list", "delete", "operation-wait"],
)
def test_rate_limits_and_unavailability_during_the_sweep_are_retried(fake, leftovers, methods):
    fake.faults.fail_next(429, 503, 429, 503, 429, methods=methods)

    # One pass: the retries alone, not a second sweep, must ride the faults out.
    fast_sweeper(passes=1).sweep(sweeper_props(fake.endpoint))

    assert fake.faults.error_statuses == [], "every injected fault was met and ridden out"
    assert cluster_instances(fake) | cluster_tpu_nodes(fake) == set()


def test_a_node_that_cannot_be_deleted_is_named_and_the_rest_still_go(fake):
    stuck = f"ray-{CLUSTER}-worker-aa-compute"
    fake.cloud.add_foreign_instance(PROJECT, ZONE, stuck, ray_labels(CLUSTER))
    add_tpu_node(fake, f"ray-{CLUSTER}-worker-bb-tpu", CLUSTER)
    fake.faults.fail_next(*[403] * 10, methods={"delete"})

    with pytest.raises(ClusterSweepError) as failure:
        fast_sweeper().sweep(sweeper_props(fake.endpoint))

    assert failure.value.remaining == [f"{stuck} (instance)"]
    assert stuck in str(failure.value) and CLUSTER in str(failure.value)
    assert cluster_instances(fake) == {stuck}
    assert cluster_tpu_nodes(fake) == set()


def test_a_listing_that_keeps_failing_is_reported_not_taken_for_an_empty_zone(fake):
    fake.cloud.add_foreign_instance(PROJECT, ZONE, f"ray-{CLUSTER}-worker-aa-compute",
                                    ray_labels(CLUSTER))
    fake.faults.fail_next(*[503] * 50, methods={"aggregatedList"})

    with pytest.raises(ClusterSweepError, match="instances: .*Service Unavailable"):
        fast_sweeper(max_attempts=3).sweep(sweeper_props(fake.endpoint))


def test_without_tpu_types_the_tpu_api_is_not_called(fake):
    fake.cloud.add_foreign_instance(PROJECT, ZONE, f"ray-{CLUSTER}-worker-aa-compute",
                                    ray_labels(CLUSTER))

    fast_sweeper().sweep(sweeper_props(fake.endpoint, has_tpu=False))

    assert cluster_instances(fake) == set()
    assert fake.cloud.calls["tpu.list"] == 0


def test_update_records_inputs_without_calling_the_api(fake, leftovers):
    provider = fast_sweeper()
    calls_before = sum(fake.cloud.calls.values())

    olds = sweeper_props(fake.endpoint)
    updated = provider.update("id", olds,
                              sweeper_props(fake.endpoint, has_tpu=False, credentials=SECRET))

    assert sum(fake.cloud.calls.values()) == calls_before
    assert updated.outs["cluster_name"] == CLUSTER
    assert updated.outs["has_tpu"] is False
    assert cluster_instances(fake) | cluster_tpu_nodes(fake) == leftovers


def test_credentials_or_tpu_change_updates_in_place_and_a_new_cluster_replaces():
    provider = ClusterSweeperProvider()
    olds = sweeper_props("127.0.0.1:1")

    in_place = provider.diff("id", olds, {**olds, "credentials": SECRET, "has_tpu": False})
    renamed = provider.diff("id", olds, {**olds, "cluster_name": OTHER})

    assert in_place.changes and not in_place.replaces
    assert renamed.replaces == ["cluster_name"]
    assert not provider.diff("id", olds, dict(olds)).changes


def test_serialized_sweeper_provider_holds_no_credentials():
    serialized = serialize_provider(ClusterSweeperProvider())

    assert SECRET not in serialized
    assert len(serialized) < 20_000


@pytest.fixture
def mocks() -> RegisteringMocks:
    return install_registering_mocks()


@pulumi.runtime.test
def test_sweeper_credentials_are_secret_and_not_in_the_pickled_provider(mocks):
    from infra.workers import ClusterSweeper, ClusterSweeperArgs

    sweeper = ClusterSweeper("sweeper", ClusterSweeperArgs(
        project=PROJECT, zone=ZONE, cluster_name=CLUSTER, has_tpu=True,
        credentials=pulumi.Output.from_input(SECRET)))

    def check(secret: bool) -> None:
        assert secret, "credentials must stay a secret output"
        (args,) = [a for a in mocks.registered if a.name == "sweeper"]
        assert args.typ == "pulumi-python:dynamic/ray-gcp:ClusterSweeper"
        assert args.inputs["cluster_name"] == CLUSTER
        assert SECRET not in json.dumps(args.inputs.get("__provider", ""))

    return pulumi.Output.from_input(sweeper.credentials.is_secret()).apply(check)


def test_down_withdraws_the_clusters_queued_tpu_requests_waiting_or_active(fake):
    api = queued_slices(sweeper_props(fake.endpoint), fast_retry(), FAST_DEADLINES)

    def queue(name: str, cluster: str) -> None:
        body = tpu_body()
        body["labels"] = {**body["labels"], "ray-cluster-name": cluster}
        api.create(name, request_body(api.parent, name, body, None))

    active, waiting = f"ray-{CLUSTER}-worker-aa-tpu", f"ray-{CLUSTER}-worker-bb-tpu"
    queue(active, CLUSTER)
    assert getattr(api.wait_active(active, 5), "state", None) == "ACTIVE"
    fake.faults.queued_wait_polls = None  # the rest wait for capacity that never comes
    queue(waiting, CLUSTER)
    queue("ray-other-worker-cc-tpu", OTHER)

    deleted = fast_sweeper().sweep(sweeper_props(fake.endpoint))

    assert {active, waiting} <= set(deleted)
    assert set(fake.queued.location(PROJECT, ZONE)) == {"ray-other-worker-cc-tpu"}
    assert cluster_tpu_nodes(fake) == set(), "the active request's node went with it"
