"""What a resource says about the node(s) it makes, read from its inputs as they are registered:
a `gcp:compute/instance:Instance` (pulumi-gcp names), a `gcp:tpu/v2Vm:V2Vm`, and the dynamic
resources whose `body` is the GCE or Cloud TPU API's own node (a WorkerGroup: `count` nodes;
a QueuedTpuSlice: one slice), so a pinned worker is judged like any other node.

The labels are read only when a rule asks for them (`Node.labels`, `cluster`, `head`): in the
engine's preview of a new stack they are unknown (the launch hash derives from a key not yet
made), and reading an unknown raises pulumi-policy's UnknownValueError, which the engine reports
as that one policy not run in preview; the rules that need no label still judge the node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

INSTANCE_TYPE = "gcp:compute/instance:Instance"
TPU_VM_TYPE = "gcp:tpu/v2Vm:V2Vm"
# The shared dynamic type, and the per-resource ones (pulumi-python:dynamic/ray-gcp:WorkerGroup).
DYNAMIC_PREFIX = "pulumi-python:dynamic"
FIREWALL_TYPE = "gcp:compute/firewall:Firewall"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
# The metadata key naming the Ray token's secret version: the node reads Secret Manager, whose
# only scope is cloud-platform.
RAY_TOKEN_SECRET_KEY = "ray-auth-token-secret"
# v2-v4 and v5p name a slice by TensorCores, two a chip; v5e (v5litepod) and v6e by chips.
CORES_PER_CHIP = {"v2": 2, "v3": 2, "v4": 2, "v5p": 2}


@dataclass(frozen=True)
class Node:
    """One kind of node a resource makes, and how many of it."""

    label_source: Callable[[], Any] = field(compare=False)
    """Reads the node's labels from the inputs (see the module's note on unknowns)."""
    count: int
    zone: str
    machine_type: str = ""  # short name, e.g. n1-standard-2; "" for a TPU slice
    tpu_version: str = ""  # v4, v5litepod; "" for a Compute Engine VM
    tpu_chips: int = 0
    gpus: tuple[tuple[str, int], ...] = ()
    spot: bool = False
    external_ip: bool = False
    scopes: tuple[str, ...] = ()
    reads_secret_manager: bool = False
    """Its metadata names the Ray token's secret: it needs the cloud-platform scope."""
    boot_disk_cmek: bool | None = None  # None: the node has no boot disk of ours (TPU)
    on_demand_fallback: bool = False
    """A WorkerGroup whose spot nodes become on-demand when spot is out (its `capacity`)."""

    @property
    def labels(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in _dict(self.label_source()).items()}

    @property
    def cluster(self) -> str:
        return self.labels.get("ray-cluster-name", "")

    @property
    def head(self) -> bool:
        return self.labels.get("ray-node-type") == "head"

    @property
    def region(self) -> str:
        return self.zone.rsplit("-", 1)[0] if self.zone.count("-") >= 2 else self.zone

    @property
    def family(self) -> str:
        """`n1`, `a2`, or the TPU generation (`v4`)."""
        return self.tpu_version or self.machine_type.split("-", 1)[0]


def short(url: str) -> str:
    return str(url or "").rstrip("/").rsplit("/", 1)[-1]


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    """A list input (pulumi-policy hands the engine's lists over as Sequence proxies)."""
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []


def _scheduling_is_spot(scheduling: Mapping[str, Any]) -> bool:
    return bool(scheduling.get("preemptible") or scheduling.get("spot")
                or scheduling.get("provisioningModel") == "SPOT")


def _scopes(accounts: list[Any]) -> tuple[str, ...]:
    found: list[str] = []
    for account in accounts:
        account = _dict(account)
        found += [str(s) for s in _list(account.get("scopes")) + _list(account.get("scope"))]
    return tuple(found)


