"""The `node_config` of a node type: a GCE `instances.insert` body or a TPU v2 node body.

Field names keep the API's camelCase through aliases, so a Ray YAML validates unchanged and
`body()` gives back exactly what the Compute or TPU API takes.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from model.config.catalog import generation_of_config_type
from model.config.errors import PathError


class ApiModel(BaseModel):
    """A piece of a Google API body: camelCase keys, unknown keys reported.

    `refused` names the keys the API has that we do not take, each with the reason (the
    discovery-document walk in the tests holds every class to it).
    """

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, validate_default=True
    )
    refused: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _refused_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and cls.refused:
            found = [(key, f"{why}: remove it") for key, why in cls.refused.items() if key in data]
            if found:
                raise PathError(found)
        return data

    def body(self) -> dict[str, Any]:
        """The API JSON for this piece, without unset fields."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def _metadata_items(value: Any) -> Any:
    """Accept GCE's `{items: [{key, value}]}` as well as a plain mapping."""
    if isinstance(value, dict) and set(value) <= {"items", "kind", "fingerprint"}:
        items = value.get("items") or []
        if not isinstance(items, list) or not all(
            isinstance(i, dict) and "key" in i for i in items
        ):
            raise ValueError("metadata.items must be a list of {key, value} entries")
        return {str(i["key"]): "" if i.get("value") is None else str(i["value"]) for i in items}
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    return value


_UPDATE_ONLY = "GCE takes it only to update an existing instance, never to create one"
_PLAIN_KEY = (
    "a raw key would sit in plain text in the stack state and in the head's metadata: "
    "use kmsKeyName"
)

def _gce_labels(labels: Any) -> Any:
    """GCE refuses the instance for a bad label: say which one at plan time. Keys start with a
    lowercase letter; keys and values hold lowercase letters, digits, `_` and `-`, 63 at most;
    64 labels at most."""
    if not isinstance(labels, dict):
        return labels
    problems = [
        (str(key), f"{key}: {value} is not a GCE label: keys start with a lowercase letter; "
                   "keys and values use lowercase letters, digits, '_' or '-' (63 at most)")
        for key, value in labels.items()
        if not _label_text(key, key=True) or not _label_text(value, key=False)
    ]
    if len(labels) > 64:
        problems.append(("", f"{len(labels)} labels: GCE allows 64 at most, drop some"))
    if problems:
        raise PathError(problems)
    return labels


def _label_text(text: Any, key: bool) -> bool:
    if not isinstance(text, str) or len(text) > 63 or (key and not text[:1].islower()):
        return False
    return all(c.islower() or c.isdigit() or c in "_-" for c in text)


# ---------------------------------------------------------------- compute (GCE) instances


class Duration(ApiModel):
    seconds: int = Field(ge=0)
    nanos: int | None = None


class CustomerEncryptionKey(ApiModel):
    kms_key_name: str | None = None
    kms_key_service_account: str | None = None

    refused: ClassVar[dict[str, str]] = {"rawKey": _PLAIN_KEY, "rsaEncryptedKey": _PLAIN_KEY}


class InitializeParams(ApiModel):
    disk_size_gb: int | None = Field(default=None, gt=0, alias="diskSizeGb")
    source_image: str | None = None
    source_image_encryption_key: CustomerEncryptionKey | None = None
    source_snapshot: str | None = None
    source_snapshot_encryption_key: CustomerEncryptionKey | None = None
    disk_type: str | None = None
    disk_name: str | None = None
    description: str | None = None
    labels: dict[str, str] | None = None
    provisioned_iops: int | None = None
    provisioned_throughput: int | None = None
    architecture: str | None = None
    enable_confidential_compute: bool | None = None
    licenses: list[str] | None = None
    on_update_action: str | None = None
    replica_zones: list[str] | None = None
    resource_manager_tags: dict[str, str] | None = None
    resource_policies: list[str] | None = None
    storage_pool: str | None = None


class GuestOsFeature(ApiModel):
    type: str


