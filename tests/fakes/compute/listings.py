"""What `invoke catalog-refresh` reads: Compute v1 `regions.list`,
`machineTypes.aggregatedList` and `acceleratorTypes.aggregatedList`, Cloud TPU v2
`locations.list` and `acceleratorTypes.list`, and the Cloud Billing Catalog's
`services.skus.list`, in the shapes of their discovery documents, paged as Google pages them.

Rules kept (each refused as the real API refuses it):
- Compute list methods take `maxResults` from 0 to 500 (default 500) and answer
  `nextPageToken` while more remain; an aggregatedList pages across all scopes and names every
  scope on every page, a scope with nothing on that page holding only a `NO_RESULTS_ON_PAGE`
  warning (https://cloud.google.com/compute/docs/reference/rest/v1/machineTypes/aggregatedList,
  https://cloud.google.com/compute/docs/reference/rest/v1/acceleratorTypes/aggregatedList).
- TPU v2 lists take `pageSize` and `pageToken`
  (https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.acceleratorTypes/list).
- The Billing Catalog takes `pageSize` up to 5000 (default 5000)
  (https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list); an unknown
  service is 404.
- A pageToken the server did not hand out is 400 (every API above).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.compute.cloud import COMPUTE, ApiError

_COMPUTE = r"/compute/v1/projects/(?P<project>[^/]+)"
COMPUTE_SKUS = "6F81-5844-456A"
ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (verb, re.compile(pattern + "$"), "listing." + method)
    for verb, pattern, method in [
        ("GET", _COMPUTE + r"/regions", "regions.list"),
        ("GET", _COMPUTE + r"/aggregated/machineTypes", "machineTypes.aggregatedList"),
        ("GET", _COMPUTE + r"/aggregated/acceleratorTypes", "acceleratorTypes.aggregatedList"),
        ("GET", r"/v2/projects/(?P<project>[^/]+)/locations", "tpu.locations.list"),
        ("GET", r"/v2/projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)/acceleratorTypes",
         "tpu.acceleratorTypes.list"),
        ("GET", r"/v1/services/(?P<service>[^/]+)/skus", "billing.skus.list"),
    ]
]


def _sku(description: str, group: str, usage: str, dollars: float,
         regions: tuple[str, ...] = ("us-central1",), unit: str = "h") -> dict[str, Any]:
    units, nanos = int(dollars), round((dollars - int(dollars)) * 1e9)
    return {
        "name": f"services/{COMPUTE_SKUS}/skus/{abs(hash(description)) % 10**12:012d}",
        "description": description,
        "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                     "resourceGroup": group, "usageType": usage},
        "serviceRegions": list(regions),
        "pricingInfo": [{"pricingExpression": {
            "usageUnit": unit, "displayQuantity": 1,
            "tieredRates": [{"startUsageAmount": 0, "unitPrice": {
                "currencyCode": "USD", "units": str(units), "nanos": nanos}}]}}],
    }


def _default_skus() -> list[dict[str, Any]]:
    return [
        _sku("N2 Instance Core running in Americas", "CPU", "OnDemand", 0.031611),
        _sku("N2 Instance Ram running in Americas", "RAM", "OnDemand", 0.004237, unit="GiBy.h"),
        _sku("Spot Preemptible N2 Instance Core running in Americas", "CPU", "Preemptible",
             0.00768),
        _sku("C3 Instance Core running in Americas", "CPU", "OnDemand", 0.03465),
        _sku("C3 Instance Ram running in Americas", "RAM", "OnDemand", 0.003938, unit="GiBy.h"),
        _sku("Compute optimized Core running in Americas", "CPU", "OnDemand", 0.03398),
        _sku("Nvidia L4 GPU running in Americas", "GPU", "OnDemand", 0.5599),
        _sku("Nvidia L4 GPU attached to Spot Preemptible VMs running in Americas", "GPU",
             "Preemptible", 0.2236),
        _sku("Commitment v1: N2 Cpu in Americas for 1 Year", "CPU", "Commit1Yr", 0.019915),
        _sku("Nvidia Tesla A100 80GB GPU running in Americas", "GPU", "OnDemand", 3.92808),
        _sku("N2 Instance Core running in Belgium", "CPU", "OnDemand", 0.034773,
             regions=("europe-west1",)),
    ]


@dataclass
class Listings:
    regions: dict[str, list[str]] = field(default_factory=lambda: {
        "us-central1": ["a", "b", "c", "f"], "us-central2": ["b"], "us-west1": ["a", "b"]})
    machine_types: dict[str, dict[str, Any]] = field(default_factory=lambda: {
        "e2-medium": {"guestCpus": 2, "memoryMb": 4096, "isSharedCpu": True},
        "n2-standard-8": {"guestCpus": 8, "memoryMb": 32768},
        "n2-standard-16": {"guestCpus": 16, "memoryMb": 65536},
        "c3-standard-4-lssd": {"guestCpus": 4, "memoryMb": 16384},
        "g2-standard-4": {"guestCpus": 4, "memoryMb": 16384, "accelerators": [
            {"guestAcceleratorType": "nvidia-l4", "guestAcceleratorCount": 1}]},
    })
    accelerators: dict[str, int] = field(default_factory=lambda: {
        "nvidia-l4": 8, "nvidia-a100-80gb": 8, "nvidia-tesla-t4": 4})
    tpu_types: dict[str, list[tuple[str, str, str]]] = field(default_factory=lambda: {
        "us-central2-b": [("v4-8", "V4", "2x2x1"), ("v4-16", "V4", "2x2x2")],
        "us-central1-a": [("v5litepod-4", "V5LITE_POD", "2x2"), ("v2-8", "V2", "2x2")],
    })
    skus: list[dict[str, Any]] = field(default_factory=_default_skus)

    def handle(self, method: str, p: dict[str, str], query: dict[str, str], _: Any) -> Any:
        return getattr(self, "_" + method.removeprefix("listing.").replace(".", "_"))(p, query)

    def _zones(self) -> list[tuple[str, str]]:
        return [(region, f"{region}-{letter}") for region, letters in self.regions.items()
                for letter in letters]

    def _regions_list(self, p: dict[str, str], query: dict[str, str]) -> Any:
        items = [{"kind": "compute#region", "name": region, "status": "UP",
                  "zones": [f"{COMPUTE}/projects/{p['project']}/zones/{region}-{letter}"
                            for letter in letters],
                  "selfLink": f"{COMPUTE}/projects/{p['project']}/regions/{region}"}
                 for region, letters in self.regions.items()]
        page, token = list_page(items, query, "maxResults", 500, 500)
        return {"kind": "compute#regionList", "items": page, "nextPageToken": token}

    def _machineTypes_aggregatedList(self, p: dict[str, str], query: dict[str, str]) -> Any:
        pairs = [(zone, {"kind": "compute#machineType", "name": name, "zone": zone, **facts,
                         "selfLink": f"{COMPUTE}/projects/{p['project']}/zones/{zone}/"
                                     f"machineTypes/{name}"})
                 for _, zone in self._zones() for name, facts in self.machine_types.items()]
        return self._aggregated(pairs, query, "machineTypes", "compute#machineTypeAggregatedList")

    def _acceleratorTypes_aggregatedList(self, p: dict[str, str], query: dict[str, str]) -> Any:
        pairs = [(zone, {"kind": "compute#acceleratorType", "name": name, "description": name,
                         "maximumCardsPerInstance": most,
                         "zone": f"{COMPUTE}/projects/{p['project']}/zones/{zone}"})
                 for _, zone in self._zones() for name, most in self.accelerators.items()]
        return self._aggregated(pairs, query, "acceleratorTypes",
                                "compute#acceleratorTypeAggregatedList")

    def _aggregated(self, pairs: list[tuple[str, dict[str, Any]]], query: dict[str, str],
                    key: str, kind: str) -> Any:
        page, token = list_page(pairs, query, "maxResults", 500, 500)
        items: dict[str, Any] = {
            f"zones/{zone}": {"warning": {"code": "NO_RESULTS_ON_PAGE", "message":
                                          "There are no results for scope "
                                          f"'zones/{zone}' on this page."}}
            for _, zone in self._zones()}
        for zone, item in page:
            items[f"zones/{zone}"].pop("warning", None)
            items[f"zones/{zone}"].setdefault(key, []).append(item)
        return {"kind": kind, "items": items, "nextPageToken": token}

    def _tpu_locations_list(self, p: dict[str, str], query: dict[str, str]) -> Any:
        items = [{"name": f"projects/{p['project']}/locations/{zone}", "locationId": zone}
                 for zone in self.tpu_types]
        page, token = list_page(items, query, "pageSize", 100, 10**6)
        return {"locations": page, "nextPageToken": token}

    def _tpu_acceleratorTypes_list(self, p: dict[str, str], query: dict[str, str]) -> Any:
        if p["zone"] not in self.tpu_types:
            raise ApiError(404, f"Location {p['zone']} is not found or access is unauthorized.",
                           "notFound")
        items = [{"name": f"projects/{p['project']}/locations/{p['zone']}/acceleratorTypes/{t}",
                  "type": t, "acceleratorConfigs": [{"type": kind, "topology": topology}]}
                 for t, kind, topology in self.tpu_types[p["zone"]]]
        page, token = list_page(items, query, "pageSize", 100, 10**6)
        return {"acceleratorTypes": page, "nextPageToken": token}

    def _billing_skus_list(self, p: dict[str, str], query: dict[str, str]) -> Any:
        if p["service"] != COMPUTE_SKUS:
            raise ApiError(404, f"Service services/{p['service']} not found", "notFound")
        page, token = list_page(self.skus, query, "pageSize", 5000, 5000)
        return {"skus": page, "nextPageToken": token}


def list_page(items: list[Any], query: dict[str, str], size_key: str, default: int,
          most: int) -> tuple[list[Any], str]:
    size = int(query.get(size_key) or default)
    if not 0 <= size <= most:
        raise ApiError(400, f"Invalid value for field '{size_key}': {size}. Must be between 0 "
                            f"and {most}.", "invalid")
    token = query.get("pageToken") or "0"
    if not token.isdigit() or int(token) > len(items):
        raise ApiError(400, f"Invalid value for field 'pageToken': {token!r}.", "invalid")
    start = int(token)
    size = size or default
    end = start + size
    return items[start:end], str(end) if end < len(items) else ""
