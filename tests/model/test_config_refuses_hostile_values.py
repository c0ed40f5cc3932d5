"""Values a careless or hostile YAML can carry are refused, each with its YAML path."""

from __future__ import annotations

import copy
import datetime
import json

import pytest

from model.config import ConfigError, load_cluster_config, parse_cluster_config

PROVIDER = {"type": "gcp", "region": "us-west1", "availability_zone": "us-west1-a",
            "project_id": "proj"}
TYPES = {
    "head": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}},
    "worker": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}},
}


def problems(**overrides) -> dict[str, str]:
    data = {"cluster_name": "c", "provider": dict(PROVIDER),
            "available_node_types": copy.deepcopy(TYPES), "head_node_type": "head", **overrides}
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(data)
    return dict(caught.value.problems)


def with_type(**fields) -> dict:
    types = copy.deepcopy(TYPES)
    types["worker"].update(fields)
    return types


def test_empty_ssh_source_ranges_is_refused_with_the_fix():
    found = problems(provider={**PROVIDER, "ssh_source_ranges": []})
    assert "0.0.0.0/0" in found["provider.ssh_source_ranges"]
    assert "without a source" in found["provider.ssh_source_ranges"]


@pytest.mark.parametrize("field", ["max_workers", "upscaling_speed", "idle_timeout_minutes"])
@pytest.mark.parametrize("value", [True, float("nan"), float("inf")])
def test_top_level_numbers_refuse_booleans_and_non_finite_values(field, value):
    assert "is not a number" in problems(**{field: value})[field]


@pytest.mark.parametrize("field", ["min_workers", "max_workers"])
def test_node_type_counts_refuse_booleans(field):
    found = problems(available_node_types=with_type(**{field: True}))
    assert found[f"available_node_types.worker.{field}"].startswith("true is not a number")


@pytest.mark.parametrize("amount", [True, -1, float("nan"), float("inf"), "4"])
def test_resources_must_be_finite_amounts(amount):
    found = problems(available_node_types=with_type(resources={"CPU": amount}))
    assert "is not an amount" in found["available_node_types.worker.resources.CPU"]


@pytest.mark.parametrize("labels, bad", [
    ({"Team": "ml"}, "Team"),
    ({"team": "ML"}, "team"),
    ({"1team": "ml"}, "1team"),
    ({"team": "a b"}, "team"),
    ({"team": "x" * 64}, "team"),
])
def test_bad_gce_labels_are_named(labels, bad):
    node_config = {"machineType": "n1-standard-2", "labels": labels}
    found = problems(available_node_types=with_type(node_config=node_config))
    assert "is not a GCE label" in found[f"available_node_types.worker.node_config.labels.{bad}"]


def test_tpu_labels_are_checked_too():
    node_config = {"acceleratorType": "v4-8", "runtimeVersion": "r", "labels": {"A": "b"}}
    found = problems(available_node_types=with_type(node_config=node_config))
    assert "available_node_types.worker.node_config.labels.A" in found


def test_good_labels_pass():
    node_config = {"machineType": "n1-standard-2", "labels": {"team": "ml_infra-2", "e": ""}}
    data = {"cluster_name": "c", "provider": PROVIDER, "head_node_type": "head",
            "available_node_types": with_type(node_config=node_config)}
    assert parse_cluster_config(data).available_node_types["worker"].node_config.labels


@pytest.mark.parametrize("field", ["ssh_private_key", "ssh_public_key"])
def test_empty_key_files_are_refused(tmp_path, field):
    empty = tmp_path / "key"
    empty.write_text("\n")
    found = problems(auth={"ssh_user": "ubuntu", field: str(empty)})
    assert found[f"auth.{field}"] == (f"{empty} is empty: point it at the key file, or remove "
                                      "the key to have one generated")