class AttachedDisk(ApiModel):
    boot: bool = False
    auto_delete: bool | None = None
    type: Literal["PERSISTENT", "SCRATCH"] = "PERSISTENT"
    mode: Literal["READ_WRITE", "READ_ONLY"] | None = None
    device_name: str | None = None
    interface: Literal["SCSI", "NVME"] | None = None
    source: str | None = None
    initialize_params: InitializeParams | None = None
    disk_size_gb: int | None = Field(default=None, gt=0, alias="diskSizeGb")
    disk_encryption_key: CustomerEncryptionKey | None = None
    force_attach: bool | None = None
    guest_os_features: list[GuestOsFeature] | None = None


NetworkTier = Literal["PREMIUM", "STANDARD", "FIXED_STANDARD", "STANDARD_OVERRIDES_FIXED_STANDARD"]


class AccessConfig(ApiModel):
    """One entry of `accessConfigs`: an external IPv4 address."""

    name: str | None = None
    type: Literal["ONE_TO_ONE_NAT", "DIRECT_IPV6"] = "ONE_TO_ONE_NAT"
    nat_i_p: str | None = Field(default=None, alias="natIP")
    network_tier: NetworkTier | None = None
    external_ipv6: str | None = None
    external_ipv6_prefix_length: int | None = None
    public_ptr_domain_name: str | None = None
    set_public_ptr: bool | None = None
    security_policy: str | None = None
    ip_collection: str | None = None  # a PublicDelegatedPrefix (BYOIP)


class Ipv6AccessConfig(AccessConfig):
    """One entry of `ipv6AccessConfigs` (the same API type, another default)."""

    type: Literal["ONE_TO_ONE_NAT", "DIRECT_IPV6"] = "DIRECT_IPV6"


class AliasIpRange(ApiModel):
    ip_cidr_range: str
    subnetwork_range_name: str | None = None


class NetworkInterface(ApiModel):
    kind: str | None = None
    network: str | None = None
    subnetwork: str | None = None
    network_i_p: str | None = Field(default=None, alias="networkIP")
    access_configs: list[AccessConfig] | None = None
    alias_ip_ranges: list[AliasIpRange] | None = None
    stack_type: Literal["IPV4_ONLY", "IPV4_IPV6", "IPV6_ONLY"] | None = None
    nic_type: Literal["GVNIC", "VIRTIO_NET", "IDPF", "IRDMA", "MRDMA"] | None = None
    queue_count: int | None = Field(default=None, gt=0)
    ipv6_access_configs: list[Ipv6AccessConfig] | None = None
    ipv6_address: str | None = None
    internal_ipv6_prefix_length: int | None = None
    alias_ipv6_ranges: list[AliasIpRange] | None = None
    enable_vpc_scoped_dns: bool | None = None
    igmp_query: str | None = None
    network_attachment: str | None = None
    parent_nic_name: str | None = None
    service_class_id: str | None = None
    vlan: int | None = None

    refused: ClassVar[dict[str, str]] = {"fingerprint": _UPDATE_ONLY}


class GuestAccelerator(ApiModel):
    accelerator_type: str
    accelerator_count: int = Field(default=1, gt=0)


class NodeAffinity(ApiModel):
    key: str
    operator: Literal["IN", "NOT_IN"]
    values: list[str] = Field(default_factory=list)


class GracefulShutdown(ApiModel):
    enabled: bool | None = None
    max_duration: Duration | None = None


class OnInstanceStopAction(ApiModel):
    discard_local_ssd: bool | None = None


