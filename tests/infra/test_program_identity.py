"""Who the program acts as and what its resources are called: token credentials reach every
component that calls Google APIs, and no node type name can collide with another resource."""

from __future__ import annotations

import json
from collections import Counter

from google.oauth2.credentials import Credentials as TokenCredentials

from infra.workers.clients import build_credentials
from ops.review.plan_diff import diff_plans, unchanged_count
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import fast_provider, fast_sweeper, group_props, sweeper_props
from tests.fakes.compute.identity import USER, USER_SCOPES
from tests.support.program_runs import run_inline, stack_yaml

TOKEN = "ya29.a-token-that-must-stay-secret"
GROUP = "pulumi-python:dynamic/ray-gcp:WorkerGroup"
SWEEPER = "pulumi-python:dynamic/ray-gcp:ClusterSweeper"
LEGACY = "pulumi-python:dynamic:Resource"  # the type every dynamic resource shared before


def with_token(cluster: dict) -> dict:
    cluster["provider"]["gcp_credentials"] = {"type": "credentials_token", "credentials": TOKEN}
    return cluster


def test_token_credentials_reach_the_worker_groups_and_the_sweeper_as_secrets():
    run = run_inline(with_token(stack_yaml("full")))
    (provider,) = run.of_type("pulumi:providers:gcp")
    assert provider.inputs["accessToken"] == "[secret]"
    dynamic = {r.name: r.inputs for r in run.of_type(GROUP) + run.of_type(SWEEPER)}
    assert dynamic["full-ray_worker_small"]["credentials"] == "[secret]"
    assert dynamic["full.sweeper"]["credentials"] == "[secret]"
    recorded = json.dumps([r.inputs for r in run.resources]) + json.dumps(run.outputs)
    assert TOKEN not in recorded


def test_a_token_builds_oauth_token_credentials_not_adc():
    credentials = build_credentials(TOKEN, api_endpoint=None)
    assert isinstance(credentials, TokenCredentials) and credentials.token == TOKEN


def test_worker_group_and_sweeper_call_the_api_with_the_token():
    with FakeComputeServer() as fake:
        fake.identities.mint(USER, USER_SCOPES, token=TOKEN)  # the user's, in the YAML
        fast_provider().create(group_props(fake.endpoint, 1, credentials=TOKEN))
        created = len(fake.authorizations)
        fast_sweeper().delete("id", sweeper_props(fake.endpoint, has_tpu=False,
                                                  credentials=TOKEN))
    assert created and len(fake.authorizations) > created
    assert set(fake.authorizations) == {f"Bearer {TOKEN}"}


def test_node_types_named_like_the_cluster_parts_get_resources_of_their_own():
    cluster = stack_yaml("full")
    cluster["max_workers"] = 10
    worker = cluster["available_node_types"]["ray_worker_small"]
    for name in ("sweeper", "head", "network", "ssh-key", "ssh-key-pair", "service-account"):
        cluster["available_node_types"][name] = worker
    run = run_inline(cluster)
    duplicated = [urn for urn, n in Counter(r.urn for r in run.resources).items() if n > 1]
    assert duplicated == []
    groups = {r.inputs["node_type"] for r in run.of_type(GROUP)}
    assert {"sweeper", "head", "network", "ssh-key", "service-account"} <= groups
    assert [r.name for r in run.of_type(SWEEPER)] == ["full.sweeper"]
    # `full-sweeper` is the worker group now: only the shared type of before is an alias.
    assert run.named("full.sweeper").aliases == [{"type": LEGACY, "name": "full.sweeper"}]


def _sweeper(name: str, type_: str, aliases: list[dict[str, str]], has_tpu: bool) -> dict:
    resource = {"type": type_, "kind": "ClusterSweeper", "name": name, "parent": "full",
                "custom": True, "inputs": {"cluster_name": "full", "has_tpu": has_tpu}}
    return {**resource, "aliases": aliases} if aliases else resource


def test_the_renamed_sweeper_is_the_same_resource_for_invoke_diff():
    """Planned before the rename (and before the dynamic resources had types of their own):
    `full-sweeper` of the shared type; now `full.sweeper` with aliases to both old names."""
    run = run_inline(stack_yaml("full"))
    aliases = run.named("full.sweeper").aliases
    assert aliases == [{"type": SWEEPER, "name": "full-sweeper"},
                       {"type": LEGACY, "name": "full-sweeper"},
                       {"type": LEGACY, "name": "full.sweeper"}]
    base = {"resources": [_sweeper("full-sweeper", LEGACY, [], has_tpu=False)]}
    same = {"resources": [_sweeper("full.sweeper", SWEEPER, aliases, has_tpu=False)]}
    assert diff_plans(base, same) == [] and unchanged_count(base, same) == 1
    changed = {"resources": [_sweeper("full.sweeper", SWEEPER, aliases, has_tpu=True)]}
    (row,) = diff_plans(base, changed)
    assert (row.action, row.old_name, row.new_name) == ("update", "full-sweeper", "full.sweeper")
