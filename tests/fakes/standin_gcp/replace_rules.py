"""Which input changes replace a resource: the `ForceNew` fields of the Terraform resources
pulumi-gcp bridges (hashicorp/terraform-provider-google-beta, the same schemas as
terraform-provider-google; read at commit 93c65b2d60, file and field cited per entry).

Terraform's SDK (v2) semantics, which the bridge turns into Pulumi's replaces: a `ForceNew`
leaf replaces when its value changes; a `ForceNew` block (a TypeList/TypeSet of a nested
schema) replaces when its number of elements changes, and its own fields decide the rest.
Fields not listed update in place. Keys are pulumi-gcp's wire names (camelCase, lists
pluralised as pulumi-gcp names them).
"""

from __future__ import annotations

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


def replaced_paths(token: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The top-level input names whose change replaces the resource (Pulumi's `replaces`)."""
    rules = RULES.get(token, {})
    return sorted(name for name, rule in rules.items()
                  if _forces(rule, old.get(name, _ABSENT), new.get(name, _ABSENT)))


def _forces(rule: Rule, old: Any, new: Any) -> bool:
    if old is _ABSENT and new is _ABSENT:
        return False
    if not rule.fields:
        return rule.force_new and _value(old) != _value(new)
    olds, news = _elements(old), _elements(new)
    if len(olds) != len(news):
        return rule.force_new
    return any(_forces(child, o.get(name, _ABSENT), n.get(name, _ABSENT))
               for o, n in zip(olds, news, strict=True)
               for name, child in rule.fields.items())


def _elements(value: Any) -> list[dict[str, Any]]:
    """A block as its elements: absent or null is none, an object (MaxItems 1) is one."""
    if value is _ABSENT or value is None:
        return []
    items = value if isinstance(value, list) else [value]
    return [item if isinstance(item, dict) else {} for item in items]


def _value(value: Any) -> Any:
    return None if value is _ABSENT else value