class Scheduling(ApiModel):
    preemptible: bool | None = None
    on_host_maintenance: Literal["MIGRATE", "TERMINATE"] | None = None
    automatic_restart: bool | None = None
    provisioning_model: Literal["STANDARD", "SPOT", "FLEX_START", "RESERVATION_BOUND"] | None = None
    instance_termination_action: Literal["STOP", "DELETE"] | None = None
    max_run_duration: Duration | None = None
    termination_time: str | None = None
    node_affinities: list[NodeAffinity] | None = None
    local_ssd_recovery_timeout: Duration | None = None
    min_node_cpus: int | None = None
    availability_domain: int | None = None
    host_error_timeout_seconds: int | None = None
    graceful_shutdown: GracefulShutdown | None = None
    on_instance_stop_action: OnInstanceStopAction | None = None
    preemption_notice_duration: Duration | None = None
    skip_guest_os_shutdown: bool | None = None
    location_hint: str | None = None
    expose_host_topology: bool | None = None
    protection_tier: Literal["PROTECTION_TIER_CAPACITY_OPTIMIZED", "PROTECTION_TIER_STANDARD",
                             "PROTECTION_TIER_UNSPECIFIED"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _merge_list_form(cls, value: Any) -> Any:
        """Ray's examples write scheduling as a list of one-key maps; GCE takes one object."""
        if isinstance(value, list):
            merged: dict[str, Any] = {}
            for entry in value:
                if not isinstance(entry, dict):
                    raise ValueError("scheduling entries must be maps such as {preemptible: true}")
                merged.update(entry)
            return merged
        return value

    @property
    def is_preemptible(self) -> bool:
        return bool(self.preemptible) or self.provisioning_model == "SPOT"


class ServiceAccount(ApiModel):
    email: str
    scopes: list[str] = Field(
        default_factory=lambda: ["https://www.googleapis.com/auth/cloud-platform"]
    )


class ShieldedInstanceConfig(ApiModel):
    enable_secure_boot: bool | None = None
    enable_vtpm: bool | None = None
    enable_integrity_monitoring: bool | None = None


class ShieldedInstanceIntegrityPolicy(ApiModel):
    update_auto_learn_policy: bool | None = None


class ReservationAffinity(ApiModel):
    consume_reservation_type: Literal["ANY_RESERVATION", "NO_RESERVATION", "SPECIFIC_RESERVATION"]
    key: str | None = None
    values: list[str] | None = None


class AdvancedMachineFeatures(ApiModel):
    enable_nested_virtualization: bool | None = None
    enable_uefi_networking: bool | None = None
    performance_monitoring_unit: str | None = None
    threads_per_core: int | None = None
    turbo_mode: str | None = None
    visible_core_count: int | None = None


class ConfidentialParavisorConfig(ApiModel):
    confidential_tpm_type: Literal["CONFIDENTIAL_TPM_TYPE_UNSPECIFIED", "EPHEMERAL",
                                   "NO_CC_TPM"] | None = None
    sev_snp_irq_mode: Literal["RESTRICTED", "SEV_SNP_IRQ_MODE_UNSPECIFIED",
                              "UNRESTRICTED"] | None = None


class ConfidentialInstanceConfig(ApiModel):
    confidential_instance_type: str | None = None
    enable_confidential_compute: bool | None = None
    confidential_paravisor_config: ConfidentialParavisorConfig | None = None


class NetworkPerformanceConfig(ApiModel):
    total_egress_bandwidth_tier: Literal["DEFAULT", "TIER_1"]


class DisplayDevice(ApiModel):
    enable_display: bool


class InstanceParams(ApiModel):
    resource_manager_tags: dict[str, str] | None = None
    request_valid_for_duration: Duration | None = None


class WorkloadIdentityConfig(ApiModel):
    identity: str | None = None
    identity_certificate_enabled: bool | None = None
    identity_type: Literal["AGENT_IDENTITY", "IDENTITY_TYPE_UNSPECIFIED",
                           "SERVICE_ACCOUNT"] | None = None


class ComputeNodeConfig(ApiModel):
    """The `instances.insert` body: every field GCE takes at creation but the few in
    `refused`. Workers send it as written; the head maps it onto pulumi-gcp's
    `compute.Instance` (model/config/head_instance.py lists what that cannot express)."""

    machine_type: str
    disks: list[AttachedDisk] = Field(default_factory=list)
    network_interfaces: list[NetworkInterface] | None = None
    guest_accelerators: list[GuestAccelerator] = Field(default_factory=list)
    metadata: dict[str, str] = Field(default_factory=dict)
    scheduling: Scheduling = Field(default_factory=Scheduling)
    service_accounts: list[ServiceAccount] | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    min_cpu_platform: str | None = None
    can_ip_forward: bool | None = None
    deletion_protection: bool | None = None
    description: str | None = None
    shielded_instance_config: ShieldedInstanceConfig | None = None
    shielded_instance_integrity_policy: ShieldedInstanceIntegrityPolicy | None = None
    resource_policies: list[str] | None = None
    reservation_affinity: ReservationAffinity | None = None
    advanced_machine_features: AdvancedMachineFeatures | None = None
    confidential_instance_config: ConfidentialInstanceConfig | None = None
    network_performance_config: NetworkPerformanceConfig | None = None
    display_device: DisplayDevice | None = None
    hostname: str | None = None
    key_revocation_action_type: Literal["NONE", "STOP"] | None = None
    instance_encryption_key: CustomerEncryptionKey | None = None
    params: InstanceParams | None = None
    private_ipv6_google_access: str | None = None
    local_ssd_encryption_mode: str | None = None
    source_machine_image: str | None = None
    source_machine_image_encryption_key: CustomerEncryptionKey | None = None
    workload_identity_config: WorkloadIdentityConfig | None = None

    kind: Literal["compute"] = Field(default="compute", exclude=True)

    refused: ClassVar[dict[str, str]] = {
        "name": "the plan names every node (ray-<cluster>-<role>-<hash>-compute): remove name",
        "zone": "every node runs in provider.availability_zone",
        "fingerprint": _UPDATE_ONLY,
        "labelFingerprint": _UPDATE_ONLY,
        "resourceStatus": "GCE reports it about a running instance",
    }

    _metadata = field_validator("metadata", mode="before")(
        classmethod(lambda cls, v: _metadata_items(v))
    )
    _labels = field_validator("labels", mode="before")(classmethod(lambda cls, v: _gce_labels(v)))

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_items(cls, value: Any) -> Any:
        """GCE writes tags as `{items: [...]}`; a plain list is accepted too."""
        if isinstance(value, dict) and "items" in value:
            return value["items"] or []
        return value

    @model_validator(mode="after")
    def _one_boot_disk(self) -> ComputeNodeConfig:
        boots = [d for d in self.disks if d.boot]
        if self.disks and len(boots) != 1:
            raise PathError([("disks", "exactly one disk must have boot: true")])
        return self

    @property
    def boot_disk(self) -> AttachedDisk | None:
        return next((d for d in self.disks if d.boot), None)

    @property
    def has_gpu(self) -> bool:
        return bool(self.guest_accelerators)

    def body(self) -> dict[str, Any]:
        """The `instances.insert` body, with metadata and tags in GCE's item form."""
        data = super().body()
        data["metadata"] = {"items": [{"key": k, "value": v} for k, v in self.metadata.items()]}
        data["tags"] = {"items": list(self.tags)}
        return data


# ---------------------------------------------------------------- TPU VMs


# Digits are ASCII digits: str.isdigit() also takes '²' and '٣', which int() refuses.
_TOPOLOGY = re.compile(r"[1-9][0-9]{0,2}([xX][1-9][0-9]{0,2}){1,2}", re.ASCII)
_TPU_ACCELERATOR_TYPE = re.compile(r"[a-zA-Z0-9]+-[1-9][0-9]{0,5}", re.ASCII)


class AcceleratorConfig(ApiModel):
    type: str
    topology: str

    @field_validator("topology")
    @classmethod
    def _topology_form(cls, value: str) -> str:
        if not _TOPOLOGY.fullmatch(value):
            raise ValueError(f"topology {value!r} must look like 2x2 or 2x2x1 (two or three "
                             "dimensions from 1 to 999, in ASCII digits)")
        return value.lower()

    @property
    def chips(self) -> int:
        count = 1
        for part in self.topology.split("x"):
            count *= int(part)
        return count


class TpuSchedulingConfig(ApiModel):
    preemptible: bool | None = None
    reserved: bool | None = None
    spot: bool | None = None


class TpuNetworkConfig(ApiModel):
    network: str | None = None
    subnetwork: str | None = None
    enable_external_ips: bool | None = None
    can_ip_forward: bool | None = None
    queue_count: int | None = None


class TpuServiceAccount(ApiModel):
    email: str
    scope: list[str] = Field(
        default_factory=lambda: ["https://www.googleapis.com/auth/cloud-platform"]
    )


class TpuDataDisk(ApiModel):
    source_disk: str
    mode: Literal["READ_WRITE", "READ_ONLY"] | None = None


class TpuShieldedInstanceConfig(ApiModel):
    enable_secure_boot: bool | None = None


class TpuNodeConfig(ApiModel):
    """The TPU v2 node body (`projects.locations.nodes.create`)."""

    accelerator_type: str | None = None
    accelerator_config: AcceleratorConfig | None = None
    runtime_version: str
    scheduling_config: TpuSchedulingConfig | None = None
    network_config: TpuNetworkConfig | None = None
    service_account: TpuServiceAccount | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    data_disks: list[TpuDataDisk] | None = None
    description: str | None = None
    cidr_block: str | None = None
    machine_type: str | None = None
    shielded_instance_config: TpuShieldedInstanceConfig | None = None

    kind: Literal["tpu"] = Field(default="tpu", exclude=True)

    refused: ClassVar[dict[str, str]] = {
        "networkConfigs": "every node of the cluster joins one network: use networkConfig",
        "health": "the TPU service reports it",
        # Queued TPU requests go through google-cloud-tpu's `tpu_v2` messages, which lag the
        # discovery document by this field.
        "bootDiskConfig": "the google-cloud-tpu client TPU requests are sent with has no such "
                          "field",
    }

    _metadata = field_validator("metadata", mode="before")(
        classmethod(lambda cls, v: _metadata_items(v))
    )
    _labels = field_validator("labels", mode="before")(classmethod(lambda cls, v: _gce_labels(v)))

    @field_validator("accelerator_type")
    @classmethod
    def _accelerator_type_form(cls, value: str | None) -> str | None:
        if value is not None and not _TPU_ACCELERATOR_TYPE.fullmatch(value):
            raise ValueError(f"{value!r} is not a TPU accelerator type: write the generation, "
                             "'-' and the size in ASCII digits, e.g. v4-16 or v5litepod-8")
        return value

    @model_validator(mode="after")
    def _one_accelerator_form(self) -> TpuNodeConfig:
        problems = []
        if self.machine_type is not None:
            problems.append(
                (
                    "machineType",
                    "a TPU node type has no machineType: remove it "
                    "(the TPU's acceleratorType or acceleratorConfig sets the hardware)",
                )
            )
        if (self.accelerator_type is None) == (self.accelerator_config is None):
            problems.append(
                (
                    "acceleratorType",
                    "set exactly one of acceleratorType (e.g. v4-16) and "
                    "acceleratorConfig (e.g. {type: V4, topology: 2x2x1})",
                )
            )
        if problems:
            raise PathError(problems)
        return self

    def _version_and_chips(self) -> tuple[str, int]:
        if self.accelerator_config is not None:
            config_type = self.accelerator_config.type
            generation = generation_of_config_type(config_type) or config_type.lower()
            return generation, self.accelerator_config.chips
        version, _, size = (self.accelerator_type or "").partition("-")
        count = int(size) if size.isdigit() else 1
        # v2-v4 and v5p name slices by TensorCores (2 per chip); v5e/v6e by chips.
        return version, max(count // _CORES_PER_CHIP.get(version, 1), 1)

    @property
    def version(self) -> str:
        """`v4`, `v5litepod`: the chip generation, which sets the price of a chip."""
        return self._version_and_chips()[0]

    @property
    def chips(self) -> int:
        """The slice's chips: what Cloud TPU bills by."""
        return self._version_and_chips()[1]

    @property
    def hosts(self) -> int:
        """How many VMs the TPU slice has (4 chips a host): every host runs the same program."""
        _, chips = self._version_and_chips()
        return max(chips // _CHIPS_PER_HOST, 1)

    @property
    def tpu_type_name(self) -> str:
        """`v4-16`, or `v4-8` for `{type: V4, topology: 2x2x1}` (Ray's TPU-<type>-head name)."""
        if self.accelerator_type is not None:
            return self.accelerator_type
        version, chips = self._version_and_chips()
        return f"{version}-{chips * _CORES_PER_CHIP.get(version, 1)}"


_CORES_PER_CHIP = {"v2": 2, "v3": 2, "v4": 2, "v5p": 2}
_CHIPS_PER_HOST = 4


def _node_config_kind(value: Any) -> str:
    if isinstance(value, dict):
        tpu_keys = {
            "acceleratorType",
            "acceleratorConfig",
            "accelerator_type",
            "accelerator_config",
            "runtimeVersion",
            "runtime_version",
        }
        return "tpu" if tpu_keys & set(value) else "compute"
    return getattr(value, "kind", "compute")


NodeConfig = Annotated[
    Annotated[ComputeNodeConfig, Tag("compute")] | Annotated[TpuNodeConfig, Tag("tpu")],
    Discriminator(_node_config_kind),
]
