"""Every config rule gives one readable message naming the YAML path and the fix."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from model.config import ConfigError, load_cluster_config, parse_cluster_config

CLUSTERS = Path(__file__).resolve().parents[2] / "stacks" / "clusters"
PROVIDER = {"type": "gcp", "region": "us-west1", "availability_zone": "us-west1-a",
            "project_id": "proj"}


def full() -> dict:
    return yaml.safe_load((CLUSTERS / "full.yaml").read_text())


def problems(data: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(data)
    return dict(caught.value.problems)


def test_minimal_yaml_becomes_a_full_cluster_from_the_gcp_defaults():
    config = parse_cluster_config({"cluster_name": "mini", "provider": PROVIDER})
    assert config.head_node_type == "ray_head_default"
    assert set(config.available_node_types) == {"ray_head_default", "ray_worker_small"}
    worker = config.available_node_types["ray_worker_small"]
    assert worker.node_config.scheduling.preemptible is True
    assert worker.max_workers == config.max_workers == 2
    assert config.head_type.max_workers == 0
    assert config.auth.ssh_user == "ubuntu"
    assert any("--autoscaling-config=~/ray_bootstrap_config.yaml" in c
               for c in config.head_start_ray_commands)


def test_short_names_are_normalised_to_url_forms():
    config = load_cluster_config(CLUSTERS / "gpu-docker.yaml")
    node = config.available_node_types["ray_worker_gpu"].node_config
    assert node.machine_type == "zones/us-west1-b/machineTypes/n1-standard-2"
    assert node.guest_accelerators[0].accelerator_type == (
        "projects/my-gcp-project/zones/us-west1-b/acceleratorTypes/nvidia-tesla-t4")


def test_scheduling_list_form_is_merged_into_one_object():
    config = load_cluster_config(CLUSTERS / "gpu-docker.yaml")
    scheduling = config.available_node_types["ray_worker_gpu"].node_config.scheduling
    assert scheduling.preemptible is True
    assert scheduling.on_host_maintenance == "TERMINATE"


def test_metadata_items_become_a_mapping():
    config = load_cluster_config(CLUSTERS / "gpu-docker.yaml")
    assert config.head_type.node_config.metadata == {"install-nvidia-driver": "True"}


def test_missing_project_id_is_named():
    data = full()
    data["provider"]["project_id"] = None
    found = problems(data)
    assert "project_id must be set in the provider section" in found["provider.project_id"]


def test_unknown_head_node_type_lists_the_choices():
    data = full()
    data["head_node_type"] = "nope"
    assert "ray_head_default" in problems(data)["head_node_type"]


def test_min_above_max_is_rejected_on_the_type():
    data = full()
    data["available_node_types"]["ray_worker_small"].update(min_workers=3, max_workers=1)
    found = problems(data)
    assert "exceeds max_workers" in found["available_node_types.ray_worker_small.min_workers"]


def test_sum_of_min_workers_above_cluster_max_is_rejected():
    data = full()
    data["max_workers"] = 1
    data["available_node_types"]["ray_worker_small"].update(min_workers=2, max_workers=2)
    assert "more than max_workers" in problems(data)["max_workers"]


def test_gpu_type_without_terminate_is_rejected():
    data = yaml.safe_load((CLUSTERS / "gpu-docker.yaml").read_text())
    data["available_node_types"]["ray_worker_gpu"]["node_config"]["scheduling"] = [
        {"preemptible": False}]
    found = problems(data)
    assert "onHostMaintenance: TERMINATE" in found[
        "available_node_types.ray_worker_gpu.node_config.scheduling"]


def test_tpu_type_with_machine_type_is_rejected():
    data = yaml.safe_load((CLUSTERS / "tpu.yaml").read_text())
    data["available_node_types"]["ray_tpu"]["node_config"]["machineType"] = "n1-standard-2"
    found = problems(data)
    assert "no machineType" in found["available_node_types.ray_tpu.node_config.machineType"]


def test_tpu_type_with_both_accelerator_forms_is_rejected():
    data = yaml.safe_load((CLUSTERS / "tpu.yaml").read_text())
    data["available_node_types"]["ray_tpu"]["node_config"]["acceleratorConfig"] = {
        "type": "V4", "topology": "2x2x1"}
    found = problems(data)
    assert "exactly one of" in found["available_node_types.ray_tpu.node_config.acceleratorType"]


def test_unknown_keys_are_reported_not_dropped():
    data = full()
    data["max_worker"] = 3
    data["available_node_types"]["ray_worker_small"]["node_config"]["machinetype"] = "x"
    found = problems(data)
    assert "unknown key" in found["max_worker"]
    assert "unknown key" in found["available_node_types.ray_worker_small.node_config.machinetype"]


def test_malformed_service_account_json_is_formatted_improperly():
    data = full()
    data["provider"]["gcp_credentials"] = {"type": "service_account", "credentials": "{not json"}
    found = problems(data)
    assert "formatted improperly" in found["provider.gcp_credentials.credentials"]


def test_credentials_are_kept_secret_in_errors_and_dumps():
    secret = "-----BEGIN PRIVATE KEY-----abc"
    data = full()
    data["provider"]["gcp_credentials"] = {"type": "service_account", "credentials": json.dumps(
        {"client_email": "a@b.iam.gserviceaccount.com", "private_key": secret})}
    config = parse_cluster_config(data)
    assert secret not in repr(config)
    assert secret not in json.dumps(config.ray_dict())
    bad = copy.deepcopy(data)
    bad["provider"]["gcp_credentials"]["credentials"] = json.dumps({"private_key": secret})
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(bad)
    assert secret not in str(caught.value)
    assert "client_email" in str(caught.value)


def test_zone_outside_region_is_rejected():
    data = full()
    data["provider"]["availability_zone"] = "us-east1-b"
    assert "is not in region" in problems(data)["provider.availability_zone"]


def test_cluster_name_that_cannot_name_instances_is_rejected():
    data = full()
    data["cluster_name"] = "My_Cluster"
    assert "lowercase" in problems(data)["cluster_name"]


def test_yaml_syntax_error_names_the_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster_name: x\nprovider: [\n")
    with pytest.raises(ConfigError) as caught:
        load_cluster_config(bad)
    assert "line" in str(caught.value)


def test_several_problems_are_reported_together():
    data = full()
    data["bogus"] = 1
    data["cluster_name"] = "Bad"
    assert {"bogus", "cluster_name"} <= set(problems(data))


def test_autoscaler_version_follows_ray_up_of_the_installed_ray_unless_forced():
    """What the installed Ray's `ray up` does: its get_or_create_head_node starts the head
    with v2 when RAY_UP_enable_autoscaler_v2, which it defaults to on, is on."""
    import inspect

    from ray.autoscaler._private.commands import get_or_create_head_node

    ray_up_v2 = 'os.getenv("RAY_UP_enable_autoscaler_v2", "1") == "1"' in inspect.getsource(
        get_or_create_head_node)
    config = parse_cluster_config({"cluster_name": "mini", "provider": PROVIDER})
    assert config.provider.autoscaler_version == ("v2" if ray_up_v2 else "v1")
    forced = parse_cluster_config({"cluster_name": "mini",
                                   "provider": {**PROVIDER, "autoscaler_version": "v1"}})
    assert forced.provider.autoscaler_version == "v1"
    assert "autoscaler_version" not in forced.ray_dict()["provider"]  # not a key of Ray's


def test_an_unknown_autoscaler_version_says_which_to_write():
    found = problems({"cluster_name": "mini", "provider": {**PROVIDER, "autoscaler_version": 2}})
    assert "write v1 or v2" in found["provider.autoscaler_version"]