def test_duplicate_keys_name_both_lines(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "cluster_name: c\n"
        "provider: {type: gcp, region: us-west1, availability_zone: us-west1-a,"
        " project_id: mine}\n"
        "auth:\n"
        "  ssh_user: ubuntu\n"
        "  ssh_user: root\n"
        "provider: {type: gcp, region: us-west1, availability_zone: us-west1-a,"
        " project_id: theirs}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_cluster_config(path)
    found = dict(caught.value.problems)
    assert found["provider"] == ("is given twice, at lines 2 and 6: keep one "
                                 "(YAML would use the last)")
    assert found["auth.ssh_user"].startswith("is given twice, at lines 4 and 5")
    assert str(path) in str(caught.value)


def test_yaml_merge_keys_may_still_override(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "x-provider: &provider {type: gcp, region: us-west1, availability_zone: us-west1-a,"
        " project_id: base}\n"
        "provider:\n  <<: *provider\n  project_id: mine\n"
    )
    with pytest.raises(ConfigError) as caught:  # x-provider is not a Ray key
        load_cluster_config(path)
    assert list(dict(caught.value.problems)) == ["x-provider"]


CREDENTIALS = {"client_email": "a@b.iam.gserviceaccount.com", "private_key": "k"}


@pytest.mark.parametrize("credentials", [
    {**CREDENTIALS, "created": datetime.date(2024, 1, 1)},  # YAML reads 2024-01-01 as a date
    {**CREDENTIALS, "scopes": [["a"]]},
    {**CREDENTIALS, 7: "x"},
    json.dumps({**CREDENTIALS, "token_uri": 7}),
    "[" * 100_000 + "]" * 100_000,  # past the JSON parser's depth
])
def test_service_account_credentials_are_a_json_object_of_strings(credentials):
    found = problems(provider={**PROVIDER, "gcp_credentials": {
        "type": "service_account", "credentials": credentials}})
    assert "formatted improperly" in found["provider.gcp_credentials.credentials"]


def test_service_account_credentials_given_as_a_mapping_of_strings_are_accepted():
    config = parse_cluster_config({
        "cluster_name": "c", "provider": {**PROVIDER, "gcp_credentials": {
            "type": "service_account", "credentials": CREDENTIALS}},
        "available_node_types": copy.deepcopy(TYPES), "head_node_type": "head"})
    assert config.provider.gcp_credentials.service_account_info() == CREDENTIALS


def tpu_type(**node_config) -> dict:
    types = copy.deepcopy(TYPES)
    types["worker"]["node_config"] = {"runtimeVersion": "tpu-ubuntu2204-base", **node_config}
    return types


@pytest.mark.parametrize("accelerator_type", ["v4-²", "v4-١٦", "v4-１６", "v4", "v4-0", "-8"])
def test_tpu_accelerator_type_sizes_are_ascii_numbers(accelerator_type):
    found = problems(available_node_types=tpu_type(acceleratorType=accelerator_type))
    assert "ASCII digits" in found["available_node_types.worker.node_config.acceleratorType"]


@pytest.mark.parametrize("topology", ["2x²", "٢x2x1", "2x2x1x1", "0x2", "2x2000"])
def test_tpu_topologies_are_ascii_numbers(topology):
    found = problems(available_node_types=tpu_type(
        acceleratorConfig={"type": "V4", "topology": topology}))
    assert "ASCII digits" in \
        found["available_node_types.worker.node_config.acceleratorConfig.topology"]


def test_a_file_mount_under_a_user_that_does_not_exist_is_refused_at_its_path():
    found = problems(file_mounts={"/home/ray/data": "~nosuchuser-29/data"})
    assert "no user 'nosuchuser-29'" in found["file_mounts./home/ray/data"]


def test_a_key_under_a_user_that_does_not_exist_is_refused_at_its_path():
    found = problems(auth={"ssh_private_key": "~nosuchuser-29/.ssh/id_rsa"})
    assert "no user 'nosuchuser-29'" in found["auth.ssh_private_key"]


@pytest.mark.parametrize("target", ["/opt/a\n/etc", "~/x\r", "/tmp/tab\there", "/x\x1b[2J"])
def test_a_file_mounts_target_with_a_control_character_is_refused(target):
    """A newline would make a second docker `-v` bind mount out of one target."""
    found = problems(file_mounts={target: "README.md"})
    (path,) = found
    assert path.startswith("file_mounts.")
    assert "control character" in found[path]
