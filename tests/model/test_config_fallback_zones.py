"""`provider.fallback_zones`: validated with the YAML path and the fix, and handed to each
compute worker group (TPU groups stay in their zone)."""

from __future__ import annotations

import json

import pytest

from model.config import ConfigError, parse_cluster_config
from ops.review.plan_engine import run_program
from tests.support.program_runs import stack_yaml

PROVIDER = {"type": "gcp", "region": "us-west1", "availability_zone": "us-west1-a",
            "project_id": "proj"}


def provider_problems(**keys: object) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config({"cluster_name": "c", "provider": {**PROVIDER, **keys}})
    return dict(caught.value.problems)


@pytest.mark.parametrize("value", [None, False, ["us-west1-c", "us-west1-b"]])
def test_absent_false_or_a_list_of_the_regions_zones_is_accepted(value):
    provider = dict(PROVIDER) if value is None else {**PROVIDER, "fallback_zones": value}
    config = parse_cluster_config({"cluster_name": "c", "provider": provider})
    assert config.provider.fallback_zones == value


def test_a_zone_of_another_region_names_its_index_and_the_fix():
    problems = provider_problems(fallback_zones=["us-west1-b", "us-east1-b"])
    assert problems == {"provider.fallback_zones[1]": "zone 'us-east1-b' is not in region "
                        "'us-west1': list zones such as us-west1-b"}


def test_true_and_duplicates_are_refused_with_what_to_write():
    assert "false to turn zone failover off" in provider_problems(fallback_zones=True)[
        "provider.fallback_zones"]
    assert provider_problems(fallback_zones=["us-west1-b", "us-west1-b"]) == {
        "provider.fallback_zones[1]": "zone 'us-west1-b' is listed twice: list it once"}


def test_compute_groups_get_the_key_and_tpu_slices_stay_in_the_zone():
    raw = stack_yaml("tpu")
    raw["provider"]["fallback_zones"] = ["us-central1-a"]
    raw["available_node_types"]["cpu_worker"] = {
        "min_workers": 0, "max_workers": 1, "resources": {"CPU": 2},
        "node_config": {"machineType": "n1-standard-2", "disks": [{
            "boot": True, "autoDelete": True, "initializeParams": {
                "diskSizeGb": 50,
                "sourceImage": "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"}}]}}
    run = run_program({"ray-gcp:clusterConfig": json.dumps(raw)}, stack="tpu")
    groups = {r.inputs["node_type"]: r.inputs for r in run.of_type(
        "pulumi-python:dynamic/ray-gcp:WorkerGroup")}
    assert set(groups) == {"cpu_worker"}  # TPU slices are V2Vm resources, not groups
    assert groups["cpu_worker"]["fallback_zones"] == ["us-central1-a"]
    zone = raw["provider"]["availability_zone"]
    assert {vm.inputs["zone"] for vm in run.of_type("gcp:tpu/v2Vm:V2Vm")} == {zone}
