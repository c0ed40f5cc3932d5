"""Approximate on-demand prices, so a diff that changes a machine type says what it costs.

A hint, not a bill: on-demand list prices (USD per hour, Linux, no sustained-use or
committed-use discounts, no disks, GPUs or TPUs). Compute Engine bills these machine types
as vCPU-hours plus GiB-hours of memory, so each price below is vCPUs x the family's vCPU
rate + GiB x its memory rate, from the machine type's published shape.

Source (checked 2026-12-03 through a search index of public pages; no live fetch):
Google's "VM instance pricing" page, https://cloud.google.com/compute/vm-instance-pricing,
Iowa (us-central1); Oregon (us-west1) lists the same rates for these families. Its rate
tables were not in the index, so the rates below come from public restatements of that page
and of the Cloud Billing SKU catalog, which agree with each other: N1 and N2 $0.031611 per
vCPU-hour and $0.004237 per GiB-hour (SKUs "N2 Core" BB77-5FDA-69D9, "N2 Ram"
5B01-D157-A097); E2 $0.021811 per vCPU-hour and $0.002923 per GiB-hour. Per-machine
figures published from the same page reproduce from them (n1-standard-4 $0.1900,
e2-standard-4 $0.134012, n2-standard-2 $0.0971). The table held before this agreed to
within $0.0001/h. Other regions cost up to ~20% more; re-check against the pricing page or
the Cloud Billing Catalog API before relying on a number.
"""

from __future__ import annotations

PRICES_AS_OF = "2026-12"
PRICE_REGION = "us-central1 (us-west1 lists the same)"

# (USD per vCPU-hour, USD per GiB-hour), on-demand.
FAMILY_RATES: dict[str, tuple[float, float]] = {
    "e2": (0.021811, 0.002923),
    "n1": (0.031611, 0.004237),
    "n2": (0.031611, 0.004237),
}
# GiB of memory per vCPU of each predefined shape.
GIB_PER_VCPU: dict[tuple[str, str], float] = {
    ("e2", "standard"): 4.0,
    ("n1", "standard"): 3.75,
    ("n1", "highmem"): 6.5,
    ("n2", "standard"): 4.0,
}
VCPUS: dict[tuple[str, str], tuple[int, ...]] = {
    ("e2", "standard"): (2, 4, 8, 16, 32),
    ("n1", "standard"): (1, 2, 4, 8, 16, 32, 64, 96),
    ("n1", "highmem"): (2, 4, 8, 16),
    ("n2", "standard"): (2, 4, 8, 16, 32, 64),
}


def _machine_price(family: str, shape: str, vcpus: int) -> float:
    cpu_rate, memory_rate = FAMILY_RATES[family]
    return round(vcpus * cpu_rate + vcpus * GIB_PER_VCPU[(family, shape)] * memory_rate, 6)


HOURLY_USD: dict[str, float] = {
    f"{family}-{shape}-{vcpus}": _machine_price(family, shape, vcpus)
    for (family, shape), counts in VCPUS.items()
    for vcpus in counts
}


def hourly_price(machine_type: str) -> float | None:
    return HOURLY_USD.get(machine_type)


def _money(value: float) -> str:
    return f"${value:.2f}/h"


def cost_hint(old_type: str, new_type: str, nodes: int = 1) -> str:
    """`n1-standard-2 $0.10/h -> n1-standard-8 $0.38/h per node (+$0.29/h for 1 node)`, or
    which side has no price known."""
    old, new = hourly_price(old_type), hourly_price(new_type)
    if old is None or new is None:
        unknown = " and ".join(t for t, p in ((old_type, old), (new_type, new)) if p is None)
        return f"no price known for {unknown}"
    delta = (new - old) * nodes
    sign = "+" if delta >= 0 else "-"
    plural = "node" if nodes == 1 else "nodes"
    return (f"{old_type} {_money(old)} -> {new_type} {_money(new)} per node "
            f"({sign}{_money(abs(delta))} for {nodes} {plural})")


def price_note() -> str:
    return (f"Prices are approximate on-demand list prices in {PRICE_REGION} as of "
            f"{PRICES_AS_OF}, without discounts, disks or accelerators.")
