"""`provider.capacity.<type>.ladder`: the ordered rungs (reservation, any reservation, spot,
flex-start, on-demand) validated with the YAML path and the fix, accepted by Ray's own schema
(the YAML stays `ray up`-able), kept out of the config Ray reads, and handed to the worker
group as the rungs the provider walks. The model's market words are the head's."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from ray.autoscaler._private.util import validate_config

from bootstrap.head_provider import ladder
from model.config import ConfigError, parse_cluster_config
from model.config import capacity as config_capacity
from ops.review.plan_engine import run_program
from tests.support.program_runs import stack_yaml

WORKER = "ray_worker_small"
LADDER = {"provision_timeout_minutes": 20, "ladder": [
    {"market": "reservation",
     "reservations": ["a100-res", "projects/shared-proj/reservations/a100-pool"]},
    {"market": "any-reservation"},
    {"market": "spot", "zones": ["us-west1-b", "us-west1-c"]},
    {"market": "flex-start", "max_run_duration_hours": 24},
    {"market": "on-demand", "machine_type": "n1-standard-4"},
]}


def full_with(policy: Any, on_demand_body: bool = False) -> dict[str, Any]:
    raw = copy.deepcopy(stack_yaml("full"))
    raw["provider"]["capacity"] = {WORKER: policy}
    if on_demand_body:
        raw["available_node_types"][WORKER]["node_config"].pop("scheduling")
    return raw


def problems(raw: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(raw)
    return dict(caught.value.problems)


def test_the_ladder_reaches_the_group_as_rungs_in_order_and_rays_schema_takes_the_yaml():
    raw = full_with(LADDER, on_demand_body=True)  # a ladder needs no spot body
    validate_config(copy.deepcopy(raw))
    config = parse_cluster_config(raw)
    assert "capacity" not in config.ray_dict()["provider"]
    assert config.provider.capacity_input(WORKER) == {"provision_timeout_s": 1200, "ladder": [
        {"market": "reservation",
         "reservations": ["a100-res", "projects/shared-proj/reservations/a100-pool"]},
        {"market": "any-reservation"},
        {"market": "spot", "zones": ["us-west1-b", "us-west1-c"]},
        {"market": "flex-start", "max_run_duration_s": 86400},
        {"market": "on-demand", "machine_type": "n1-standard-4"},
    ]}
    run = run_program({"ray-gcp:clusterConfig": json.dumps(raw)}, stack="full")
    (group,) = run.of_type("pulumi-python:dynamic/ray-gcp:WorkerGroup")
    assert [rung["market"] for rung in group.inputs["capacity"]["ladder"]] == list(
        ladder.MARKETS)


def test_the_model_and_the_head_speak_the_same_market_words():
    assert config_capacity.MARKETS == ladder.MARKETS
    assert config_capacity.FLEX_MAX_RUN_S == ladder.FLEX_MAX_RUN_S


@pytest.mark.parametrize("rung, path, fix", [
    ({"market": "cheap"}, "ladder[0].market", "write one of reservation, any-reservation"),
    ({"market": "reservation"}, "ladder[0]", "add `reservations: [NAME, ...]`"),
    ({"market": "spot", "reservations": ["r"]}, "ladder[0]", "only a reservation rung"),
    ({"market": "reservation", "reservations": ["projects/p/zones/z/reservations/r"]},
     "ladder[0].reservations", "projects/OTHER_PROJECT/reservations/NAME"),
    ({"market": "on-demand", "max_run_duration_hours": 2}, "ladder[0]",
     "only a flex-start rung"),
    ({"market": "flex-start", "max_run_duration_hours": 200}, "ladder[0].max_run_duration_hours",
     ""),
    ({"market": "spot", "zones": ["europe-west4-a"]}, "ladder[0].zones",
     "not in region 'us-west1'"),
])
def test_a_bad_rung_names_its_path_and_the_fix(rung, path, fix):
    found = problems(full_with({"ladder": [rung]}))
    assert list(found) == [f"provider.capacity.{WORKER}.{path}"]
    assert fix in found[f"provider.capacity.{WORKER}.{path}"]


def test_the_short_form_and_a_ladder_together_are_refused():
    found = problems(full_with({"fallback": "on-demand", "ladder": [{"market": "spot"}]}))
    assert "not both" in found[f"provider.capacity.{WORKER}"]


def test_the_short_form_is_still_the_spot_then_on_demand_ladder():
    body = {"machineType": "zones/z/machineTypes/n1-standard-2",
            "scheduling": {"provisioningModel": "SPOT"}}
    rungs = ladder.ladder_of({"fallback": "on-demand", "return_to_spot": False}, body)
    assert [r["market"] for r in rungs] == ["spot", "on-demand"]
    assert [r["market"] for r in ladder.ladder_of(None, body)] == ["spot"]
