"""`provider.capacity.<type>: {fallback: on-demand, return_to_spot: bool}`: validated with the
YAML path and the fix, accepted by Ray's own schema (the YAML stays `ray up`-able), kept out of
the head's autoscaler config, and handed to the type's worker group."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from ray.autoscaler._private.util import validate_config

from model.config import ConfigError, parse_cluster_config
from ops.review.plan_engine import run_program
from tests.support.program_runs import stack_yaml

WORKER = "ray_worker_small"  # preemptible in stacks/clusters/full.yaml


def full_with(capacity: Any, **worker: Any) -> dict[str, Any]:
    raw = copy.deepcopy(stack_yaml("full"))
    raw["provider"]["capacity"] = capacity
    raw["available_node_types"][WORKER].update(worker)
    return raw


def problems(raw: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(raw)
    return dict(caught.value.problems)


@pytest.mark.parametrize("return_to_spot", [None, True])
def test_a_spot_worker_type_takes_the_policy(return_to_spot):
    policy = {"fallback": "on-demand"}
    if return_to_spot is not None:
        policy["return_to_spot"] = return_to_spot
    config = parse_cluster_config(full_with({WORKER: policy}))
    assert config.provider.capacity_input(WORKER) == {
        "fallback": "on-demand", "return_to_spot": bool(return_to_spot)}
    assert config.provider.capacity_input("ray_head_default") is None


def test_the_yaml_with_the_policy_passes_rays_schema_and_the_head_config_leaves_it_out():
    raw = full_with({WORKER: {"fallback": "on-demand"}})
    validate_config(copy.deepcopy(raw))  # raises on a key Ray's schema refuses
    assert "capacity" not in parse_cluster_config(raw).ray_dict()["provider"]


def test_an_on_demand_type_is_refused_with_how_to_make_it_spot():
    raw = full_with({WORKER: {"fallback": "on-demand"}})
    raw["available_node_types"][WORKER]["node_config"].pop("scheduling")
    assert problems(raw) == {f"provider.capacity.{WORKER}": (
        f"{WORKER}'s node_config is on-demand already: set available_node_types.{WORKER}."
        "node_config.scheduling.provisioningModel: SPOT, or remove it from provider.capacity")}


def test_an_unknown_type_names_the_known_ones():
    assert problems(full_with({"gpu": {"fallback": "on-demand"}})) == {
        "provider.capacity.gpu": "'gpu' is not a key of available_node_types: use one of "
                                 "ray_head_default, ray_worker_small"}


@pytest.mark.parametrize("capacity, path, fix", [
    ({WORKER: {"fallback": "spot"}}, f"provider.capacity.{WORKER}.fallback",
     "write `fallback: on-demand`"),
    ({WORKER: {}}, f"provider.capacity.{WORKER}", "or a `ladder:` of rungs"),
    ({WORKER: {"fallback": "on-demand", "back": True}}, f"provider.capacity.{WORKER}.back",
     "remove it"),
    ({WORKER: "on-demand"}, "provider.capacity", "{gpu_worker: {fallback: on-demand}}"),
    (["on-demand"], "provider.capacity", "{gpu_worker: {fallback: on-demand}}"),
])
def test_malformed_policies_name_their_path_and_the_fix(capacity, path, fix):
    found = problems(full_with(capacity))
    assert list(found) == [path]
    assert fix in found[path]


def test_the_worker_group_gets_the_policy_and_other_groups_none():
    raw = full_with({WORKER: {"fallback": "on-demand", "return_to_spot": True}})
    run = run_program({"ray-gcp:clusterConfig": json.dumps(raw)}, stack="full")
    (group,) = run.of_type("pulumi-python:dynamic/ray-gcp:WorkerGroup")
    assert group.inputs["capacity"] == {"fallback": "on-demand", "return_to_spot": True}
    (head,) = [n for n in run.outputs["nodes"] if n["kind"] == "head"]
    assert head["market"] == "on-demand"  # the head never falls back: its node_config's

    plain = run_program({"ray-gcp:clusterConfig": json.dumps(stack_yaml("full"))}, stack="full")
    (group,) = plain.of_type("pulumi-python:dynamic/ray-gcp:WorkerGroup")
    assert group.inputs.get("capacity") is None
