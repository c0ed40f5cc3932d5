"""`provider.spend_cap: {max_usd_per_hour, max_usd_total, action}`: validated with the YAML path
and the fix, accepted by Ray's own schema (the YAML stays `ray up`-able), and kept out of the
config the head's autoscaler reads."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ray.autoscaler._private.util import validate_config

from model.config import ConfigError, parse_cluster_config
from tests.support.program_runs import stack_yaml


def full_with(spend_cap: Any) -> dict[str, Any]:
    raw = copy.deepcopy(stack_yaml("full"))
    raw["provider"]["spend_cap"] = spend_cap
    return raw


def problems(raw: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(raw)
    return dict(caught.value.problems)


def test_either_cap_alone_is_taken_and_the_action_defaults_to_stopping_workers():
    hourly = parse_cluster_config(full_with({"max_usd_per_hour": 12.5})).provider.spend_cap
    total = parse_cluster_config(full_with({"max_usd_total": 300})).provider.spend_cap
    assert (hourly.max_usd_per_hour, hourly.max_usd_total, hourly.action) == (
        12.5, None, "stop_workers")
    assert (total.max_usd_per_hour, total.max_usd_total) == (None, 300)


def test_the_yaml_with_a_cap_passes_rays_schema_and_the_head_config_leaves_it_out():
    raw = full_with({"max_usd_per_hour": 10, "max_usd_total": 100, "action": "down"})
    validate_config(copy.deepcopy(raw))  # raises on a key Ray's schema refuses
    assert "spend_cap" not in parse_cluster_config(raw).ray_dict()["provider"]


def test_a_cap_without_an_amount_says_which_keys_to_set():
    assert problems(full_with({"action": "down"})) == {"provider.spend_cap": (
        "set max_usd_per_hour, max_usd_total or both (US dollars), or leave "
        "provider.spend_cap out")}


@pytest.mark.parametrize("amount", [0, -5, float("nan"), float("inf")])
def test_an_amount_that_is_not_a_positive_number_is_refused_at_its_path(amount):
    assert list(problems(full_with({"max_usd_total": amount}))) == [
        "provider.spend_cap.max_usd_total"]


def test_an_unknown_action_names_the_two_there_are():
    assert problems(full_with({"max_usd_total": 5, "action": "delete"})) == {
        "provider.spend_cap.action": (
            "'delete' is not an action: write stop_workers (the head stays up) or down "
            "(every node stops), or leave it out for stop_workers")}
