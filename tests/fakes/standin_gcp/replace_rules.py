"""Which input changes replace a resource: the `ForceNew` fields of the Terraform resources
pulumi-gcp bridges (hashicorp/terraform-provider-google-beta, the same schemas as
terraform-provider-google; read at commit 93c65b2d60, file and field cited per entry).

Terraform's SDK (v2) semantics, which the bridge turns into Pulumi's replaces: a `ForceNew`
leaf replaces when its value changes; a `ForceNew` block (a TypeList/TypeSet of a nested
schema) replaces when its number of elements changes, and its own fields decide the rest.
Fields not listed update in place. Keys are pulumi-gcp's wire names (camelCase, lists
pluralised as pulumi-gcp names them).

`detailed_diff` answers as the bridge's detailed diff does (pulumi/pulumi-terraform-bridge,
pkg/tfbridge/detailed_diff.go, `makeDetailedDiffPropertyMap`): one entry per changed leaf, at
its nested property path, each an add, delete or update marked replace or not:
- objects and maps are walked key by key (`makeMapDiff`), lists index by index
  (`makeListDiff`); a value absent or null on one side is one entry at its path, not walked
  (`makeShortCircuitDiff`), and so is a value still unknown in a preview;
- a path replaces when its own field is ForceNew, or its direct parent is a ForceNew
  collection (a map or a list of plain values: `propertyPathTriggersReplacement`); a value
  added or deleted whole replaces when any ForceNew field inside it is set
  (`propertyValueTriggersReplacement`);
- keys are written as the engine's `resource.PropertyPath.String()` writes them
  (sdk/go/common/resource/properties_path.go): `metadata["startup-script"]` for a key with
  characters other than letters, digits and `_`, `bootDisk.initializeParams.size`,
  `networkInterfaces[0].network`.
The engine replaces a resource when any entry is a replace (plugin.DiffResult.Replace).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_ABSENT = object()


@dataclass(frozen=True)
class Rule:
    force_new: bool = False
    fields: dict[str, Rule] = field(default_factory=dict)


LEAF = Rule(force_new=True)


def block(force_new: bool = True, **fields: Rule) -> Rule:
    return Rule(force_new=force_new, fields=fields)


_KEY = block(kmsKeySelfLink=LEAF, kmsKeyServiceAccount=LEAF, rawKey=LEAF, rsaEncryptedKey=LEAF)

RULES: dict[str, dict[str, Rule]] = {
    # google-beta/services/compute/resource_compute_instance.go, ResourceComputeInstance()
    "gcp:compute/instance:Instance": {
        "name": LEAF,  # "name": ForceNew
        "project": LEAF,  # "project": ForceNew
        "zone": LEAF,  # "zone": ForceNew
        "hostname": LEAF,  # "hostname": ForceNew
        "keyRevocationActionType": LEAF,  # "key_revocation_action_type": ForceNew
        "eraseWindowsVssSignature": LEAF,  # "erase_windows_vss_signature": ForceNew
        "confidentialInstanceConfig": block(),  # "confidential_instance_config": ForceNew
        "params": block(resourceManagerTags=LEAF),  # "params": ForceNew
        # "boot_disk": ForceNew block; device_name, disk_encryption_key_raw/_rsa,
        # disk_encryption_service_account, kms_key_self_link, guest_os_features, mode, source,
        # force_attach ForceNew; initialize_params ForceNew block whose type, image, snapshot,
        # resource_manager_tags, resource_policies, provisioned_iops/_throughput,
        # enable_confidential_compute, storage_pool, architecture, replica_zones and the
        # encryption keys are ForceNew, and whose `size` is not (the disk is resized).
        "bootDisk": block(
            deviceName=LEAF, diskEncryptionKeyRaw=LEAF, diskEncryptionKeyRsa=LEAF,
            diskEncryptionServiceAccount=LEAF, kmsKeySelfLink=LEAF, guestOsFeatures=LEAF,
            mode=LEAF, source=LEAF, forceAttach=LEAF,
            initializeParams=block(
                type=LEAF, image=LEAF, snapshot=LEAF, resourceManagerTags=LEAF,
                resourcePolicies=LEAF, provisionedIops=LEAF, provisionedThroughput=LEAF,
                enableConfidentialCompute=LEAF, storagePool=LEAF, architecture=LEAF,
                replicaZones=LEAF, sourceImageEncryptionKey=_KEY,
                sourceSnapshotEncryptionKey=_KEY,
            ),
        ),
        # "network_interface": ForceNew block; network_attachment, vlan, nic_type, queue_count,
        # ipv6_access_config.{external_ipv6, external_ipv6_prefix_length, name} ForceNew.
        "networkInterfaces": block(
            networkAttachment=LEAF, vlan=LEAF, nicType=LEAF, queueCount=LEAF,
            ipv6AccessConfigs=block(False, externalIpv6=LEAF, externalIpv6PrefixLength=LEAF,
                                    name=LEAF),
        ),
        # "network_performance_config": ForceNew, total_egress_bandwidth_tier ForceNew
        "networkPerformanceConfig": block(totalEgressBandwidthTier=LEAF),
        "attachedDisks": block(False, forceAttach=LEAF),  # attached_disk.force_attach
        # "guest_accelerator": ForceNew, count and type ForceNew
        "guestAccelerators": block(count=LEAF, type=LEAF),
        # "scheduling": preemptible, provisioning_model, termination_time, max_run_duration,
        # on_instance_stop_action, local_ssd_recovery_timeout ForceNew (the rest updates)
        "scheduling": block(
            False, preemptible=LEAF, provisioningModel=LEAF, terminationTime=LEAF,
            maxRunDuration=block(seconds=LEAF, nanos=LEAF),
            onInstanceStopAction=block(discardLocalSsd=LEAF),
            localSsdRecoveryTimeout=block(seconds=LEAF, nanos=LEAF),
        ),
        "scratchDisks": block(size=LEAF),  # "scratch_disk": ForceNew, size ForceNew
        # "advanced_machine_features.enable_uefi_networking": ForceNew
        "advancedMachineFeatures": block(False, enableUefiNetworking=LEAF),
        # "reservation_affinity": ForceNew with type, specific_reservation.{key, values}
        "reservationAffinity": block(
            type=LEAF, specificReservation=block(key=LEAF, values=LEAF)),
        "instanceEncryptionKey": block(kmsKeySelfLink=LEAF, kmsKeyServiceAccount=LEAF),
        # "workload_identity_config": identity, identity_certificate_enabled ForceNew
        "workloadIdentityConfig": block(False, identity=LEAF, identityCertificateEnabled=LEAF),
    },
    # google-beta/services/tpuv2/resource_tpu_v2_vm.go, ResourceTpuV2Vm()
    "gcp:tpu/v2Vm:V2Vm": {
        "name": LEAF,  # "name": ForceNew
        "zone": LEAF,  # "zone": ForceNew
        "project": LEAF,  # "project": ForceNew
        "runtimeVersion": LEAF,  # "runtime_version": ForceNew
        "acceleratorType": LEAF,  # "accelerator_type": ForceNew
        "cidrBlock": LEAF,  # "cidr_block": ForceNew
        "acceleratorConfig": block(topology=LEAF, type=LEAF),  # "accelerator_config"
        # "network_config": ForceNew with can_ip_forward, enable_external_ips, network,
        # queue_count, subnetwork ForceNew (and the same for "network_configs")
        "networkConfig": block(canIpForward=LEAF, enableExternalIps=LEAF, network=LEAF,
                               queueCount=LEAF, subnetwork=LEAF),
        "networkConfigs": block(canIpForward=LEAF, enableExternalIps=LEAF, network=LEAF,
                                queueCount=LEAF, subnetwork=LEAF),
        # "scheduling_config": ForceNew with preemptible, reserved, spot ForceNew
        "schedulingConfig": block(preemptible=LEAF, reserved=LEAF, spot=LEAF),
        # "service_account": ForceNew with email, scope ForceNew
        "serviceAccount": block(email=LEAF, scopes=LEAF),
        # "shielded_instance_config": ForceNew with enable_secure_boot ForceNew
        "shieldedInstanceConfig": block(enableSecureBoot=LEAF),
    },
    # google-beta/services/compute/resource_compute_firewall.go: name, direction, project
    # are ForceNew (`network` is not: it updates through firewalls.patch).
    "gcp:compute/firewall:Firewall": {"name": LEAF, "direction": LEAF, "project": LEAF,
                                      "params": block()},
    # google-beta/services/compute/resource_compute_disk.go: these ForceNew (labels and
    # `size` are not: a disk is relabelled and resized in place).
    "gcp:compute/disk:Disk": {
        name: LEAF for name in (
            "name", "zone", "project", "type", "image", "snapshot", "description",
            "architecture", "interface", "licenses", "multiWriter", "physicalBlockSizeBytes",
            "resourcePolicies", "sourceDisk", "storagePool", "enableConfidentialCompute",
            "guestOsFeatures", "sourceStorageObject", "sourceInstantSnapshot")
    } | {"diskEncryptionKey": _KEY, "sourceImageEncryptionKey": _KEY,
         "sourceSnapshotEncryptionKey": _KEY, "params": block(resourceManagerTags=LEAF)},
    # google-beta/services/resourcemanager/resource_google_service_account.go: account_id,
    # project ForceNew (display_name, description update in place).
    "gcp:serviceaccount/account:Account": {"accountId": LEAF, "project": LEAF},
    # google-beta/tpgiamresource/resource_iam_member.go: role, member, condition (and its
    # expression, title, description) ForceNew; iam_project.go: project ForceNew.
    "gcp:projects/iAMMember:IAMMember": {
        "role": LEAF, "member": LEAF, "project": LEAF,
        "condition": block(expression=LEAF, title=LEAF, description=LEAF),
    },
    # The same member schema; iam_secret_manager_secret.go: project, secret_id ForceNew.
    "gcp:secretmanager/secretIamMember:SecretIamMember": {
        "role": LEAF, "member": LEAF, "project": LEAF, "secretId": LEAF,
        "condition": block(expression=LEAF, title=LEAF, description=LEAF),
    },
    # google-beta/services/resourcemanager/resource_google_project_service.go: service, project
    "gcp:projects/service:Service": {"service": LEAF, "project": LEAF},
    # google-beta/services/secretmanager/resource_secret_manager_secret.go: replication (and
    # auto, user_managed.replicas.location), secret_id, tags, project ForceNew.
    "gcp:secretmanager/secret:Secret": {
        "secretId": LEAF, "project": LEAF, "tags": LEAF,
        "replication": block(auto=block(), userManaged=block(
            replicas=block(location=LEAF))),
    },
    # google-beta/services/secretmanager/resource_secret_manager_secret_version.go:
    # secret_data, secret, is_secret_data_base64, secret_data_wo_version ForceNew.
    "gcp:secretmanager/secretVersion:SecretVersion": {
        "secretData": LEAF, "secret": LEAF, "isSecretDataBase64": LEAF,
        "secretDataWoVersion": LEAF,
    },
    # google/services/compute/resource_compute_network.go (terraform-provider-google at
    # 017d2f5814), ResourceComputeNetwork(): name, auto_create_subnetworks, description,
    # internal_ipv6_range, network_profile, params, project ForceNew (mtu, routing mode and
    # the BGP settings update in place).
    "gcp:compute/network:Network": {
        name: LEAF for name in ("name", "autoCreateSubnetworks", "description",
                                "internalIpv6Range", "networkProfile", "project")
    } | {"params": block(resourceManagerTags=LEAF)},
    # google/services/compute/resource_compute_subnetwork.go (at 0110d02a6c),
    # ResourceComputeSubnetwork(): name, network, description, purpose, region, project
    # ForceNew (ip_cidr_range grows in place, logs and secondary ranges update in place).
    "gcp:compute/subnetwork:Subnetwork": {
        name: LEAF for name in ("name", "network", "description", "purpose", "region",
                                "project")
    },
    # google/services/compute/resource_compute_router.go (terraform-provider-google at
    # e03b7622a2), ResourceComputeRouter(): name, encrypted_interconnect_router, ncc_gateway,
    # network, params, region, project ForceNew (description and bgp update in place).
    "gcp:compute/router:Router": {
        "name": LEAF, "encryptedInterconnectRouter": LEAF, "nccGateway": LEAF,
        "network": LEAF, "region": LEAF, "project": LEAF, "params": block(),
    },
    # google/services/compute/resource_compute_router_nat.go, ResourceComputeRouterNat():
    # name, router, endpoint_types, initial_nat_ips, region, type, project ForceNew.
    "gcp:compute/routerNat:RouterNat": {
        name: LEAF for name in ("name", "router", "endpointTypes", "initialNatIps", "region",
                                "type", "project")
    },
    # google/services/resourcemanager/iam_service_account.go: service_account_id ForceNew;
    # role, member, condition from tpgiamresource/resource_iam_member.go.
    "gcp:serviceaccount/iAMMember:IAMMember": {
        "serviceAccountId": LEAF, "role": LEAF, "member": LEAF,
        "condition": block(expression=LEAF, title=LEAF, description=LEAF),
    },
    # google/services/storage/resource_storage_bucket.go (terraform-provider-google at
    # e03b7622a2), ResourceStorageBucket(): name, location, project, enable_object_retention,
    # custom_placement_config.data_locations, hierarchical_namespace (and its enabled) ForceNew.
    "gcp:storage/bucket:Bucket": {
        "name": LEAF, "location": LEAF, "project": LEAF, "enableObjectRetention": LEAF,
        "customPlacementConfig": block(False, dataLocations=LEAF),
        "hierarchicalNamespace": block(enabled=LEAF),
    },
    # google/services/storage/iam_storage_bucket.go: bucket ForceNew; role, member, condition
    # from tpgiamresource/resource_iam_member.go as above.
    "gcp:storage/bucketIAMMember:BucketIAMMember": {
        "bucket": LEAF, "role": LEAF, "member": LEAF,
        "condition": block(expression=LEAF, title=LEAF, description=LEAF),
    },
    # google/services/storage/resource_storage_bucket_object.go, ResourceStorageBucketObject():
    # bucket, name, source, cache_control, content_disposition, content_encoding,
    # content_language, content_type, force_empty_content_type, storage_class, kms_key_name,
    # metadata, customer_encryption.{encryption_algorithm, encryption_key} ForceNew. `content`
    # is not: resourceStorageBucketObjectUpdate uploads it again in place.
    "gcp:storage/bucketObject:BucketObject": {
        name: LEAF for name in (
            "bucket", "name", "source", "cacheControl", "contentDisposition",
            "contentEncoding", "contentLanguage", "contentType", "forceEmptyContentType",
            "storageClass", "kmsKeyName", "metadata")
    } | {"customerEncryption": block(False, encryptionAlgorithm=LEAF, encryptionKey=LEAF)},
}


ADD, DELETE, UPDATE = "add", "delete", "update"
# The engine's unknown value on the wire (sdk/go/common/resource/plugin/rpc.go,
# UnknownStringValue): an input a preview cannot know yet.
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
FREE = Rule()


def detailed_diff(token: str, old: dict[str, Any], new: dict[str, Any]) -> dict[str, str]:
    """Property path -> `add`, `delete` or `update`, with `-replace` where it replaces."""
    rules = RULES.get(token, {})
    found: dict[str, str] = {}
    for key in sorted(set(old) | set(new)):
        _walk([key], rules.get(key, FREE), old.get(key, _ABSENT), new.get(key, _ABSENT), found)
    return found


def replaced_paths(token: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The top-level input names whose change replaces the resource (Pulumi's `replaces`)."""
    return sorted({top_key(path) for path, kind in detailed_diff(token, old, new).items()
                   if kind.endswith("-replace")})


