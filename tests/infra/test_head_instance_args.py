"""A node_config with the newly taken Instance fields plans under mocks: the head gets the
right pulumi-gcp `compute.Instance` inputs, a WorkerGroup gets the API JSON as written, and
what pulumi-gcp cannot express is refused for the head only."""

from __future__ import annotations

import copy
import functools
import inspect
import json
import re
from typing import Any

import pulumi_gcp.compute as gcp_compute
import pulumi_gcp.compute._inputs as gcp_inputs
import pulumi_gcp.tpu as gcp_tpu
import pytest

from infra.instance_args import data_disk_args, instance_args, network_interface_args
from infra.nodes import tpu_args
from model.config import ConfigError, parse_cluster_config
from model.config.head_instance import HEAD_UNSUPPORTED
from ops.review.plan_engine import run_program
from tests.support.compute_discovery import unknown_fields
from tests.support.program_runs import stack_yaml

KMS = "projects/p/locations/us-west1/keyRings/r/cryptoKeys/k"
TAGS = {"tagKeys/281": "tagValues/823"}
NODE_CONFIG: dict[str, Any] = {
    "machineType": "n2-standard-8",
    "hostname": "head.ray.example.internal",
    "keyRevocationActionType": "STOP",
    "reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
                            "key": "compute.googleapis.com/reservation-name",
                            "values": ["ray-reservation"]},
    "advancedMachineFeatures": {"threadsPerCore": 1, "visibleCoreCount": 4,
                                "enableNestedVirtualization": True},
    "confidentialInstanceConfig": {"enableConfidentialCompute": True,
                                   "confidentialInstanceType": "SEV"},
    "networkPerformanceConfig": {"totalEgressBandwidthTier": "TIER_1"},
    "displayDevice": {"enableDisplay": True},
    "resourcePolicies": ["projects/p/regions/us-west1/resourcePolicies/compact"],
    "instanceEncryptionKey": {"kmsKeyName": KMS},
    "params": {"resourceManagerTags": TAGS},
    "scheduling": {"maxRunDuration": {"seconds": 7200}, "instanceTerminationAction": "DELETE",
                   "nodeAffinities": [{"key": "compute.googleapis.com/node-group-name",
                                       "operator": "IN", "values": ["ray-nodes"]}],
                   "localSsdRecoveryTimeout": {"seconds": 3600, "nanos": 0},
                   "minNodeCpus": 4, "availabilityDomain": 2,
                   "terminationTime": "2030-01-01T00:00:00Z"},
    "disks": [{"boot": True, "autoDelete": True, "type": "PERSISTENT",
               "diskEncryptionKey": {"kmsKeyName": KMS,
                                     "kmsKeyServiceAccount": "kms@p.iam.gserviceaccount.com"},
               "guestOsFeatures": [{"type": "GVNIC"}, {"type": "UEFI_COMPATIBLE"}],
               "initializeParams": {"sourceSnapshot": "projects/p/global/snapshots/base",
                                    "diskSizeGb": 100, "resourceManagerTags": TAGS}}],
    "networkInterfaces": [{"network": "projects/p/global/networks/ray",
                           "subnetwork": "projects/p/regions/us-west1/subnetworks/ray",
                           "queueCount": 8, "nicType": "GVNIC", "stackType": "IPV4_IPV6",
                           "accessConfigs": [{"name": "External NAT",
                                              "type": "ONE_TO_ONE_NAT"}],
                           "ipv6AccessConfigs": [{"type": "DIRECT_IPV6",
                                                  "networkTier": "PREMIUM"}]}],
}
# What pulumi-gcp takes for each field above, as the engine records the inputs.
HEAD_INPUTS: dict[str, Any] = {
    "machineType": "n2-standard-8",
    "hostname": "head.ray.example.internal",
    "keyRevocationActionType": "STOP",
    "reservationAffinity": {"type": "SPECIFIC_RESERVATION", "specificReservation": {
        "key": "compute.googleapis.com/reservation-name", "values": ["ray-reservation"]}},
    "advancedMachineFeatures": {"threadsPerCore": 1, "visibleCoreCount": 4,
                                "enableNestedVirtualization": True},
    "confidentialInstanceConfig": {"enableConfidentialCompute": True,
                                   "confidentialInstanceType": "SEV"},
    "networkPerformanceConfig": {"totalEgressBandwidthTier": "TIER_1"},
    "enableDisplay": True,
    "resourcePolicies": "projects/p/regions/us-west1/resourcePolicies/compact",
    "instanceEncryptionKey": {"kmsKeySelfLink": KMS},
    "params": {"resourceManagerTags": TAGS},
    "scheduling": {"maxRunDuration": {"seconds": 7200}, "instanceTerminationAction": "DELETE",
                   "nodeAffinities": [{"key": "compute.googleapis.com/node-group-name",
                                       "operator": "IN", "values": ["ray-nodes"]}],
                   "localSsdRecoveryTimeout": {"seconds": 3600, "nanos": 0},
                   "minNodeCpus": 4, "availabilityDomain": 2,
                   "terminationTime": "2030-01-01T00:00:00Z", "preemptible": False},
    "bootDisk": {"autoDelete": True, "kmsKeySelfLink": KMS,
                 "diskEncryptionServiceAccount": "kms@p.iam.gserviceaccount.com",
                 "guestOsFeatures": ["GVNIC", "UEFI_COMPATIBLE"],
                 "initializeParams": {"snapshot": "projects/p/global/snapshots/base",
                                      "size": 100, "resourceManagerTags": TAGS}},
    "networkInterfaces": [{"network": "projects/p/global/networks/ray",
                           "subnetwork": "projects/p/regions/us-west1/subnetworks/ray",
                           "queueCount": 8, "nicType": "GVNIC", "stackType": "IPV4_IPV6",
                           "accessConfigs": [{}],
                           "ipv6AccessConfigs": [{"networkTier": "PREMIUM"}]}],
}
# GCE takes these, pulumi-gcp's compute.Instance does not: workers only.
WORKER_ONLY = {"scheduling": {"locationHint": "cell-a",
                              "protectionTier": "PROTECTION_TIER_CAPACITY_OPTIMIZED"},
               "shieldedInstanceIntegrityPolicy": {"updateAutoLearnPolicy": True},
               "privateIpv6GoogleAccess": "ENABLE_OUTBOUND_VM_ACCESS_TO_GOOGLE",
               "confidentialInstanceConfig": {
                   "confidentialParavisorConfig": {"confidentialTpmType": "EPHEMERAL"}},
               "workloadIdentityConfig": {"identityType": "AGENT_IDENTITY"},
               "networkInterfaces": [{
                   **NODE_CONFIG["networkInterfaces"][0],
                   "accessConfigs": [{"name": "External NAT", "type": "ONE_TO_ONE_NAT",
                                      "ipCollection": "projects/p/regions/us-west1/"
                                                      "publicDelegatedPrefixes/byoip"}]}]}


