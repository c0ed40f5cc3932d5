"""What the fake cloud offers: regions and their zones, machine and accelerator types, quotas.

Answers `zones.list`, `machineTypes.get`, `acceleratorTypes.get` and `regions.get` in the
shapes of compute.v1's discovery document. By default a region has one zone (`<region>-a`),
so a test that wants failover says which zones exist; every zone offers every machine type
and every `nvidia-*` accelerator unless `unoffered` says otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

COMPUTE = "https://www.googleapis.com/compute/v1"
_SHARED_CORE = {"e2-micro": 2, "e2-small": 2, "e2-medium": 2, "f1-micro": 1, "g1-small": 1}
_STANDARD = re.compile(r"^[a-z][a-z0-9]*-[a-z]+(?:gpu)?-(\d+)[a-z]*$")
_CUSTOM = re.compile(r"^(?:[a-z0-9]+-)?custom-(\d+)-(\d+)(?:-ext)?$")


def _generous() -> dict[str, float]:
    metrics = (
        "CPUS",
        "PREEMPTIBLE_CPUS",
        "N2_CPUS",
        "E2_CPUS",
        "INSTANCES",
        "DISKS_TOTAL_GB",
        "SSD_TOTAL_GB",
        "LOCAL_SSD_TOTAL_GB",
        "PREEMPTIBLE_LOCAL_SSD_GB",
        "NVIDIA_T4_GPUS",
        "PREEMPTIBLE_NVIDIA_T4_GPUS",
        "NVIDIA_V100_GPUS",
        "PREEMPTIBLE_NVIDIA_V100_GPUS",
        "NVIDIA_L4_GPUS",
        "PREEMPTIBLE_NVIDIA_L4_GPUS",
    )
    return {metric: 100_000.0 for metric in metrics}


@dataclass
class Catalogue:
    zones: dict[str, list[str]] = field(default_factory=dict)
    """Region -> its zones, in the order zones.list answers; unset regions have `<region>-a`."""
    unoffered: dict[str, set[str]] = field(default_factory=dict)
    """Zone -> machine or accelerator type names (bare) that the zone does not offer."""
    quota_limits: dict[str, float] = field(default_factory=_generous)
    """Metric -> limit, the same in every region; metrics absent here are not listed."""
    quota_usage: dict[str, float] = field(default_factory=dict)
    """Metric -> usage in every region (0 when absent): what other workloads already use."""

    def region_zones(self, region: str) -> list[str]:
        return self.zones.get(region) or [f"{region}-a"]

    def all_zones(self) -> list[tuple[str, str]]:
        """(region, zone) of every region any test named, plus us-west1's default."""
        regions = dict.fromkeys([*self.zones, "us-west1"])
        return [(region, zone) for region in regions for zone in self.region_zones(region)]

    def offers(self, zone: str, type_name: str) -> bool:
        region = zone.rsplit("-", 1)[0]
        return zone in self.region_zones(region) and type_name not in self.unoffered.get(zone, ())

    # ------------------------------------------------------------------ API shapes

    def zone_json(self, project: str, region: str, zone: str) -> dict[str, Any]:
        return {
            "kind": "compute#zone",
            "name": zone,
            "status": "UP",
            "region": f"{COMPUTE}/projects/{project}/regions/{region}",
            "selfLink": f"{COMPUTE}/projects/{project}/zones/{zone}",
        }

    def machine_type_json(self, project: str, zone: str, name: str) -> dict[str, Any] | None:
        cpus = _guest_cpus(name)
        if cpus is None or not self.offers(zone, name):
            return None
        return {
            "kind": "compute#machineType",
            "name": name,
            "guestCpus": cpus,
            "memoryMb": cpus * 3840,
            "isSharedCpu": name in _SHARED_CORE,
            "zone": zone,
            "selfLink": f"{COMPUTE}/projects/{project}/zones/{zone}/machineTypes/{name}",
        }

    def accelerator_type_json(self, project: str, zone: str, name: str) -> dict[str, Any] | None:
        if not name.startswith("nvidia-") or not self.offers(zone, name):
            return None
        return {
            "kind": "compute#acceleratorType",
            "name": name,
            "maximumCardsPerInstance": 8,
            "description": name,
            "zone": f"{COMPUTE}/projects/{project}/zones/{zone}",
            "selfLink": f"{COMPUTE}/projects/{project}/zones/{zone}/acceleratorTypes/{name}",
        }

    def region_json(self, project: str, region: str) -> dict[str, Any]:
        quotas = [
            {"metric": metric, "limit": limit, "usage": self.quota_usage.get(metric, 0.0)}
            for metric, limit in sorted(self.quota_limits.items())
        ]
        return {
            "kind": "compute#region",
            "name": region,
            "status": "UP",
            "quotas": quotas,
            "zones": [f"{COMPUTE}/projects/{project}/zones/{z}" for z in self.region_zones(region)],
            "selfLink": f"{COMPUTE}/projects/{project}/regions/{region}",
        }


def _guest_cpus(name: str) -> int | None:
    if name in _SHARED_CORE:
        return _SHARED_CORE[name]
    for pattern in (_CUSTOM, _STANDARD):
        match = pattern.match(name)
        if match:
            return int(match.group(1))
    return None
