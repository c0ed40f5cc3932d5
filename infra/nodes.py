"""Node bodies in API JSON, and their translation to pulumi-gcp inputs.

A node group's body stays in the Compute / TPU API's own JSON (what Ray's node provider and
our WorkerGroup send); the nodes Pulumi keeps one by one (the head, TPU slices) translate it
to pulumi-gcp arguments.
"""

from __future__ import annotations

from typing import Any

from infra.config import ComputeNodeConfig, TpuNodeConfig
from infra.config.node_config import AttachedDisk
from infra.config.urls import network_path, short_name, subnetwork_path
from infra.plan import NodeGroupPlan


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


# ------------------------------------------------------------- compute.Instance arguments


def instance_args(config: ComputeNodeConfig) -> dict[str, Any]:
    """pulumi-gcp `compute.Instance` inputs for what the node_config fixes statically."""
    boot = config.boot_disk
    args: dict[str, Any] = {
        "machine_type": config.machine_type,
        "boot_disk": _boot_disk(boot) if boot else None,
        "attached_disks": [
            {"source": d.source, "device_name": d.device_name, "mode": d.mode}
            for d in config.disks
            if not d.boot and d.type == "PERSISTENT" and d.source
        ]
        or None,
        "scratch_disks": [
            {"interface": d.interface or "NVME", "size": d.disk_size_gb or 375}
            for d in config.disks
            if d.type == "SCRATCH"
        ]
        or None,
        "guest_accelerators": [
            {"type": a.accelerator_type, "count": a.accelerator_count}
            for a in config.guest_accelerators
        ]
        or None,
        "scheduling": _scheduling(config),
        "min_cpu_platform": config.min_cpu_platform,
        "can_ip_forward": config.can_ip_forward,
        "deletion_protection": config.deletion_protection,
        "description": config.description,
        "resource_policies": config.resource_policies[0] if config.resource_policies else None,
        "shielded_instance_config": (
            snake_keys(config.shielded_instance_config.body())
            if config.shielded_instance_config
            else None
        ),
        # Metadata changes (startup script, keys) apply in place; other changes may stop it.
        "allow_stopping_for_update": True,
        # A head stopped by autostop (or by hand) is started again by the next `up`.
        "desired_status": "RUNNING",
    }
    return {k: v for k, v in args.items() if v is not None}


def new_data_disks(config: ComputeNodeConfig) -> list[AttachedDisk]:
    """Non-boot persistent disks the instance creates: pulumi-gcp needs a Disk for each."""
    return [
        d
        for d in config.disks
        if not d.boot and d.type == "PERSISTENT" and not d.source and d.initialize_params
    ]


def _boot_disk(disk: AttachedDisk) -> dict[str, Any]:
    params = disk.initialize_params
    initialize: dict[str, Any] = {}
    if params is not None:
        initialize = {
            "image": params.source_image,
            "size": params.disk_size_gb,
            "type": short_name(params.disk_type) if params.disk_type else None,
            "labels": params.labels,
            "provisioned_iops": params.provisioned_iops,
            "provisioned_throughput": params.provisioned_throughput,
        }
    boot = {
        "auto_delete": True if disk.auto_delete is None else disk.auto_delete,
        "device_name": disk.device_name,
        "mode": disk.mode,
        "interface": disk.interface,
        "source": disk.source,
        "initialize_params": {k: v for k, v in initialize.items() if v is not None} or None,
    }
    return {k: v for k, v in boot.items() if v is not None}


def _scheduling(config: ComputeNodeConfig) -> dict[str, Any]:
    s = config.scheduling
    preemptible = s.is_preemptible
    args = {
        "preemptible": preemptible,
        # GCE refuses automatic restart on preemptible VMs.
        "automatic_restart": False if preemptible else s.automatic_restart,
        "on_host_maintenance": "TERMINATE" if preemptible else s.on_host_maintenance,
        "provisioning_model": s.provisioning_model,
        "instance_termination_action": s.instance_termination_action,
    }
    return {k: v for k, v in args.items() if v is not None}


def network_interface_args(interface: dict[str, Any]) -> dict[str, Any]:
    """A Compute API network interface -> pulumi-gcp `InstanceNetworkInterfaceArgs` dict."""
    args = {
        "network": interface.get("network"),
        "subnetwork": interface.get("subnetwork"),
        "network_ip": interface.get("networkIP"),
        "stack_type": interface.get("stackType"),
        "nic_type": interface.get("nicType"),
        # pulumi-gcp has no access-config name/type: an entry means an external NAT IP.
        "access_configs": [
            {
                k: v
                for k, v in {"nat_ip": a.get("natIP"), "network_tier": a.get("networkTier")}.items()
                if v
            }
            for a in interface.get("accessConfigs") or []
        ],
        "alias_ip_ranges": [
            {
                k: v
                for k, v in {
                    "ip_cidr_range": r.get("ipCidrRange"),
                    "subnetwork_range_name": r.get("subnetworkRangeName"),
                }.items()
                if v
            }
            for r in interface.get("aliasIpRanges") or []
        ]
        or None,
    }
    return {k: v for k, v in args.items() if v is not None}


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
    }
    return {k: v for k, v in args.items() if v is not None}


def tpu_network_config(config: TpuNodeConfig, interfaces: list[dict[str, Any]]) -> dict[str, Any]:
    """The YAML's networkConfig, else the cluster's subnet with external IPs as planned."""
    if config.network_config is not None:
        return config.network_config.body()
    first = interfaces[0] if interfaces else {}
    network = {
        "network": first.get("network"),
        "subnetwork": first.get("subnetwork"),
        "enableExternalIps": bool(first.get("accessConfigs")),
    }
    return {k: v for k, v in network.items() if v is not None}


def tpu_network_args(project: str, region: str, network_config: dict[str, Any]) -> dict[str, Any]:
    """A TPU body's `networkConfig` -> pulumi-gcp `V2VmNetworkConfigArgs`, network and subnet
    in the `projects/...` form the TPU API reports back, so a refresh shows no change."""
    args = snake_keys(network_config)
    if args.get("network"):
        args["network"] = network_path(project, args["network"])
    if args.get("subnetwork"):
        args["subnetwork"] = subnetwork_path(project, region, args["subnetwork"])
    return args


def snake_keys(data: dict[str, Any]) -> dict[str, Any]:
    """API JSON keys (`enableExternalIps`) -> pulumi-gcp argument names (`enable_external_ips`)."""
    out = {}
    for key, value in data.items():
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
        out[snake] = value
    return out