def with_node_configs(head: dict[str, Any], worker: dict[str, Any]) -> dict[str, Any]:
    raw = stack_yaml("full")
    raw["available_node_types"]["ray_head_default"]["node_config"] = copy.deepcopy(head)
    raw["available_node_types"]["ray_worker_small"]["node_config"] = copy.deepcopy(worker)
    return raw


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        out[key] = {**out.get(key, {}), **value} if isinstance(value, dict) else value
    return out


@functools.cache
def planned() -> Any:
    raw = with_node_configs(NODE_CONFIG, merged(NODE_CONFIG, WORKER_ONLY))
    return run_program({"ray-gcp:clusterConfig": json.dumps(raw)}, stack="fields")


@pytest.mark.parametrize("field", sorted(HEAD_INPUTS))
def test_head_instance_gets_the_pulumi_gcp_inputs_for_each_field(field: str):
    (head,) = planned().of_type("gcp:compute/instance:Instance")
    assert head.inputs[field] == HEAD_INPUTS[field]


@pytest.mark.parametrize("field", sorted(merged(NODE_CONFIG, WORKER_ONLY)))
def test_worker_group_gets_each_field_as_the_api_json_written(field: str):
    body = planned().named("full-ray_worker_small").inputs["body"]
    written = merged(NODE_CONFIG, WORKER_ONLY)[field]
    if field == "machineType":
        written = f"zones/us-west1-a/machineTypes/{written}"
    assert body[field] == written


