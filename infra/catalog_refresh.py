"""`invoke catalog-refresh`: rebuild the catalog (`model/config/catalog.yaml`) and the
price table (`model/price_table.yaml`) from Google's live APIs, with the caller's credentials.

Reads Compute v1 `regions.list`, `machineTypes.aggregatedList` and
`acceleratorTypes.aggregatedList`, the TPU v2 API's `locations.list` and, per zone,
`acceleratorTypes.list`, and the Cloud Billing Catalog's Compute Engine SKUs
(`services/6F81-5844-456A/skus`), following every page as Google pages them (`nextPageToken`).
The curated parts no API lists (custom-shape rules, GPU counts per series, TPU aliases, disk
prices, region factors, TPU chip prices) are kept from the files as they are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Protocol

import yaml

from model.config.catalog import CATALOG_FILE
from model.price_table import TABLE_FILE as PRICE_FILE

COMPUTE_ROOT = "https://compute.googleapis.com/compute/v1"
TPU_ROOT = "https://tpu.googleapis.com/v2"
BILLING_ROOT = "https://cloudbilling.googleapis.com/v1"
COMPUTE_SERVICE = "services/6F81-5844-456A"
PAGE_SIZE = 500
_PREDEFINED = re.compile(r"(?P<series>[a-z][a-z0-9]*)-(?P<shape>[a-z]+)-(?P<vcpus>[0-9]+)")
_CORE_OR_RAM = re.compile(
    r"(?:Spot Preemptible )?(?:(?P<family>[A-Z][0-9]+[A-Z]?)(?: AMD| Arm)?"
    r"(?: Predefined)? Instance|(?P<c2>Compute optimized)) (?P<part>Core|Ram) running in")
_GPU = re.compile(r"(?:Spot Preemptible )?(?P<gpu>Nvidia [A-Za-z0-9 ]+?) GPU"
                  r"(?: attached to Spot Preemptible VMs)? running in")
_USAGE = {"OnDemand": "", "Preemptible": "spot_"}
HEADER = """\
# What Google Cloud offers, for the offline checks of a cluster YAML (model/config/catalog.py).
# Written by `invoke catalog-refresh` (infra/catalog_refresh.py) from the live APIs named
# in `sources`; `custom`, `gpus.*.counts` and `tpus.*.also_called` are curated and kept as they
# were. Prices live beside it in model/price_table.yaml.
"""


PRICE_HEADER = """\
# Approximate Google Cloud list prices, USD, Linux, no sustained-use or committed-use discounts:
# a hint, not a bill (model/prices.py, policy/prices.py). Rates per vCPU-hour and GiB-hour by
# family, GPU-hours, TPU chip-hours, disk GB-months, region factors; `as_of` and `source` say
# when and whence. Written by `invoke catalog-refresh` (infra/catalog_refresh.py).
"""


class CatalogRefreshError(Exception):
    """No credentials, or an API refused a read: one line with the fix."""


class Getter(Protocol):
    """GETs a URL with query parameters and returns the decoded JSON (an authorized session)."""

    def __call__(self, url: str, params: dict[str, Any]) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Roots:
    """Where the APIs are, and how many items a page asks for."""

    compute: str = COMPUTE_ROOT
    tpu: str = TPU_ROOT
    billing: str = BILLING_ROOT
    page_size: int = PAGE_SIZE


def pages(get: Getter, url: str, size_key: str, items_key: str,
          page_size: int = PAGE_SIZE) -> Iterator[Any]:
    """Every item of a list method, page after page; `items` of an aggregatedList is a map
    (scope -> {items_key: [...]} or a warning), flattened here to (scope, item)."""
    token = ""
    while True:
        params: dict[str, Any] = {size_key: page_size}
        if token:
            params["pageToken"] = token
        answer = get(url, params)
        items = answer.get(items_key if items_key != "aggregated" else "items") or []
        if isinstance(items, dict):
            for scope, scoped in items.items():
                for key, listed in scoped.items():
                    if key != "warning":
                        yield from ((scope, item) for item in listed)
        else:
            yield from items
        token = answer.get("nextPageToken") or ""
        if not token:
            return


def read_compute(get: Getter, project: str, roots: Roots) -> dict[str, Any]:
    base = f"{roots.compute}/projects/{project}"
    regions = {
        region["name"]: sorted(zone.rsplit("/", 1)[-1].removeprefix(f"{region['name']}-")
                               for zone in region.get("zones", []))
        for region in pages(get, f"{base}/regions", "maxResults", "items", roots.page_size)
    }
    machine_types = {item["name"]: item for _, item in
                     pages(get, f"{base}/aggregated/machineTypes", "maxResults", "aggregated",
                           roots.page_size)}
    accelerators: dict[str, int] = {}
    listed = pages(get, f"{base}/aggregated/acceleratorTypes", "maxResults", "aggregated",
                   roots.page_size)
    for _, item in listed:
        accelerators[item["name"]] = max(accelerators.get(item["name"], 0),
                                         int(item.get("maximumCardsPerInstance") or 0))
    return {"regions": dict(sorted(regions.items())), "machine_types": machine_types,
            "accelerators": accelerators}


def read_tpus(get: Getter, project: str, roots: Roots) -> dict[str, list[dict[str, Any]]]:
    """Zone -> its TPU accelerator types."""
    base = f"{roots.tpu}/projects/{project}/locations"
    zones = [location["locationId"]
             for location in pages(get, base, "pageSize", "locations", roots.page_size)]
    return {zone: list(pages(get, f"{base}/{zone}/acceleratorTypes", "pageSize",
                             "acceleratorTypes", roots.page_size))
            for zone in zones}


def read_skus(get: Getter, roots: Roots) -> list[dict[str, Any]]:
    return list(pages(get, f"{roots.billing}/{COMPUTE_SERVICE}/skus", "pageSize", "skus",
                      roots.page_size))


def build_catalog(old: dict[str, Any], compute: dict[str, Any],
                  tpus: dict[str, list[dict[str, Any]]], today: str) -> dict[str, Any]:
    series: dict[str, dict[str, Any]] = {}
    for name, item in sorted(compute["machine_types"].items(), key=lambda kv: _natural(kv[0])):
        family = name.split("-", 1)[0]
        facts = series.setdefault(family, {})
        bundled = item.get("accelerators") or []
        match = _PREDEFINED.fullmatch(name)
        if bundled:
            facts.setdefault("bundled", {})[name] = [bundled[0]["guestAcceleratorType"],
                                                     int(bundled[0]["guestAcceleratorCount"])]
        elif match:
            facts.setdefault("shapes", {}).setdefault(match["shape"], []).append(
                int(match["vcpus"]))
        else:
            facts.setdefault("named", []).append(name)
    for family, facts in series.items():
        curated = (old.get("machine_series") or {}).get(family) or {}
        if "custom" in curated:
            facts["custom"] = curated["custom"]
    old_gpus = old.get("gpus") or {}
    gpus: dict[str, dict[str, Any]] = {}
    for name, most in sorted(compute["accelerators"].items()):
        gpus[name] = {"max_per_vm": most}
        if "counts" in old_gpus.get(name, {}):
            gpus[name]["counts"] = old_gpus[name]["counts"]
    return {
        "as_of": today,
        "generated_by": "invoke catalog-refresh (infra/catalog_refresh.py)",
        "sources": {
            "regions": "Compute Engine API v1 regions.list",
            "machine_series": "Compute Engine API v1 machineTypes.aggregatedList",
            "gpus": "Compute Engine API v1 acceleratorTypes.aggregatedList",
            "tpus": "Cloud TPU API v2 locations.list and acceleratorTypes.list",
            "custom": (old.get("sources") or {}).get("custom", "curated"),
        },
        "regions": compute["regions"],
        "machine_series": series,
        "gpus": gpus,
        "tpus": _build_tpus(old.get("tpus") or {}, tpus),
    }


def _build_tpus(old: dict[str, Any], zones: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    found: dict[str, dict[str, Any]] = {}
    for zone, types in sorted(zones.items()):
        for item in types:
            generation, _, size = item["type"].partition("-")
            config = (item.get("acceleratorConfigs") or [{}])[0]
            dims = [int(d) for d in str(config.get("topology", "1x1")).lower().split("x")]
            facts = found.setdefault(generation, {
                "config_type": config.get("type", generation.upper()),
                "cores_per_chip": max(int(size) // math.prod(dims), 1),
                "dimensions": len(dims), "sizes": set(), "zones": set()})
            facts["sizes"].add(int(size))
            facts["zones"].add(zone)
    result = {}
    for generation, facts in sorted(found.items()):
        entry = {**facts, "sizes": sorted(facts["sizes"]), "zones": sorted(facts["zones"])}
        if "also_called" in old.get(generation, {}):
            entry["also_called"] = old[generation]["also_called"]
        result[generation] = entry
    return result


def _natural(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"([0-9]+)", name)]


def build_prices(old: dict[str, Any], skus: list[dict[str, Any]], gpu_names: list[str],
                 today: str) -> dict[str, Any]:
    """The price table with each family's vCPU/GiB rates and each GPU's hourly price in the
    reference region replaced by the SKUs' (the rest kept)."""
    region = old["reference_region"]
    families = {k: dict(v) for k, v in old["machine_families"].items()}
    gpus = {k: dict(v) for k, v in old["gpus"].items()}
    for sku in skus:
        usage = _USAGE.get((sku.get("category") or {}).get("usageType", ""))
        price = _hourly(sku)
        if usage is None or price is None or region not in sku.get("serviceRegions", []):
            continue  # commitments, other regions, other units
        description = sku.get("description", "")
        if match := _CORE_OR_RAM.match(description):
            family = "c2" if match["c2"] else match["family"].lower()
            key = usage + ("vcpu" if match["part"] == "Core" else "gib")
            families.setdefault(family, {})[key] = price
        elif (match := _GPU.match(description)) and (
                name := _gpu_name(match["gpu"], gpu_names)):
            gpus.setdefault(name, {})["spot" if usage else "on_demand"] = price
    return {**old, "as_of": today, "machine_families": families, "gpus": gpus,
            "source": f"Cloud Billing Catalog API, {COMPUTE_SERVICE}/skus ({region}), read by "
                      "`invoke catalog-refresh`; TPU chip, disk and region figures as before: "
                      + str(old.get("source", ""))}


