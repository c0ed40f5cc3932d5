"""What the fake cloud offers: regions and their zones, machine and accelerator types, quotas.

Answers `zones.list`, `machineTypes.get`, `acceleratorTypes.get` and `regions.get` in the
shapes of compute.v1's discovery document, the TPU v2 API's `acceleratorTypes.get`, and the
TPU service's quota limits as Service Usage v1beta1 `consumerQuotaMetrics.list` answers them
(serviceusage.v1beta1.json). By default a region has one zone (`<region>-a`), so a test that
wants failover says which zones exist; every zone offers every machine type, every `nvidia-*`
accelerator and every TPU type unless `unoffered` says otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

COMPUTE = "https://www.googleapis.com/compute/v1"
_SHARED_CORE = {"e2-micro": 2, "e2-small": 2, "e2-medium": 2, "f1-micro": 1, "g1-small": 1}
_STANDARD = re.compile(r"^[a-z][a-z0-9]*-[a-z]+(?:gpu)?-(\d+)[a-z]*$")
_CUSTOM = re.compile(r"^(?:[a-z0-9]+-)?custom-(\d+)-(\d+)(?:-ext)?$")
_TPU_TYPE = re.compile(r"v[0-9][a-z0-9]*-[0-9]+")


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


def _generous_tpu() -> dict[str, float]:
    """TPU metrics as Google names them (tpu.googleapis.com/<name>), each with a default
    per-zone limit; the serving one is there to be told apart from the training one."""
    names = [f"tpu-{gen}{pod}{model}" for gen in ("v2", "v3") for pod in ("", "-pod")
             for model in ("", "-preemptible")]
    names += [f"tpu-{gen}{model}" for gen in ("v4", "v5s-litepod", "v5p", "v6e")
              for model in ("", "-preemptible")]
    return {name: 100_000.0 for name in [*names, "tpu-v5s-litepod-serving"]}


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
    tpu_quota_limits: dict[str, float] = field(default_factory=_generous_tpu)
    """TPU metric (e.g. tpu-v2-preemptible) -> its default limit in every zone (-1: none)."""
    tpu_zone_limits: dict[tuple[str, str], float] = field(default_factory=dict)
    """(TPU metric, zone) -> that zone's own limit, over the default."""
    service_usage_disabled: bool = False
    """Service Usage refuses with 403, as in a project where the API was never enabled."""
    private_google_access: dict[str, bool] = field(default_factory=dict)
    """Region -> whether its `default` subnet has Private Google Access (absent: false, as
    an auto-mode network's subnets are created)."""
    firewalls: list[dict[str, Any]] = field(default_factory=list)
    """Firewall rules as firewalls.list answers them (API JSON, `network` a self-link)."""

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

    def tpu_accelerator_type_json(self, project: str, zone: str,
                                  name: str) -> dict[str, Any] | None:
        """TPU v2 `acceleratorTypes.get`: a `<generation>-<size>` type the zone offers."""
        if not _TPU_TYPE.fullmatch(name) or not self.offers(zone, name):
            return None
        return {"name": f"projects/{project}/locations/{zone}/acceleratorTypes/{name}",
                "type": name}

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

    def subnetwork_json(self, project: str, region: str, name: str) -> dict[str, Any] | None:
        """Every region has one subnet, `default`, of the `default` network (auto mode)."""
        if name != "default":
            return None
        return {
            "kind": "compute#subnetwork",
            "name": name,
            "network": f"{COMPUTE}/projects/{project}/global/networks/default",
            "ipCidrRange": "10.128.0.0/20",
            "region": f"{COMPUTE}/projects/{project}/regions/{region}",
            "privateIpGoogleAccess": self.private_google_access.get(region, False),
            "selfLink": f"{COMPUTE}/projects/{project}/regions/{region}/subnetworks/{name}",
        }

    def consumer_quota_metrics_json(self, project: str, service: str) -> list[dict[str, Any]]:
        """The service's ConsumerQuotaMetrics (BASIC view); only tpu.googleapis.com has any."""
        if service != "tpu.googleapis.com":
            return []
        zones = [zone for _, zone in self.all_zones()]
        unit = "1/{project}/{zone}"
        metrics = []
        for name, default in sorted(self.tpu_quota_limits.items()):
            metric = f"{service}/{name}"
            base = f"projects/{project}/services/{service}/consumerQuotaMetrics/" \
                   f"{quote(metric, safe='')}"
            buckets = [{"effectiveLimit": str(int(default)), "defaultLimit": str(int(default))}]
            buckets += [{"effectiveLimit": str(int(limit)), "defaultLimit": str(int(default)),
                         "dimensions": {"zone": zone}}
                        for (limit_metric, zone), limit in sorted(self.tpu_zone_limits.items())
                        if limit_metric == name]
            metrics.append({
                "name": base, "metric": metric, "displayName": name, "unit": unit,
                "consumerQuotaLimits": [{
                    "name": f"{base}/limits/{quote('/project/zone', safe='')}",
                    "metric": metric, "unit": unit, "isPrecise": True,
                    "supportedLocations": zones, "quotaBuckets": buckets}],
            })
        return metrics


def _guest_cpus(name: str) -> int | None:
    if name in _SHARED_CORE:
        return _SHARED_CORE[name]
    for pattern in (_CUSTOM, _STANDARD):
        match = pattern.match(name)
        if match:
            return int(match.group(1))
    return None