def test_the_worker_body_is_an_instance_as_computes_discovery_document_describes_it():
    """The worker group sends the body as JSON (infra/workers/compute_rest.py): every field
    must be one of the Instance schema Google publishes."""
    body = planned().named("full-ray_worker_small").inputs["body"]
    assert unknown_fields({**body, "name": "w"}, {"$ref": "Instance"}, "Instance") == []
    assert body["reservationAffinity"]["values"] == ["ray-reservation"]
    assert body["networkInterfaces"][0]["queueCount"] == 8
    assert unknown_fields({"reservationAffinity": {"value": "x"}}, {"$ref": "Instance"},
                          "Instance") == ["Instance.reservationAffinity.value"]


@pytest.mark.parametrize("field", sorted(WORKER_ONLY))
def test_a_field_pulumi_gcp_cannot_express_is_refused_for_the_head_and_says_so(field: str):
    raw = with_node_configs(merged(NODE_CONFIG, {field: WORKER_ONLY[field]}), NODE_CONFIG)
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(raw)
    problems = caught.value.problems
    written = WORKER_ONLY[field]
    assert len(problems) == (len(written) if isinstance(written, dict) else 1), problems
    for path, message in problems:
        assert path.startswith(f"available_node_types.ray_head_default.node_config.{field}")
        assert "pulumi-gcp" in message and "head" in message


# ---------------------------------------------------------------- against pulumi-gcp itself

_LISTS = {"disks": "BootDisk"}  # the API's disks[] hold the head's boot disk
_MAPS = {"labels", "resource_manager_tags", "resourceManagerTags"}


def _camel(snake: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"_", snake))


def _singular(name: str) -> str:
    if name.endswith("ies"):
        return name[:-3] + "y"
    return name[:-1] if name.endswith("s") else name


def _parameters(cls: type) -> set[str]:
    return set(inspect.signature(cls.__init__).parameters) - {"self", "__self__"}


def unknown_inputs(args: dict[str, Any], cls: type, prefix: str) -> list[str]:
    """Keys of `args` that are not parameters of pulumi-gcp's `cls`, recursively through
    nested input classes named `<prefix><Field>Args`."""
    missing = []
    for key, value in args.items():
        if key not in _parameters(cls):
            missing.append(f"{prefix}.{key}")
            continue
        items = value if isinstance(value, list) else [value]
        nested_prefix = prefix + _camel(_singular(key) if isinstance(value, list) else key)
        nested = getattr(gcp_inputs, f"{nested_prefix}Args", None)
        for item in items:
            if isinstance(item, dict) and key not in _MAPS:
                assert nested is not None, nested_prefix
                missing += unknown_inputs(item, nested, nested_prefix)
    return missing


def test_every_head_input_is_a_real_pulumi_gcp_instance_input():
    raw = with_node_configs(NODE_CONFIG, NODE_CONFIG)
    head = parse_cluster_config(raw).head_type.node_config
    args = instance_args(head)
    assert not unknown_inputs(args, gcp_compute.InstanceArgs, "Instance")
    interfaces = [network_interface_args(nic.body()) for nic in head.network_interfaces]
    assert not unknown_inputs({"network_interfaces": interfaces}, gcp_compute.InstanceArgs,
                              "Instance")


def test_a_created_data_disk_uses_real_pulumi_gcp_disk_inputs():
    raw = with_node_configs(merged(NODE_CONFIG, {"disks": [
        *NODE_CONFIG["disks"],
        {"boot": False, "type": "PERSISTENT", "initializeParams": {
            "sourceSnapshot": "projects/p/global/snapshots/data", "diskSizeGb": 500,
            "diskType": "pd-ssd", "provisionedIops": 5000,
            "resourcePolicies": ["projects/p/regions/us-west1/resourcePolicies/a",
                                 "projects/p/regions/us-west1/resourcePolicies/b"]}}]}),
        NODE_CONFIG)
    head = parse_cluster_config(raw).head_type.node_config
    args = data_disk_args(head.disks[1])
    assert args["snapshot"] == "projects/p/global/snapshots/data"
    assert args["type"] == "pd-ssd" and len(args["resource_policies"]) == 2
    assert set(args) <= _parameters(gcp_compute.DiskArgs)