def property_path(parts: list[str | int]) -> str:
    """A path as the engine writes it (PropertyPath.String)."""
    text = ""
    for index, part in enumerate(parts):
        if isinstance(part, int):
            text += f"[{part}]"
        elif all(c.isascii() and (c.isalnum() or c == "_") for c in part):
            text += part if index == 0 else f".{part}"
        else:
            escaped = part.replace('"', '\\"')
            text += f'["{escaped}"]'
    return text


def top_key(path: str) -> str:
    if path.startswith('["'):
        return path[2:path.index('"]')]
    return path.split(".", 1)[0].split("[", 1)[0]


def _walk(path: list[str | int], rule: Rule, old: Any, new: Any, found: dict[str, str]) -> None:
    if _absent(old) and _absent(new):
        return
    if _absent(old) or _absent(new) or new == UNKNOWN:
        if new == UNKNOWN:
            kind, replaces = UPDATE, rule.force_new
        elif _absent(old):
            kind, replaces = ADD, _sets_forced(rule, new)
        else:
            kind, replaces = DELETE, _sets_forced(rule, old)
        found[property_path(path)] = kind + ("-replace" if replaces else "")
    elif isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            _walk([*path, key], _child(rule, key), old.get(key, _ABSENT),
                  new.get(key, _ABSENT), found)
    elif isinstance(old, list) and isinstance(new, list):
        for index in range(max(len(old), len(new))):
            _walk([*path, index], rule, old[index] if index < len(old) else _ABSENT,
                  new[index] if index < len(new) else _ABSENT, found)
    elif old != new:
        found[property_path(path)] = UPDATE + ("-replace" if rule.force_new else "")


