"""Google's faults on the resources the gcp provider makes, not only the worker groups: the head
instance, its operation and its reads, the firewall rules, the service accounts and their
project roles, the cluster's bucket. Through the real engine, the stand-in gcp plugin (which
retries as pulumi-gcp's Terraform transport does: tests/fakes/standin_gcp/api.py) and the
fake cloud, on one stack:

- 429, 500, 502, 503 on those calls, and a GET whose answer is lost, are retried: `up`
  converges in one run, each resource made once, no orphan, nothing pending;
- a 403 `rateLimitExceeded` whose words are not a per-minute quota is no fault the provider
  retries: `up` ends in one line naming it, and the next `up` converges, the head made once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.faults import RATE_LIMITED_403
from tests.support.engine_stack import cluster_nodes
from tests.support.killed_runs import (
    CLUSTER,
    PROJECT,
    ZONE,
    cluster_yaml,
    exported_stack,
    invoke,
    known_instances,
    ok,
    pending_operations,
    users_cloud,
)

pytestmark = [pytest.mark.engine, pytest.mark.slow]  # about three minutes

FAULTS = {
    "insert": [503, 429],  # the head's instances.insert (workers use bulkInsert)
    "operations.get": [500],  # the provider polling the head's operation
    "get": [502],
    "platform.firewalls.insert": [503],
    "platform.serviceAccounts.create": [429],
    "platform.projects.setIamPolicy": [503],
    "storage.buckets.insert": [503],
}


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[dict[str, str], FakeComputeServer, Path]]:
    folder = tmp_path_factory.mktemp("faults")
    with users_cloud(folder) as (env, fake):
        yield env, fake, cluster_yaml(folder, workers=1)


def calls(fake: FakeComputeServer, method: str) -> int:
    if method.startswith("storage."):
        return sum(1 for served, _ in fake.storage.requests if served == method)
    return fake.cloud.calls[method]


def made_once(env: dict[str, str], fake: FakeComputeServer) -> None:
    """One head and one worker, two firewall rules, one worker account, one bucket; the
    state knows them all and holds nothing pending; no orphan."""
    nodes = cluster_nodes(fake, PROJECT, ZONE, CLUSTER)
    kinds = sorted(node["labels"].get("ray-node-type", "") for node in nodes.values())
    assert kinds == ["head", "unmanaged"], sorted(nodes)
    rules = [name for name in fake.platform.firewalls.get(PROJECT, {})
             if name.startswith(f"ray-{CLUSTER}-")]
    assert len(rules) == 2, rules
    accounts = [email for email in fake.platform.accounts.get(PROJECT, {})
                if email.startswith(f"ray-{CLUSTER}-")]
    assert len(accounts) == 1, accounts
    assert [name for name in fake.storage.buckets if name.startswith(f"ray-{CLUSTER}-")]
    deployment = exported_stack(env, CLUSTER)
    assert pending_operations(deployment) == []
    assert set(nodes) <= known_instances(deployment)
    assert "no orphan" in ok(invoke(env, "orphans", "-s", CLUSTER))


def test_retryable_faults_on_the_providers_calls_are_retried_and_up_converges(user) -> None:
    env, fake, config = user
    before = {method: calls(fake, method) for method in FAULTS}
    fake.faults.method_errors = {method: list(statuses) for method, statuses in FAULTS.items()}
    fake.faults.dropped_answers = ["get"]
    ok(invoke(env, "up", "-c", str(config), "-y"))
    assert fake.faults.method_errors == {method: [] for method in FAULTS}, "a fault not met"
    for method, statuses in FAULTS.items():  # each faulted call came again
        assert calls(fake, method) - before[method] > len(statuses), method
    made_once(env, fake)
    ok(invoke(env, "down", "-c", str(config), "-y"))
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}


def test_a_rate_limit_403_the_provider_does_not_retry_ends_in_one_line_then_up_converges(
        user) -> None:
    env, fake, config = user
    fake.faults.method_errors = {"insert": [RATE_LIMITED_403]}
    failed = invoke(env, "up", "-c", str(config), "-y")
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert failed.returncode != 0 and len(errors) == 1, failed.stderr[-3000:]
    assert "403" in errors[0] and "Rate Limit Exceeded" in errors[0], errors[0]
    assert "unexpected" not in errors[0] and "a bug" not in errors[0]

    ok(invoke(env, "up", "-c", str(config), "-y"))
    made_once(env, fake)
    ok(invoke(env, "down", "-c", str(config), "-y"))
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}


def test_a_lost_answer_to_the_heads_insert_fails_in_one_line_then_up_adopts_the_head(
        user) -> None:
    """The connection is cut after GCE made the head: pulumi-gcp does not resend the POST, the
    run fails in one line and the state has no head; the next `up` names the head as an
    orphan, takes it in (it has the name the program gives the head) and converges, with no
    `409 already exists` and no second head."""
    env, fake, config = user
    fake.faults.dropped_answers = ["insert"]
    failed = invoke(env, "up", "-c", str(config), "-y")
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert failed.returncode != 0 and len(errors) == 1, failed.stderr[-3000:]
    assert "EOF" in errors[0], errors[0]
    heads = [name for name, node in cluster_nodes(fake, PROJECT, ZONE, CLUSTER).items()
             if node["labels"].get("ray-node-type") == "head"]
    assert len(heads) == 1 and heads[0] not in known_instances(exported_stack(env, CLUSTER))

    said = ok(invoke(env, "up", "-c", str(config), "-y"))
    assert f"orphan: instance {heads[0]} in {ZONE}" in said, said[-3000:]
    assert f"adopted instance {heads[0]}" in said, said[-3000:]
    made_once(env, fake)
    ok(invoke(env, "down", "-c", str(config), "-y"))
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}