@pytest.mark.parametrize("path", sorted(HEAD_UNSUPPORTED))
def test_each_field_refused_for_the_head_really_has_no_pulumi_gcp_input(path: str):
    *parents, field = path.replace("[]", "").split(".")
    prefix = "Instance" + "".join(
        _LISTS.get(p) or _camel(_singular(p) if p in ("networkInterfaces", "accessConfigs",
                                                       "ipv6AccessConfigs") else p)
        for p in parents)
    cls = gcp_compute.InstanceArgs if prefix == "Instance" else getattr(
        gcp_inputs, f"{prefix}Args")
    assert re.sub(r"(?<!^)([A-Z])", r"_\1", field).lower() not in _parameters(cls)


def test_tpu_head_takes_shielded_boot():
    raw = stack_yaml("tpu")
    head = raw["head_node_type"]
    tpu = dict(raw["available_node_types"]["ray_tpu"]["node_config"])
    raw["available_node_types"][head]["node_config"] = {
        **tpu, "shieldedInstanceConfig": {"enableSecureBoot": True}}
    run = run_program({"ray-gcp:clusterConfig": json.dumps(raw)}, stack="tpu-head")
    (vm,) = [vm for vm in run.of_type("gcp:tpu/v2Vm:V2Vm")
             if vm.inputs["labels"]["ray-node-type"] == "head"]
    assert vm.inputs["shieldedInstanceConfig"] == {"enableSecureBoot": True}
    assert set(tpu_args(parse_cluster_config(raw).head_type.node_config)) <= _parameters(
        gcp_tpu.V2VmArgs)


def test_several_resource_policies_go_to_workers_and_are_refused_for_the_head():
    policies = [f"projects/p/regions/us-west1/resourcePolicies/{name}"
                for name in ("placement", "schedule")]
    worker = merged(NODE_CONFIG, {"resourcePolicies": policies})
    config = parse_cluster_config(with_node_configs(NODE_CONFIG, worker))
    body = config.available_node_types["ray_worker_small"].node_config.body()
    assert body["resourcePolicies"] == policies
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(with_node_configs(worker, NODE_CONFIG))
    assert "takes one policy" in dict(caught.value.problems)[
        "available_node_types.ray_head_default.node_config.resourcePolicies"]


def test_a_boot_disk_size_given_beside_initialize_params_reaches_the_head():
    head = merged(NODE_CONFIG, {"disks": [{"boot": True, "diskSizeGb": 80,
                                           "initializeParams": {"sourceImage": "img"}}]})
    config = parse_cluster_config(with_node_configs(head, NODE_CONFIG))
    assert instance_args(config.head_type.node_config)["boot_disk"]["initialize_params"] == {
        "image": "img", "size": 80}


def test_a_head_data_disk_is_a_disk_resource_attached_by_its_device_name():
    disk = {"boot": False, "type": "PERSISTENT", "deviceName": "data", "mode": "READ_WRITE",
            "initializeParams": {"sourceSnapshot": "projects/p/global/snapshots/data",
                                 "diskSizeGb": 500, "diskType": "pd-ssd"}}
    head = merged(NODE_CONFIG, {"disks": [*NODE_CONFIG["disks"], disk]})
    raw = with_node_configs(head, NODE_CONFIG)
    run = run_program({"ray-gcp:clusterConfig": json.dumps(raw)}, stack="data-disk")
    (created,) = run.of_type("gcp:compute/disk:Disk")
    assert {k: created.inputs[k] for k in ("snapshot", "size", "type")} == {
        "snapshot": "projects/p/global/snapshots/data", "size": 500, "type": "pd-ssd"}
    (instance,) = run.of_type("gcp:compute/instance:Instance")
    project, name = raw["provider"]["project_id"], created.inputs["name"]
    assert instance.inputs["attachedDisks"] == [{
        "source": f"projects/{project}/zones/us-west1-a/disks/{name}",
        "deviceName": "data", "mode": "READ_WRITE"}]
