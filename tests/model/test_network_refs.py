"""The network and subnet a cluster takes from another stack: every form Compute documents
becomes its partial URL, anything else (or a subnet of another region) is one line naming
where it came from; the stack file's `ray-gcp:networkStack` is a stack name."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.config import ConfigError, parse_cluster_config
from model.config.network_refs import network_path, networks_named_by_yaml, subnetwork_path
from model.stack_config import StackFileError, read_stack_config

ROOT = "https://www.googleapis.com/compute/v1/"
HOST_NETWORK = "projects/host-project/global/networks/shared"
SUBNET = "projects/host-project/regions/us-west1/subnetworks/ray"


@pytest.mark.parametrize("given", [
    "shared", "global/networks/shared", HOST_NETWORK.replace("host-project", "my-project"),
    ROOT + HOST_NETWORK.replace("host-project", "my-project"),
    "https://compute.googleapis.com/compute/v1/projects/my-project/global/networks/shared",
])
def test_every_network_form_is_the_partial_url(given):
    assert network_path(given, "my-project", "src") == "projects/my-project/global/networks/shared"


def test_a_shared_vpc_network_keeps_its_host_project():
    assert network_path(ROOT + HOST_NETWORK, "my-project", "src") == HOST_NETWORK


@pytest.mark.parametrize("given", [
    "ray", "regions/us-west1/subnetworks/ray", SUBNET.replace("host-project", "my-project"),
    ROOT + SUBNET.replace("host-project", "my-project"),
])
def test_every_subnetwork_form_is_the_partial_url(given):
    assert subnetwork_path(given, "my-project", "us-west1", "src") == \
        "projects/my-project/regions/us-west1/subnetworks/ray"


@pytest.mark.parametrize(("given", "wanted"), [
    ("Shared_VPC", "is not a VPC network"),
    ("projects/p/regions/us-west1/subnetworks/s", "is not a VPC network"),
    ("", "is not a VPC network"),
    (None, "is not a VPC network"),
])
def test_a_network_of_another_form_names_its_source_and_the_forms(given, wanted):
    with pytest.raises(ConfigError) as caught:
        network_path(given, "my-project", "RayClusterArgs.network")
    (problem,) = caught.value.problems
    assert problem[0] == "RayClusterArgs.network"
    assert wanted in problem[1] and "projects/P/global/networks/N" in problem[1]


def test_a_subnetwork_of_another_region_is_refused_naming_both_regions():
    with pytest.raises(ConfigError) as caught:
        subnetwork_path(SUBNET.replace("us-west1", "europe-west4"), "p", "us-west1", "src")
    assert "is in region europe-west4, the cluster in us-west1" in str(caught.value)


def test_a_network_url_given_as_the_subnetwork_is_refused():
    with pytest.raises(ConfigError, match="is not a subnetwork"):
        subnetwork_path(HOST_NETWORK, "p", "us-west1", "src")


def test_the_yaml_names_its_network_in_network_interfaces_or_a_tpus_network_config():
    compute = {"machineType": "n1-standard-2",
               "disks": [{"boot": True, "initializeParams": {"sourceImage": "x"}}]}
    raw = {
        "cluster_name": "c", "provider": {"type": "gcp", "region": "us-central1",
                                          "availability_zone": "us-central1-f",
                                          "project_id": "my-project"},
        "head_node_type": "head",
        "available_node_types": {
            "head": {"resources": {}, "node_config": {
                **compute, "networkInterfaces": [{"network": "global/networks/x"}]}},
            "tpu": {"resources": {"TPU": 4}, "min_workers": 0, "max_workers": 1,
                    "node_config": {"acceleratorType": "v2-8", "runtimeVersion": "tpu-vm-base",
                                    "networkConfig": {"network": "x"}}},
        },
    }
    assert networks_named_by_yaml(parse_cluster_config(raw, "c.yaml")) == [
        "available_node_types.head.node_config.networkInterfaces",
        "available_node_types.tpu.node_config.networkConfig"]
    del raw["available_node_types"]["head"]["node_config"]["networkInterfaces"]
    del raw["available_node_types"]["tpu"]["node_config"]["networkConfig"]
    assert networks_named_by_yaml(parse_cluster_config(raw, "c.yaml")) == []


@pytest.mark.parametrize("value", ["acme/network/prod", "network/prod", "prod"])
def test_the_network_stack_key_takes_pulumis_stack_names(tmp_path: Path, value):
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(f"config:\n  ray-gcp:clusterConfig: {{cluster_name: c}}\n"
                    f"  ray-gcp:networkStack: {value}\n")
    assert read_stack_config(path, tmp_path)["ray-gcp:networkStack"] == value


@pytest.mark.parametrize("value", ["a/b/c/d", "acme network", "{x: 1}", "''"])
def test_a_network_stack_key_that_is_no_stack_name_is_one_line(tmp_path: Path, value):
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(f"config:\n  ray-gcp:clusterConfig: {{cluster_name: c}}\n"
                    f"  ray-gcp:networkStack: {value}\n")
    with pytest.raises(StackFileError) as caught:
        read_stack_config(path, tmp_path)
    (problem,) = caught.value.problems
    assert problem.startswith("config.ray-gcp:networkStack: ") and "org/project/stack" in problem
