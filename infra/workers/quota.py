"""Quota pre-flight: what nodes will take from the region's Compute quotas, checked before any
insert, so a short quota is one clear error instead of workers that never arrive.

What a body needs, by `regions.get` metric: INSTANCES; vCPUs (from `machineTypes.get`) under
CPUS, or the family's own metric (N2_CPUS, C2_CPUS, ...) when the region lists it; GPUs by type
(`nvidia-tesla-t4` -> NVIDIA_T4_GPUS); local SSD (LOCAL_SSD_TOTAL_GB, 375 GB a disk); persistent
disks (DISKS_TOTAL_GB for pd-standard, SSD_TOTAL_GB for the SSD-backed types). Preemptible and
spot nodes use the PREEMPTIBLE_ variant where the region grants one (GCE charges them to the
regular quota otherwise). Project-wide quotas (CPUS_ALL_REGIONS, GPUS_ALL_REGIONS) are not
checked; TPU quotas are the TPU service's, not Compute's (tpu_quota.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.workers.clients import ApiClients
from infra.workers.nodes import WorkerGroupError
from infra.workers.retry import RetryPolicy, call_with_retry
from infra.workers.zones import bare

LOCAL_SSD_GB = 375
DEFAULT_DISK_GB = 10
# Families whose vCPUs count against the region's plain CPUS quota.
_PLAIN_CPU_FAMILIES = {"N1", "E2", "F1", "G1", "CUSTOM"}
_SSD_BACKED = {"pd-ssd", "pd-balanced"}

Quotas = Mapping[str, tuple[float, float]]
"""metric -> (limit, usage), as `regions.get` lists them."""


def quota_request_url(project: str) -> str:
    return f"https://console.cloud.google.com/iam-admin/quotas?project={project}"


@dataclass(frozen=True)
class QuotaRow:
    """One metric: what the nodes need against what the region grants."""

    metric: str
    needed: float
    limit: float | None
    """None: the region lists no such quota, so it cannot be checked."""
    usage: float = 0.0
    note: str = ""
    """With no limit: "unknown" or "unlimited" rather than "not listed" ..."""
    why: str = ""
    """... and, for "unknown", why the limit could not be read."""

    @property
    def free(self) -> float | None:
        return None if self.limit is None else max(0.0, self.limit - self.usage)

    @property
    def short(self) -> bool:
        return self.free is not None and self.needed > self.free

    def describe(self) -> str:
        return (
            f"{self.metric} needs {_num(self.needed)}, {_num(self.free or 0)} free "
            f"(limit {_num(self.limit or 0)}, in use {_num(self.usage)})"
        )


class QuotaShortError(WorkerGroupError):
    """The region's quota cannot hold what would be created; nothing was."""


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def gpu_metric(accelerator_type: str) -> str:
    """`nvidia-tesla-t4` -> NVIDIA_T4_GPUS, `nvidia-a100-80gb` -> NVIDIA_A100_80GB_GPUS,
    `nvidia-h100-80gb` -> NVIDIA_H100_GPUS (GCE names H100 quotas without the memory)."""
    name = bare(accelerator_type).removeprefix("nvidia-").removeprefix("tesla-")
    if name.startswith("h100"):
        name = name.removesuffix("-80gb")
    return f"NVIDIA_{name.upper().replace('-', '_')}_GPUS"


def cpu_metric(machine_type: str, quotas: Quotas) -> str:
    family = bare(machine_type).split("-", 1)[0].upper()
    own = f"{family}_CPUS"
    return own if family not in _PLAIN_CPU_FAMILIES and own in quotas else "CPUS"


def is_preemptible(body: Mapping[str, Any]) -> bool:
    scheduling = body.get("scheduling") or {}
    return bool(scheduling.get("preemptible")) or scheduling.get("provisioningModel") == "SPOT"


def body_needs(body: Mapping[str, Any], count: int, guest_cpus: int, quotas: Quotas) -> Counter:
    """What `count` instances of `body` take from each metric."""
    preemptible = is_preemptible(body)

    def metric(regular: str) -> str:
        variant = f"PREEMPTIBLE_{regular}"
        return variant if preemptible and quotas.get(variant, (0.0, 0.0))[0] > 0 else regular

    needs: Counter = Counter({"INSTANCES": count})
    needs[metric(cpu_metric(str(body.get("machineType", "")), quotas))] += guest_cpus * count
    for accelerator in body.get("guestAccelerators") or []:
        gpus = int(accelerator.get("acceleratorCount") or 1)
        needs[metric(gpu_metric(accelerator["acceleratorType"]))] += gpus * count
    for disk in body.get("disks") or []:
        params = disk.get("initializeParams") or {}
        if disk.get("type") == "SCRATCH":
            size = int(disk.get("diskSizeGb") or params.get("diskSizeGb") or LOCAL_SSD_GB)
            local = "PREEMPTIBLE_LOCAL_SSD_GB" if preemptible else "LOCAL_SSD_TOTAL_GB"
            usable = local if quotas.get(local, (0.0, 0.0))[0] > 0 else "LOCAL_SSD_TOTAL_GB"
            needs[usable] += size * count
        elif not disk.get("source"):
            kind = bare(str(params.get("diskType") or "pd-standard"))
            pool = "SSD_TOTAL_GB" if kind in _SSD_BACKED else "DISKS_TOTAL_GB"
            if kind in _SSD_BACKED or kind == "pd-standard":
                needs[pool] += int(params.get("diskSizeGb") or DEFAULT_DISK_GB) * count
    return needs


def quota_rows(needs: Mapping[str, float], quotas: Quotas) -> list[QuotaRow]:
    rows = []
    for metric in sorted(needs):
        limit, usage = quotas.get(metric, (None, 0.0))
        rows.append(QuotaRow(metric, float(needs[metric]), limit, usage))
    return rows


class QuotaReader:
    """`regions.get` quotas and `machineTypes.get` vCPUs, with the usual retries."""

    def __init__(self, project: str, clients: ApiClients, retry: RetryPolicy) -> None:
        self.project, self._clients, self._retry = project, clients, retry

    def region_quotas(self, region: str) -> dict[str, tuple[float, float]]:
        found = call_with_retry(
            lambda: self._clients.compute.call(
                "regions.get", project=self.project, region=region),
            self._retry,
        )
        return {q["metric"]: (float(q.get("limit") or 0), float(q.get("usage") or 0))
                for q in found.get("quotas") or []}

    def guest_cpus(self, zone: str, machine_type: str) -> int:
        found = call_with_retry(
            lambda: self._clients.compute.call(
                "machineTypes.get", project=self.project, zone=zone,
                machineType=bare(machine_type)),
            self._retry,
        )
        return int(found.get("guestCpus") or 0)


def refuse_if_short(rows: list[QuotaRow], project: str, region: str, what: str) -> None:
    """Raise QuotaShortError naming every short quota, what is free and how to get more."""
    short = [row for row in rows if row.short]
    if not short:
        return
    raise QuotaShortError(
        f"not enough quota in region {region} of project {project} for {what}: "
        + "; ".join(row.describe() for row in short)
        + f". Nothing was created. Request more at {quota_request_url(project)} (filter by "
        f"the metric and {region}), or lower the count"
    )