def _hourly(sku: dict[str, Any]) -> float | None:
    """The SKU's USD price per hour (per vCPU, GiB or GPU), from its first tier."""
    for info in sku.get("pricingInfo", [])[:1]:
        expression = info.get("pricingExpression", {})
        rates = expression.get("tieredRates") or []
        if expression.get("usageUnit") not in ("h", "GiBy.h") or not rates:
            return None
        unit = rates[-1]["unitPrice"]
        return round(int(unit.get("units") or 0) + int(unit.get("nanos") or 0) / 1e9, 9)
    return None


def _gpu_name(described: str, known: list[str]) -> str | None:
    """`Nvidia Tesla T4` -> nvidia-tesla-t4; `Nvidia Tesla A100 80GB` -> nvidia-a100-80gb."""
    plain = "-".join(described.lower().split())
    for candidate in (plain, plain.replace("-tesla-", "-", 1)):
        if candidate in known:
            return candidate
    return None


def refresh(get: Getter, project: str, roots: Roots = Roots(),
            catalog_file: Path = CATALOG_FILE, price_file: Path = PRICE_FILE,
            today: str | None = None) -> tuple[Path, Path]:
    """Read every API, then write both files (nothing is written when a read fails)."""
    today = today or date.today().isoformat()
    old_catalog = yaml.safe_load(catalog_file.read_text())
    old_prices = yaml.safe_load(price_file.read_text())
    compute = read_compute(get, project, roots)
    tpus = read_tpus(get, project, roots)
    skus = read_skus(get, roots)
    catalog = build_catalog(old_catalog, compute, tpus, today)
    prices = build_prices(old_prices, skus, list(catalog["gpus"]), today)
    catalog_file.write_text(HEADER + yaml.safe_dump(catalog, sort_keys=False, width=96))
    price_file.write_text(PRICE_HEADER + yaml.safe_dump(prices, sort_keys=False, width=96))
    return catalog_file, price_file


def live_getter() -> tuple[Getter, str | None]:
    """GETs with the application-default credentials, and their project (if any)."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError
    from google.auth.transport.requests import AuthorizedSession

    try:
        credentials, project = google.auth.default(
            scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except DefaultCredentialsError:
        raise CatalogRefreshError(
            "no Google application-default credentials: run `gcloud auth application-default "
            "login`, then `invoke catalog-refresh --project PROJECT`") from None
    session = AuthorizedSession(credentials)

    def get(url: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = session.get(url, params=params, timeout=60)
        if answer.status_code != 200:
            raise CatalogRefreshError(
                f"{url} answered {answer.status_code} ({answer.text[:200].strip()}): check that "
                "the project has the Compute, Cloud TPU and Cloud Billing APIs enabled and that "
                "your account may read them")
        return answer.json()

    return get, project
