"""The `node_config` of a node type: a GCE `instances.insert` body or a TPU v2 node body.

Field names keep the API's camelCase through aliases, so a Ray YAML validates unchanged and
`body()` gives back exactly what the Compute or TPU API takes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

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

from infra.config.errors import PathError


class ApiModel(BaseModel):
    """A piece of a Google API body: camelCase keys, unknown keys reported."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, validate_default=True
    )

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


# ---------------------------------------------------------------- compute (GCE) instances


class InitializeParams(ApiModel):
    disk_size_gb: int | None = Field(default=None, gt=0, alias="diskSizeGb")
    source_image: str | None = None
    disk_type: str | None = None
    disk_name: str | None = None
    labels: dict[str, str] | None = None
    provisioned_iops: int | None = None
    provisioned_throughput: int | None = None


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


class AccessConfig(ApiModel):
    name: str | None = None
    type: Literal["ONE_TO_ONE_NAT", "DIRECT_IPV6"] = "ONE_TO_ONE_NAT"
    nat_i_p: str | None = Field(default=None, alias="natIP")
    network_tier: Literal["PREMIUM", "STANDARD"] | None = None


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
    stack_type: Literal["IPV4_ONLY", "IPV4_IPV6"] | None = None
    nic_type: Literal["GVNIC", "VIRTIO_NET"] | None = None


class GuestAccelerator(ApiModel):
    accelerator_type: str
    accelerator_count: int = Field(default=1, gt=0)


class Scheduling(ApiModel):
    preemptible: bool | None = None
    on_host_maintenance: Literal["MIGRATE", "TERMINATE"] | None = None
    automatic_restart: bool | None = None
    provisioning_model: Literal["STANDARD", "SPOT"] | None = None
    instance_termination_action: Literal["STOP", "DELETE"] | None = None

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


class ComputeNodeConfig(ApiModel):
    """The subset of `instances.insert` that maps onto pulumi-gcp's `compute.Instance`."""

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
    resource_policies: list[str] | None = None

    kind: Literal["compute"] = Field(default="compute", exclude=True)

    _metadata = field_validator("metadata", mode="before")(
        classmethod(lambda cls, v: _metadata_items(v))
    )

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


class AcceleratorConfig(ApiModel):
    type: str
    topology: str

    @field_validator("topology")
    @classmethod
    def _topology_form(cls, value: str) -> str:
        parts = value.lower().split("x")
        if not 2 <= len(parts) <= 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"topology {value!r} must look like 2x2 or 2x2x1")
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

    kind: Literal["tpu"] = Field(default="tpu", exclude=True)

    _metadata = field_validator("metadata", mode="before")(
        classmethod(lambda cls, v: _metadata_items(v))
    )

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
            return self.accelerator_config.type.lower(), self.accelerator_config.chips
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
