"""Each dynamic resource shows as what it is in `pulumi preview` (its own type token in its URN),
and keeps an alias to the `pulumi-python:dynamic:Resource` they all shared before, so a stack
created then sees the same resources, not replacements; `invoke diff` agrees."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
from pulumi.runtime import settings

from infra.dynamic_types import STACK_SECRET_TYPE
from ops.review.plan import plan_stack
from ops.review.plan_diff import diff_plans, unchanged_count
from tests.fakes.compute.helpers import compute_body, install_registering_mocks, tpu_body

LEGACY = "pulumi-python:dynamic:Resource"
OWN_TYPES = {
    "group": "pulumi-python:dynamic/ray-gcp:WorkerGroup",
    "sweeper": "pulumi-python:dynamic/ray-gcp:ClusterSweeper",
    "slice": "pulumi-python:dynamic/ray-gcp:QueuedTpuSlice",
    "pair": "pulumi-python:dynamic/ray-gcp:GeneratedKeyPair",
}


@pytest.fixture
def requests() -> list[Any]:
    """The RegisterResource requests pulumi's mock monitor receives (aliases included)."""
    install_registering_mocks()
    monitor = settings.SETTINGS.monitor
    seen: list[Any] = []
    register = monitor.RegisterResource

    def recording(request: Any) -> Any:
        seen.append(request)
        return register(request)

    monitor.RegisterResource = recording
    return seen


def _declare_all() -> list[pulumi.CustomResource]:
    from infra.ssh_keys import GeneratedKeyPair
    from infra.workers import ClusterSweeper, ClusterSweeperArgs, WorkerGroup, WorkerGroupArgs
    from infra.workers.queued_slice import QueuedTpuSlice, QueuedTpuSliceArgs

    return [
        WorkerGroup("group", WorkerGroupArgs(
            project="p", zone="us-west1-a", cluster_name="c", node_type="ray_worker_small",
            name_prefix="ray-c-worker", body=compute_body(), count=1)),
        ClusterSweeper("sweeper", ClusterSweeperArgs(project="p", zone="us-west1-a",
                                                     cluster_name="c"),
                       pulumi.ResourceOptions(aliases=[pulumi.Alias(name="old-sweeper")])),
        QueuedTpuSlice("slice", QueuedTpuSliceArgs(project="p", zone="us-central2-b",
                                                   name="ray-c-tpu", body=tpu_body(),
                                                   wait_minutes=30)),
        GeneratedKeyPair("pair", comment="ubuntu"),
    ]


@pulumi.runtime.test
def test_each_dynamic_resource_has_its_own_type_in_its_urn(requests):
    resources = _declare_all()

    def check(urns: list[str]) -> None:
        # urn:pulumi:STACK::PROJECT::PARENT-TYPE$...$TYPE::NAME
        types = {urn.rsplit("::", 1)[1]: urn.split("::")[2].rsplit("$", 1)[1] for urn in urns}
        assert types == OWN_TYPES

    return pulumi.Output.all(*(r.urn for r in resources)).apply(check)


@pulumi.runtime.test
def test_each_keeps_an_alias_to_the_shared_type_of_before_under_every_earlier_name(requests):
    resources = _declare_all()

    def check(_: list[str]) -> None:
        aliases = {request.name: {(alias.spec.type, alias.spec.name) for alias in request.aliases}
                   for request in requests if request.name in OWN_TYPES}
        assert aliases == {
            "group": {(LEGACY, "")},  # an empty name: the resource's own
            "sweeper": {(LEGACY, ""), ("", "old-sweeper"), (LEGACY, "old-sweeper")},
            "slice": {(LEGACY, "")},
            "pair": {(LEGACY, "")},
        }

    return pulumi.Output.all(*(r.urn for r in resources)).apply(check)


@pytest.mark.parametrize(("stack", "kinds"), [("full", {"group", "sweeper", "pair"}),
                                             ("tpu-queued", {"slice", "sweeper", "pair"})])
def test_invoke_diff_from_a_plan_made_before_the_own_types_shows_no_change(stack, kinds):
    """The base as the code of before planned it: every dynamic resource of the shared type
    and no type aliases. Pulumi matches them through the aliases; so must `invoke diff`."""
    head = plan_stack(stack)
    dynamic = {r["type"] for r in head["resources"]
               if r["type"].startswith("pulumi-python:dynamic/")}
    # Stack secrets (Ray's auth token) were born with their own type: none under the old one.
    assert dynamic == {OWN_TYPES[kind] for kind in kinds} | {STACK_SECRET_TYPE}
    base = json.loads(json.dumps(head))
    for resource in base["resources"]:
        if resource["type"] in OWN_TYPES.values():
            resource["type"] = LEGACY
        resource.pop("aliases", None)
    assert diff_plans(base, head) == []
    assert unchanged_count(base, head) == len(head["resources"])