def _tpu_version_and_chips(body: Mapping[str, Any]) -> tuple[str, int]:
    config = _dict(body.get("acceleratorConfig"))
    if config:
        chips = 1
        for part in str(config.get("topology", "1")).lower().split("x"):
            chips *= int(part) if part.isdigit() else 1
        return str(config.get("type", "")).lower(), chips
    version, _, size = str(body.get("acceleratorType", "")).partition("-")
    count = int(size) if size.isdigit() else 1
    return version, max(count // CORES_PER_CHIP.get(version, 1), 1)


def _common(body: Mapping[str, Any], zone: Any, count: int) -> dict[str, Any]:
    metadata = body.get("metadata")
    keys = {str(_dict(item).get("key")) for item in _list(_dict(metadata).get("items"))} \
        if "items" in _dict(metadata) else set(_dict(metadata))
    return {"label_source": lambda: body.get("labels"), "count": count,
            "zone": short(str(zone or "")), "reads_secret_manager": RAY_TOKEN_SECRET_KEY in keys}


def _instance(inputs: Mapping[str, Any]) -> Node:
    """pulumi-gcp's Instance: bootDisk.kmsKeySelfLink, serviceAccount.scopes, guestAccelerators
    [{type, count}]."""
    boot = _dict(inputs.get("bootDisk"))
    return Node(
        **_common(inputs, inputs.get("zone"), 1),
        machine_type=short(inputs.get("machineType", "")),
        gpus=tuple((short(g.get("type", "")), int(g.get("count", 0)))
                   for g in map(_dict, _list(inputs.get("guestAccelerators")))),
        spot=_scheduling_is_spot(_dict(inputs.get("scheduling"))),
        external_ip=any(_list(_dict(nic).get("accessConfigs"))
                        for nic in _list(inputs.get("networkInterfaces"))),
        scopes=_scopes([inputs.get("serviceAccount")]),
        boot_disk_cmek=bool(boot.get("kmsKeySelfLink") or boot.get("diskEncryptionKeyRaw")
                            or _dict(boot.get("diskEncryptionKey")).get("kmsKeyName")),
    )


def _gce_body(body: Mapping[str, Any], zone: Any, count: int,
              on_demand_fallback: bool = False) -> Node:
    """The GCE API's instance body a WorkerGroup creates: disks[boot].diskEncryptionKey,
    serviceAccounts[].scopes, guestAccelerators [{acceleratorType, acceleratorCount}]."""
    boot = next((_dict(d) for d in _list(body.get("disks")) if _dict(d).get("boot")), {})
    key = _dict(boot.get("diskEncryptionKey"))
    return Node(
        **_common(body, zone, count),
        machine_type=short(body.get("machineType", "")),
        gpus=tuple((short(g.get("acceleratorType", "")), int(g.get("acceleratorCount", 0)))
                   for g in map(_dict, _list(body.get("guestAccelerators")))),
        spot=_scheduling_is_spot(_dict(body.get("scheduling"))),
        external_ip=any(_list(_dict(nic).get("accessConfigs"))
                        for nic in _list(body.get("networkInterfaces"))),
        scopes=_scopes(_list(body.get("serviceAccounts"))),
        boot_disk_cmek=bool(key.get("kmsKeyName") or key.get("rawKey")),
        on_demand_fallback=on_demand_fallback,
    )


def _tpu(body: Mapping[str, Any], zone: Any) -> Node:
    """A Cloud TPU node, as pulumi-gcp's V2Vm or the TPU API (a QueuedTpuSlice's body)."""
    version, chips = _tpu_version_and_chips(body)
    return Node(
        **_common(body, zone, 1),
        tpu_version=version, tpu_chips=chips,
        spot=_scheduling_is_spot(_dict(body.get("schedulingConfig"))),
        external_ip=bool(_dict(body.get("networkConfig")).get("enableExternalIps")),
        scopes=_scopes([body.get("serviceAccount")]),
    )


def node_of(type_token: str, inputs: Mapping[str, Any]) -> Node | None:
    """The node a resource makes, or None when it makes none."""
    if type_token == INSTANCE_TYPE:
        return _instance(inputs)
    if type_token == TPU_VM_TYPE:
        return _tpu(inputs, inputs.get("zone"))
    if not type_token.startswith(DYNAMIC_PREFIX):
        return None
    count = int(inputs.get("count") or 0) if "count" in inputs else None
    if count == 0:  # a WorkerGroup pinning no node: its body (maybe unknown) does not matter
        return None
    body = inputs.get("body")
    if not isinstance(body, Mapping):
        return None
    if count is not None:  # a WorkerGroup: `count` pinned nodes of this body
        capacity = _dict(inputs.get("capacity"))
        # The short form's fallback, or a capacity ladder with any rung that is not spot.
        ladder = capacity.get("ladder") if isinstance(capacity.get("ladder"), list) else []
        fallback = capacity.get("fallback") == "on-demand" or any(
            _dict(rung).get("market") != "spot" for rung in ladder)
        return _gce_body(body, inputs.get("zone"), count, fallback)
    return _tpu(body, inputs.get("zone"))  # a QueuedTpuSlice
