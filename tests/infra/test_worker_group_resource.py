"""The WorkerGroup resource as the program declares it: credentials never stored in clear."""

from __future__ import annotations

import json

import pulumi
import pytest
from pulumi.dynamic.dynamic import serialize_provider

from infra.workers import WorkerGroupProvider
from infra.workers.clients import build_credentials
from infra.workers.retry import RetryPolicy, call_with_retry
from tests.fakes.compute.helpers import RegisteringMocks, install_registering_mocks

SECRET = "very-secret-token-value"


@pytest.fixture
def mocks() -> RegisteringMocks:
    return install_registering_mocks()


@pulumi.runtime.test
def test_credentials_are_a_secret_input_and_not_in_the_serialized_provider(mocks):
    from infra.workers import WorkerGroup, WorkerGroupArgs
    from tests.fakes.compute.helpers import compute_body

    group = WorkerGroup("ray-worker-small", WorkerGroupArgs(
        project="p", zone="us-west1-a", cluster_name="full", node_type="ray_worker_small",
        name_prefix="ray-full-worker", body=compute_body(), count=2,
        credentials=pulumi.Output.from_input(SECRET)))

    def check(secret: bool) -> None:
        assert secret, "credentials must stay a secret output"
        (args,) = [a for a in mocks.registered if a.name == "ray-worker-small"]
        assert args.typ == "pulumi-python:dynamic/ray-gcp:WorkerGroup"
        assert SECRET not in json.dumps(args.inputs.get("__provider", ""))

    return pulumi.Output.from_input(group.credentials.is_secret()).apply(check)


def test_serialized_provider_holds_no_credentials():
    serialized = serialize_provider(WorkerGroupProvider(RetryPolicy(initial_s=0.01)))

    assert SECRET not in serialized
    assert len(serialized) < 20_000


def test_oauth_token_and_emulator_credentials(monkeypatch):
    assert build_credentials(SECRET, None).token == SECRET
    assert build_credentials(None, None) is None
    # At an emulator: the ADC key file when one is named (the tests' session has one), else
    # anonymous.
    assert build_credentials(None, "127.0.0.1:1").__class__.__name__ != "AnonymousCredentials"
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS")
    assert build_credentials(None, "127.0.0.1:1").__class__.__name__ == "AnonymousCredentials"


def test_retry_policy_backoff_is_capped_and_jittered():
    policy = RetryPolicy(initial_s=1, cap_s=4)
    delays = [policy.delay(attempt) for attempt in range(10) for _ in range(20)]

    assert max(delays) <= 4
    assert len({round(d, 6) for d in delays}) > 100


def test_non_transient_errors_are_not_retried():
    from google.api_core import exceptions as api_exceptions

    calls = []

    def forbidden():
        calls.append(1)
        raise api_exceptions.Forbidden("quota")

    with pytest.raises(api_exceptions.Forbidden):
        call_with_retry(forbidden, RetryPolicy(initial_s=0.001))
    assert len(calls) == 1
