"""Node bodies in API JSON, and the TPU nodes' translation to pulumi-gcp inputs.

A node group's body stays in the Compute / TPU API's own JSON (what Ray's node provider and
our WorkerGroup send); the nodes Pulumi keeps one by one (the head, TPU slices) translate it
to pulumi-gcp arguments (a compute head's in infra/instance_args.py).
"""

from __future__ import annotations

from typing import Any

from model.config import ComputeNodeConfig, TpuNodeConfig
from model.config.urls import resource_path, tpu_network_path, tpu_subnetwork_path
from model.plan import NodeGroupPlan


def node_body(
    group: NodeGroupPlan, interfaces: list[dict[str, Any]], metadata: dict[str, str]
) -> dict[str, Any]:
    """The group's `node_config` as Ray's GCP node provider would send it (no name, no Ray
    labels: those are per node): the YAML's body plus network, metadata, tags and account."""
    config = group.node_config
    body = config.body()
    body["labels"] = dict(config.labels)
    if isinstance(config, ComputeNodeConfig):
        body["networkInterfaces"] = interfaces
        body["metadata"] = {"items": [{"key": k, "value": v} for k, v in metadata.items()]}
        body["tags"] = {"items": list(group.network_tags)}
        if group.service_account_email:
            body["serviceAccounts"] = [
                {"email": group.service_account_email, "scopes": list(group.service_account_scopes)}
            ]
        return body
    body["networkConfig"] = tpu_network_config(config, interfaces)
    body["metadata"] = dict(metadata)
    body["tags"] = list(group.network_tags)
    if group.service_account_email:
        body["serviceAccount"] = {
            "email": group.service_account_email,
            "scope": list(group.service_account_scopes),
        }
    return body


# ------------------------------------------------------------- tpu.V2Vm arguments


def tpu_args(config: TpuNodeConfig) -> dict[str, Any]:
    """pulumi-gcp `tpu.V2Vm` inputs for what the TPU node_config fixes statically."""
    args: dict[str, Any] = {
        "runtime_version": config.runtime_version,
        "accelerator_type": config.accelerator_type,
        "accelerator_config": (
            {
                "type": config.accelerator_config.type.upper(),
                "topology": config.accelerator_config.topology,
            }
            if config.accelerator_config
            else None
        ),
        "scheduling_config": (
            snake_keys(config.scheduling_config.body()) if config.scheduling_config else None
        ),
        "description": config.description,
        "cidr_block": config.cidr_block,
        "data_disks": (
            [snake_keys(d.body()) for d in config.data_disks] if config.data_disks else None
        ),
        "shielded_instance_config": (
            snake_keys(config.shielded_instance_config.body())
            if config.shielded_instance_config
            else None
        ),
    }
    return {k: v for k, v in args.items() if v is not None}


def tpu_network_config(config: TpuNodeConfig, interfaces: list[dict[str, Any]]) -> dict[str, Any]:
    """The YAML's networkConfig, else the cluster's subnet with external IPs as planned."""
    if config.network_config is not None:
        return config.network_config.body()
    first = interfaces[0] if interfaces else {}
    # The TPU API documents `projects/...` paths, not Compute self-links.
    network = {
        "network": resource_path(first["network"]) if first.get("network") else None,
        "subnetwork": resource_path(first["subnetwork"]) if first.get("subnetwork") else None,
        "enableExternalIps": bool(first.get("accessConfigs")),
    }
    return {k: v for k, v in network.items() if v is not None}



def tpu_network_args(project: str, region: str, network_config: dict[str, Any]) -> dict[str, Any]:
    """A TPU body's `networkConfig` -> pulumi-gcp `V2VmNetworkConfigArgs`, network and subnet
    in the `projects/...` form the TPU API reports back, so a refresh shows no change."""
    args = snake_keys(network_config)
    if args.get("network"):
        args["network"] = tpu_network_path(project, args["network"])
    if args.get("subnetwork"):
        args["subnetwork"] = tpu_subnetwork_path(project, region, args["subnetwork"])
    return args

def snake_keys(data: dict[str, Any]) -> dict[str, Any]:
    """API JSON keys (`enableExternalIps`) -> pulumi-gcp argument names (`enable_external_ips`)."""
    out = {}
    for key, value in data.items():
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
        out[snake] = value
    return out