def _child(rule: Rule, key: str) -> Rule:
    """A block's field decides for itself; a map's (or a plain list's) value replaces when
    the collection is ForceNew."""
    if rule.fields:
        return rule.fields.get(key, FREE)
    return LEAF if rule.force_new else FREE


def _sets_forced(rule: Rule, value: Any) -> bool:
    """Whether a value added or deleted whole sets a ForceNew field. A primitive at its zero
    value (false, 0, "") sets nothing: Terraform's SDK reads an unset primitive as its zero
    value (helper/schema ResourceData.Get), so no diff, no replacement."""
    if _absent(value) or value is False or value == 0 or value == "":
        return False
    if rule.force_new:
        return True
    if isinstance(value, list):
        return any(_sets_forced(rule, item) for item in value)
    if isinstance(value, dict) and rule.fields:
        return any(_sets_forced(rule.fields.get(key, FREE), item) for key, item in value.items())
    return False


def _absent(value: Any) -> bool:
    """Absent, null or empty: Terraform holds no element either way (a block's count 0)."""
    return value is _ABSENT or value is None or value == [] or value == {}


# Optional+Computed fields: a config that leaves one out keeps the value in the state, no
# diff (Terraform's SDK: an unset Computed attribute takes the prior state's value). They
# matter on import, where the state holds everything the resource's Read set and the program
# names only what it chooses. Same files and commits as RULES above.
COMPUTED: dict[str, dict[str, Any]] = {
    # resource_compute_instance.go: boot_disk.{device_name, source} Computed, mode Default
    # READ_WRITE; initialize_params.{size, type, image} Computed; network_interface.{network,
    # subnetwork, subnetwork_project, network_ip, name, stack_type} Computed, access_config.
    # {nat_ip, network_tier} Computed; scheduling.{on_host_maintenance, provisioning_model}
    # Computed, automatic_restart Default true, preemptible Default false;
    # service_account.email Computed; min_cpu_platform Computed.
    "gcp:compute/instance:Instance": {
        "bootDisk": {"deviceName": True, "source": True, "mode": True,
                     "initializeParams": {"size": True, "type": True, "image": True}},
        "networkInterfaces": {"network": True, "subnetwork": True, "subnetworkProject": True,
                              "networkIp": True, "name": True, "stackType": True,
                              "accessConfigs": {"natIp": True, "networkTier": True}},
        "scheduling": {"onHostMaintenance": True, "automaticRestart": True,
                       "provisioningModel": True, "preemptible": True},
        "serviceAccount": {"email": True},
        "minCpuPlatform": True,
    },
    # resource_google_service_account.go: display_name, description are Optional only; the
    # account's member and email Computed only (outputs).
}


