"""Forms GCE and the TPU API keep as they are: what we send is what they store."""

from __future__ import annotations

import pytest
import yaml

from infra.instance_args import instance_args
from model.config import parse_cluster_config
from tests.support.program_runs import PROJECT_ROOT


def tpu_yaml() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "stacks/clusters/tpu.yaml").read_text())


@pytest.mark.parametrize(("network", "subnetwork"), [
    ("vpc", "ray-subnet"),
    ("global/networks/vpc", "regions/us-central1/subnetworks/ray-subnet"),
    ("https://www.googleapis.com/compute/v1/projects/my-gcp-project/global/networks/vpc",
     "https://www.googleapis.com/compute/v1/projects/my-gcp-project/regions/us-central1/"
     "subnetworks/ray-subnet"),
])
def test_tpu_network_config_takes_the_tpu_apis_project_paths(network, subnetwork):
    raw = tpu_yaml()
    raw["available_node_types"]["ray_tpu"]["node_config"]["networkConfig"] = {
        "network": network, "subnetwork": subnetwork}
    config = parse_cluster_config(raw)
    body = config.available_node_types["ray_tpu"].node_config.body()
    project, region = raw["provider"]["project_id"], raw["provider"]["region"]
    assert body["networkConfig"] == {
        "network": f"projects/{project}/global/networks/vpc",
        "subnetwork": f"projects/{project}/regions/{region}/subnetworks/ray-subnet"}


def test_head_machine_type_is_the_bare_name_the_provider_stores():
    raw = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
    config = parse_cluster_config(raw)
    node_config = config.head_type.node_config
    assert node_config.machine_type.startswith("zones/"), "the API body keeps the zone URL"
    assert instance_args(node_config)["machine_type"] == "n1-standard-2"
