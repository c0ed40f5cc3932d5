"""The `private` stack and private mode: no node has a public address (head, pinned workers,
TPU slices, the node_configs the head's autoscaler launches from), SSH only from IAP's
range, a Cloud NAT for egress; input names checked against pulumi-gcp's own Args classes."""

from __future__ import annotations

import copy
import inspect
import json
from typing import Any

import pulumi_gcp as gcp
import pytest
import yaml

from bootstrap.head_provider.pinned import PROVIDER_FIELD as PINNED_TYPES_FIELD
from infra.dynamic_types import WORKER_GROUP_TYPE
from model.config import ConfigError, parse_cluster_config
from tests.support.program_runs import head_config_text, run_program, run_stack, stack_yaml

IAP_RANGE = "35.235.240.0/20"  # cloud.google.com/iap/docs/using-tcp-forwarding
ROUTER = "gcp:compute/router:Router"
ROUTER_NAT = "gcp:compute/routerNat:RouterNat"


def _walk(value: Any, path: str = ""):
    """Every (path, key, value) of nested inputs."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield path, key, item
            yield from _walk(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")


def _external_addresses(inputs: dict[str, Any]) -> list[str]:
    return [
        f"{path}.{key}"
        for path, key, item in _walk(inputs)
        if (key in ("accessConfigs", "ipv6AccessConfigs") and item)
        or (key == "enableExternalIps" and item is not False)
    ]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _pulumi_gcp_inputs(args_class: type) -> set[str]:
    return {_camel(name) for name in inspect.signature(args_class.__init__).parameters
            if name not in ("self", "__self__")}


def test_no_resource_of_the_private_stack_gives_a_node_a_public_address():
    run = run_stack("private")
    found = {r.name: _external_addresses(r.inputs) for r in run.resources}
    (head,) = run.of_type("gcp:compute/instance:Instance")
    found["the head's autoscaler config"] = _external_addresses(
        yaml.safe_load(head_config_text(run, head)))
    assert {name: paths for name, paths in found.items() if paths} == {}
    # Every kind of node is in the plan, so the check above covered each of them.
    types = {r.type for r in run.resources}
    assert {"gcp:compute/instance:Instance", "gcp:tpu/v2Vm:V2Vm", WORKER_GROUP_TYPE} <= types


def test_the_autoscaler_config_the_head_gets_has_no_public_address_and_dials_internal_ips():
    run = run_stack("private")
    (head,) = run.of_type("gcp:compute/instance:Instance")
    config = yaml.safe_load(head_config_text(run, head))
    assert config["provider"]["use_internal_ips"] is True
    twins = config["provider"].get(PINNED_TYPES_FIELD, {})  # v2's view of pinned workers,
    bodies = {name: t["node_config"]  # never launched: the head provider refuses them
              for name, t in config["available_node_types"].items() if name not in twins}
    assert set(bodies) == {"ray_head_default", "ray_worker_small", "ray_tpu"}
    for name, body in bodies.items():
        if "networkInterfaces" in body:
            assert [nic["accessConfigs"] for nic in body["networkInterfaces"]] == [[]], name
        else:
            assert body["networkConfig"]["enableExternalIps"] is False, name
    for ours in ("private_cluster", "ssh_proxy_command", "ssh_source_ranges"):
        assert ours not in config["provider"]


def test_ssh_is_admitted_from_iap_only_and_ray_ports_stay_between_the_nodes():
    run = run_stack("private")
    rules = {r.name: r.inputs for r in run.of_type("gcp:compute/firewall:Firewall")}
    assert rules["ray-private-ssh"]["sourceRanges"] == [IAP_RANGE]
    assert rules["ray-private-ssh"]["allows"] == [{"protocol": "tcp", "ports": ["22"]}]
    internal = rules["ray-private-internal"]
    assert "sourceRanges" not in internal
    assert internal["sourceTags"] == internal["targetTags"] == ["ray-private"]


def test_a_cloud_nat_serves_the_cluster_subnet_with_pulumi_gcp_input_names():
    run, raw = run_stack("private"), stack_yaml("private")
    (router,) = run.of_type(ROUTER)
    (nat,) = run.of_type(ROUTER_NAT)
    assert set(router.inputs) <= _pulumi_gcp_inputs(gcp.compute.RouterArgs)
    assert set(nat.inputs) <= _pulumi_gcp_inputs(gcp.compute.RouterNatArgs)
    (subnet_entry,) = nat.inputs["subnetworks"]
    assert set(subnet_entry) <= _pulumi_gcp_inputs(gcp.compute.RouterNatSubnetworkArgs)
    region = raw["provider"]["region"]
    (instance,) = run.of_type("gcp:compute/instance:Instance")
    nic = instance.inputs["networkInterfaces"][0]
    assert router.inputs["region"] == nat.inputs["region"] == region
    assert router.inputs["network"] == nic["network"]
    assert nat.inputs["router"] == router.inputs["name"]
    assert nat.inputs["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"
    assert subnet_entry == {"name": nic["subnetwork"], "sourceIpRangesToNats": ["ALL_IP_RANGES"]}
    assert nat.inputs["natIpAllocateOption"] == "AUTO_ONLY"


def test_a_network_that_already_has_a_nat_gets_none_from_the_stack():
    raw = copy.deepcopy(stack_yaml("private"))
    raw["provider"]["private_cluster"] = {"existing_cloud_nat": True}
    run = run_program({"ray-gcp:clusterConfig": json.dumps(raw)}, stack="private-nat")
    assert run.of_type(ROUTER) == run.of_type(ROUTER_NAT) == []
    rules = {r.name: r.inputs for r in run.of_type("gcp:compute/firewall:Firewall")}
    assert rules["ray-private-ssh"]["sourceRanges"] == [IAP_RANGE]


def test_a_public_cluster_has_no_nat():
    assert run_stack("full").of_type(ROUTER) == []


# ------------------------------------------------------------------------- bad input

PROVIDER = {"type": "gcp", "region": "us-central1", "availability_zone": "us-central1-f",
            "project_id": "proj", "private_cluster": True}
HEAD = {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}}


def _problems(provider: dict, types: dict) -> list[tuple[str, str]]:
    data = {"cluster_name": "c", "provider": provider, "head_node_type": "head",
            "available_node_types": {"head": HEAD, **types}}
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(data, "cluster.yaml")
    return caught.value.problems


def test_private_mode_refuses_a_node_config_that_asks_for_an_external_ip():
    worker = {"resources": {}, "node_config": {"machineType": "n1-standard-2",
              "networkInterfaces": [{"subnetwork": "regions/us-central1/subnetworks/s",
                                     "accessConfigs": [{"type": "ONE_TO_ONE_NAT"}]}]}}
    ((path, message),) = _problems(PROVIDER, {"w": worker})
    assert path == "available_node_types.w.node_config.networkInterfaces[0].accessConfigs"
    assert "remove it" in message and "private_cluster" in message


def test_private_mode_refuses_a_tpu_with_external_ips():
    tpu = {"resources": {}, "node_config": {"acceleratorType": "v2-8",
           "runtimeVersion": "tpu-vm-base", "networkConfig": {"enableExternalIps": True}}}
    ((path, message),) = _problems(PROVIDER, {"t": tpu})
    assert path == "available_node_types.t.node_config.networkConfig.enableExternalIps"
    assert "remove it" in message


def test_a_proxy_template_with_an_unknown_placeholder_names_the_path_and_the_known_ones():
    provider = {**PROVIDER, "ssh_proxy_command": "ssh -W {hostname}:{port} bastion"}
    ((path, message),) = _problems(provider, {})
    assert path == "provider.ssh_proxy_command"
    assert "{hostname}" in message and "{instance}" in message and "{host}" in message
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config({"cluster_name": "c", "provider": provider, "head_node_type": "head",
                              "available_node_types": {"head": HEAD}}, "cluster.yaml")
    assert str(caught.value).count("\n") == 1  # the header and the one problem


def test_auth_ssh_proxy_command_points_at_the_provider_key():
    data = {"cluster_name": "c", "provider": PROVIDER, "head_node_type": "head",
            "available_node_types": {"head": HEAD}, "auth": {"ssh_proxy_command": "nc %h %p"}}
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(data)
    ((path, message),) = caught.value.problems
    assert path == "auth.ssh_proxy_command" and "provider.ssh_proxy_command" in message


# ------------------------------------------------------------------------- OS Login

def test_os_login_nodes_carry_enable_oslogin_and_the_key_for_the_startup_script_only():
    run = run_stack("private")
    (head,) = run.of_type("gcp:compute/instance:Instance")
    (tpu,) = run.of_type("gcp:tpu/v2Vm:V2Vm")
    (group,) = [r for r in run.of_type(WORKER_GROUP_TYPE) if r.name.endswith("ray_worker_small")]
    group_metadata = {item["key"]: item["value"]
                      for item in group.inputs["body"]["metadata"]["items"]}
    bootstrap = yaml.safe_load(head_config_text(run, head))
    launched = {name: {i["key"]: i["value"] for i in t["node_config"]["metadata"]["items"]}
                for name, t in bootstrap["available_node_types"].items()
                if "networkInterfaces" in t["node_config"]}
    for metadata in [head.inputs["metadata"], tpu.inputs["metadata"], group_metadata,
                     *launched.values()]:
        assert metadata["enable-oslogin"] == "TRUE"
        assert "ssh-keys" not in metadata
        kind, blob = metadata["ray-authorized-key"].split()
        assert kind == "ssh-ed25519" or kind.startswith(("ssh-rsa", "ecdsa")), kind
    assert run.outputs["os_login_account"] == "you@example.com"


def test_os_login_grants_are_additive_members_for_the_principal():
    run, raw = run_stack("private"), stack_yaml("private")
    principal = raw["provider"]["os_login"]["principal"]
    project = raw["provider"]["project_id"]
    (login,) = [m for m in run.of_type("gcp:projects/iAMMember:IAMMember")
                if m.inputs["member"] == principal]
    assert login.inputs == {"project": project, "role": "roles/compute.osAdminLogin",
                            "member": principal}
    # On each account the nodes run as: the head's, the cluster's worker account.
    account_users = [m for m in run.of_type("gcp:serviceaccount/iAMMember:IAMMember")
                     if m.inputs["member"] == principal]
    assert sorted(m.inputs["serviceAccountId"] for m in account_users) == [
        f"projects/{project}/serviceAccounts/{account}@{project}.iam.gserviceaccount.com"
        for account in ("ray-autoscaler-sa-v1", f"ray-{raw['cluster_name']}-worker")]
    for account_user in account_users:
        assert account_user.inputs["role"] == "roles/iam.serviceAccountUser"
        assert set(account_user.inputs) <= _pulumi_gcp_inputs(gcp.serviceaccount.IAMMemberArgs)
    # Whole-policy resources would drop everyone else's bindings: none is used.
    types = {r.type for r in run.resources}
    assert not {t for t in types if t.endswith(("IAMPolicy", "IAMBinding"))}


def test_os_login_refuses_ssh_keys_metadata_in_a_node_config():
    worker = {"resources": {}, "node_config": {"machineType": "n1-standard-2",
              "metadata": {"items": [{"key": "ssh-keys", "value": "me:ssh-ed25519 AAAA me"}]}}}
    provider = {**PROVIDER, "os_login": {"principal": "user:me@example.com"}}
    ((path, message),) = _problems(provider, {"w": worker})
    assert path == "available_node_types.w.node_config.metadata.ssh-keys"
    assert "OS Login ignores ssh-keys" in message


def test_os_login_principal_must_be_an_iam_member():
    provider = {**PROVIDER, "os_login": {"principal": "me@example.com"}}
    ((path, message),) = _problems(provider, {})
    assert path == "provider.os_login.principal" and "user:alice@example.com" in message


def test_inside_the_vpc_a_private_cluster_is_dialled_directly_unless_a_tunnel_is_named():
    def proxy(**provider) -> str | None:
        data = {"cluster_name": "c", "provider": {**PROVIDER, **provider},
                "head_node_type": "head", "available_node_types": {"head": HEAD}}
        return parse_cluster_config(data).provider.proxy_command

    assert proxy().startswith("gcloud compute start-iap-tunnel {instance} {port}")
    assert proxy(use_internal_ips=True) is None
    bastion = "ssh -W {host}:{port} bastion.example.com"
    assert proxy(use_internal_ips=True, ssh_proxy_command=bastion) == bastion
    assert proxy(private_cluster=False) is None