# Fields whose DiffSuppressFunc is tpgresource.CompareSelfLinkOrResourceName: a self link or
# partial URL and the bare name of the same resource are no change (the Read stores the name).
# resource_compute_instance.go: guest_accelerator.type.
NAME_OR_LINK: dict[str, dict[str, Any]] = {
    "gcp:compute/instance:Instance": {"guestAccelerators": {"type": True}},
}


def settled(token: str, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """`new` as Terraform diffs a config against its state: each Optional+Computed field it
    leaves out taken from `old`, and a link to the same resource `old` names by name (or the
    other way round) taken as `old` has it."""
    kept = _apply_rules(COMPUTED.get(token, {}), old, new,
                 lambda was, given: was if given is None else given)
    return _apply_rules(NAME_OR_LINK.get(token, {}), old, kept, _same_resource)


def _same_resource(was: Any, given: Any) -> Any:
    if isinstance(was, str) and isinstance(given, str) \
            and was.rsplit("/", 1)[-1] == given.rsplit("/", 1)[-1]:
        return was
    return given


def _apply_rules(rules: dict[str, Any], old: Any, new: Any,
                 leaf: Callable[[Any, Any], Any]) -> Any:
    """`new` with `leaf(old value, new value)` at each path `rules` names (blocks and lists of
    blocks element by element, when both have as many)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    result = dict(new)
    for name, rule in rules.items():
        if name not in old:
            continue
        given = new.get(name)
        if not isinstance(rule, dict) or given is None:
            value = leaf(old[name], given)
            if value is not None:
                result[name] = value
        elif isinstance(given, list) and isinstance(old[name], list) \
                and len(given) == len(old[name]):
            result[name] = [_apply_rules(rule, o, n, leaf) for o, n in zip(old[name], given,
                                                                     strict=True)]
        elif isinstance(given, dict):
            result[name] = _apply_rules(rule, old[name], given, leaf)
    return result
