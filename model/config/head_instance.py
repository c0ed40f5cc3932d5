"""What GCE takes but pulumi-gcp's `compute.Instance` cannot express, so a head cannot have it.

Workers send their `node_config` to the Compute API as written and may use any of these; the
head is a pulumi-gcp resource. Paths use `[]` for any list index. The tests hold the list to
pulumi-gcp's real input names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_NO_INPUT = "pulumi-gcp's compute.Instance has no input for it"
_MACHINE_IMAGE = "pulumi-gcp creates from a machine image only as compute.InstanceFromMachineImage"
_BOOT_PARAM = "pulumi-gcp's boot_disk.initialize_params has no input for it"
_ACCESS = "pulumi-gcp's access_configs have no input for it"

HEAD_UNSUPPORTED: dict[str, str] = {
    "privateIpv6GoogleAccess": _NO_INPUT,
    "localSsdEncryptionMode": _NO_INPUT,
    "shieldedInstanceIntegrityPolicy": _NO_INPUT,
    "sourceMachineImage": _MACHINE_IMAGE,
    "sourceMachineImageEncryptionKey": _MACHINE_IMAGE,
    "params.requestValidForDuration": _NO_INPUT,
    "scheduling.locationHint": _NO_INPUT,
    "scheduling.exposeHostTopology": _NO_INPUT,
    "scheduling.protectionTier": _NO_INPUT,
    "confidentialInstanceConfig.confidentialParavisorConfig": _NO_INPUT,
    "workloadIdentityConfig.identityType": _NO_INPUT,
    "disks[].initializeParams.diskName": _BOOT_PARAM,
    "disks[].initializeParams.description": _BOOT_PARAM,
    "disks[].initializeParams.licenses": _BOOT_PARAM,
    "disks[].initializeParams.onUpdateAction": _BOOT_PARAM,
    "networkInterfaces[].accessConfigs[].externalIpv6": _ACCESS,
    "networkInterfaces[].accessConfigs[].externalIpv6PrefixLength": _ACCESS,
    "networkInterfaces[].ipv6AccessConfigs[].natIP": _ACCESS,
    "networkInterfaces[].accessConfigs[].ipCollection": _ACCESS,
    "networkInterfaces[].ipv6AccessConfigs[].ipCollection": _ACCESS,
}

# Keys of a non-boot disk pulumi-gcp can express, by how it holds the disk.
_SCRATCH_KEYS = {"type", "boot", "interface", "deviceName", "diskSizeGb", "autoDelete"}
_EXISTING_KEYS = {"type", "boot", "source", "deviceName", "mode", "forceAttach",
                  "diskEncryptionKey"}
_CREATED_KEYS = {"type", "boot", "deviceName", "mode", "autoDelete", "initializeParams"}
_CREATED_PARAMS = {"sourceImage", "sourceSnapshot", "diskSizeGb", "diskType", "labels",
                   "description", "provisionedIops", "provisionedThroughput",
                   "resourcePolicies"}


def head_unsupported(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(path below node_config, reason) for each field of the head's body pulumi-gcp lacks."""
    problems = [
        (path, HEAD_UNSUPPORTED[pattern])
        for path in _paths(body)
        if not path.startswith("disks[")  # below, by how pulumi-gcp holds each disk
        and (pattern := re.sub(r"\[\d+\]", "[]", path)) in HEAD_UNSUPPORTED
    ]
    if len(body.get("resourcePolicies") or []) > 1:
        problems.append(("resourcePolicies", "pulumi-gcp's compute.Instance takes one policy"))
    for index, disk in enumerate(body.get("disks") or []):
        problems += [(f"disks[{index}].{path}", why) for path, why in _disk_problems(disk)]
    return problems


def _disk_problems(disk: dict[str, Any]) -> Iterator[tuple[str, str]]:
    params = disk.get("initializeParams") or {}
    if disk.get("boot"):
        for key in params:
            why = HEAD_UNSUPPORTED.get(f"disks[].initializeParams.{key}")
            if why:
                yield (f"initializeParams.{key}", why)
        if len(params.get("resourcePolicies") or []) > 1:
            yield ("initializeParams.resourcePolicies", "pulumi-gcp's boot disk takes one policy")
        return
    if disk.get("type") == "SCRATCH":
        allowed, how = _SCRATCH_KEYS, "a scratch disk"
    elif disk.get("source"):
        allowed, how = _EXISTING_KEYS, "an attached existing disk"
    else:
        allowed, how = _CREATED_KEYS, "a data disk it creates (compute.Disk)"
        if not params:
            yield ("initializeParams", "a data disk needs a source or initializeParams: add one")
        yield from (
            (f"initializeParams.{key}", f"pulumi-gcp has no input for it on {how}")
            for key in params
            if key not in _CREATED_PARAMS
        )
    yield from (
        (key, f"pulumi-gcp has no input for it on {how}") for key in disk if key not in allowed
    )


def _paths(value: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path
            yield from _paths(item, path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, f"{prefix}[{index}]")
