"""The head's `node_config` (GCE API JSON) as pulumi-gcp `compute.Instance` inputs.

Workers send the API body as written; only the head goes through pulumi-gcp, whose inputs
differ in name and shape (`reservationAffinity.consumeReservationType` -> `type`, a disk's
`diskEncryptionKey.kmsKeyName` -> `kms_key_self_link`, ...). What it cannot express at all is
refused by the config (model/config/head_instance.py), so nothing is dropped here in silence.
"""

from __future__ import annotations

import re
from typing import Any

from model.config import ComputeNodeConfig
from model.config.node_config import AttachedDisk, CustomerEncryptionKey, InitializeParams
from model.config.urls import short_name


def instance_args(config: ComputeNodeConfig) -> dict[str, Any]:
    """pulumi-gcp `compute.Instance` inputs for what the node_config fixes statically."""
    boot = config.boot_disk
    confidential = config.confidential_instance_config
    workload = config.workload_identity_config
    args: dict[str, Any] = {
        # The bare name, as the provider stores it: a partial URL would show a diff each `up`.
        "machine_type": short_name(config.machine_type),
        "boot_disk": _boot_disk(boot) if boot else None,
        "attached_disks": [
            _drop_none(
                {
                    "source": d.source,
                    "device_name": d.device_name,
                    "mode": d.mode,
                    "force_attach": d.force_attach,
                    **_disk_key(d.disk_encryption_key),
                }
            )
            for d in config.disks
            if not d.boot and d.type == "PERSISTENT" and d.source
        ]
        or None,
        "scratch_disks": [
            _drop_none(
                {
                    "interface": d.interface or "NVME",
                    "size": d.disk_size_gb or 375,
                    "device_name": d.device_name,
                }
            )
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
        # pulumi-gcp takes one policy; more are refused for the head by the config.
        "resource_policies": config.resource_policies[0] if config.resource_policies else None,
        "shielded_instance_config": _snake(config.shielded_instance_config),
        "reservation_affinity": _reservation_affinity(config),
        "advanced_machine_features": _snake(config.advanced_machine_features),
        "confidential_instance_config": (
            _drop_none(
                {
                    "confidential_instance_type": confidential.confidential_instance_type,
                    "enable_confidential_compute": confidential.enable_confidential_compute,
                }
            )
            if confidential
            else None
        ),
        "network_performance_config": _snake(config.network_performance_config),
        "enable_display": config.display_device.enable_display if config.display_device else None,
        "hostname": config.hostname,
        "key_revocation_action_type": config.key_revocation_action_type,
        "instance_encryption_key": _encryption_key(config.instance_encryption_key),
        "params": (
            {"resource_manager_tags": config.params.resource_manager_tags}
            if config.params and config.params.resource_manager_tags
            else None
        ),
        "workload_identity_config": (
            _drop_none(
                {
                    "identity": workload.identity,
                    "identity_certificate_enabled": workload.identity_certificate_enabled,
                }
            )
            if workload
            else None
        ),
        # Metadata changes (startup script, keys) apply in place; other changes may stop it.
        "allow_stopping_for_update": True,
        # A head stopped by autostop (or by hand) is started again by the next `up`.
        "desired_status": "RUNNING",
    }
    return _drop_none(args)


def new_data_disks(config: ComputeNodeConfig) -> list[AttachedDisk]:
    """Non-boot persistent disks the instance creates: pulumi-gcp needs a Disk for each."""
    return [
        d
        for d in config.disks
        if not d.boot and d.type == "PERSISTENT" and not d.source and d.initialize_params
    ]


def data_disk_args(disk: AttachedDisk) -> dict[str, Any]:
    """pulumi-gcp `compute.Disk` inputs for a data disk the head's YAML has GCE create."""
    params = disk.initialize_params or InitializeParams()
    return _drop_none(
        {
            "image": params.source_image,
            "snapshot": params.source_snapshot,
            "size": params.disk_size_gb,
            "type": short_name(params.disk_type) if params.disk_type else None,
            "labels": params.labels,
            "description": params.description,
            "provisioned_iops": params.provisioned_iops,
            "provisioned_throughput": params.provisioned_throughput,
            "resource_policies": params.resource_policies,
        }
    )


def created_disk_attachment(disk: AttachedDisk, source: Any) -> dict[str, Any]:
    """The `attached_disks` entry for a data disk created as its own `compute.Disk`."""
    return _drop_none({"source": source, "device_name": disk.device_name, "mode": disk.mode})


def _boot_disk(disk: AttachedDisk) -> dict[str, Any]:
    params = disk.initialize_params
    initialize: dict[str, Any] = {"size": disk.disk_size_gb}
    if params is not None:
        initialize = {
            "image": params.source_image,
            "snapshot": params.source_snapshot,
            # GCE reads a boot disk's size from either place; pulumi-gcp from this one.
            "size": params.disk_size_gb or disk.disk_size_gb,
            "type": short_name(params.disk_type) if params.disk_type else None,
            "labels": params.labels,
            "provisioned_iops": params.provisioned_iops,
            "provisioned_throughput": params.provisioned_throughput,
            "resource_manager_tags": params.resource_manager_tags,
            "resource_policies": params.resource_policies[0] if params.resource_policies else None,
            "architecture": params.architecture,
            "enable_confidential_compute": params.enable_confidential_compute,
            "replica_zones": params.replica_zones,
            "storage_pool": params.storage_pool,
            "source_image_encryption_key": _encryption_key(params.source_image_encryption_key),
            "source_snapshot_encryption_key": _encryption_key(
                params.source_snapshot_encryption_key
            ),
        }
    boot = {
        "auto_delete": True if disk.auto_delete is None else disk.auto_delete,
        "device_name": disk.device_name,
        "mode": disk.mode,
        "interface": disk.interface,
        "source": disk.source,
        "force_attach": disk.force_attach,
        "guest_os_features": [f.type for f in disk.guest_os_features or []] or None,
        **_disk_key(disk.disk_encryption_key),
        "initialize_params": _drop_none(initialize) or None,
    }
    return _drop_none(boot)


def _disk_key(key: CustomerEncryptionKey | None) -> dict[str, Any]:
    """An attached disk's `diskEncryptionKey`, which pulumi-gcp spreads over the disk."""
    if key is None:
        return {}
    return {
        "kms_key_self_link": key.kms_key_name,
        "disk_encryption_service_account": key.kms_key_service_account,
    }


def _encryption_key(key: CustomerEncryptionKey | None) -> dict[str, Any] | None:
    if key is None:
        return None
    return _drop_none(
        {
            "kms_key_self_link": key.kms_key_name,
            "kms_key_service_account": key.kms_key_service_account,
        }
    )


def _reservation_affinity(config: ComputeNodeConfig) -> dict[str, Any] | None:
    affinity = config.reservation_affinity
    if affinity is None:
        return None
    specific = (
        {"key": affinity.key, "values": affinity.values or []}
        if affinity.consume_reservation_type == "SPECIFIC_RESERVATION"
        else None
    )
    return _drop_none({"type": affinity.consume_reservation_type, "specific_reservation": specific})


# Scheduling fields pulumi-gcp lacks; the config refuses them for the head.
_SCHEDULING_WITHOUT_INPUT = {"locationHint", "exposeHostTopology"}


def _scheduling(config: ComputeNodeConfig) -> dict[str, Any]:
    s = config.scheduling
    preemptible = s.is_preemptible
    body = {k: v for k, v in s.body().items() if k not in _SCHEDULING_WITHOUT_INPUT}
    args = {
        **snake_deep(body),
        "preemptible": preemptible,
        # GCE refuses automatic restart on preemptible VMs.
        "automatic_restart": False if preemptible else s.automatic_restart,
        "on_host_maintenance": "TERMINATE" if preemptible else s.on_host_maintenance,
    }
    return _drop_none(args)


# Network interface keys with no pulumi-gcp input: `kind` and `name` are GCE's own, and an
# access config's `name`/`type`/`setPublicPtr` follow from the entry and its PTR name.
_INTERFACE_IGNORED = {"kind", "name"}
_ACCESS_IGNORED = {"name", "type", "setPublicPtr", "kind"}
_RENAMED = {"networkIP": "network_ip", "natIP": "nat_ip"}


def network_interface_args(interface: dict[str, Any]) -> dict[str, Any]:
    """A Compute API network interface -> pulumi-gcp `InstanceNetworkInterfaceArgs` dict."""
    args: dict[str, Any] = {}
    for key, value in interface.items():
        if key in _INTERFACE_IGNORED or value is None:
            continue
        if key in ("accessConfigs", "ipv6AccessConfigs"):
            keep_name = key == "ipv6AccessConfigs"  # pulumi-gcp names IPv6 access configs
            value = [
                {
                    _snake_name(k): v
                    for k, v in entry.items()
                    if v is not None and (k not in _ACCESS_IGNORED or (keep_name and k == "name"))
                }
                for entry in value
            ]
        elif isinstance(value, list):
            value = [snake_deep(entry) for entry in value] or None
        args[_snake_name(key)] = value
    # An interface without access configs gets no external IP: say so explicitly.
    args.setdefault("access_configs", [])
    return _drop_none(args)


def snake_deep(data: Any) -> Any:
    """API JSON keys -> pulumi-gcp argument names, through nested objects and lists (for
    objects without user-named keys such as labels)."""
    if isinstance(data, dict):
        return {_snake_name(k): snake_deep(v) for k, v in data.items()}
    if isinstance(data, list):
        return [snake_deep(v) for v in data]
    return data


def _snake_name(key: str) -> str:
    return _RENAMED.get(key) or re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()


def _snake(model: Any) -> dict[str, Any] | None:
    return snake_deep(model.body()) if model is not None else None


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}
