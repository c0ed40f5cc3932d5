"""Approximate on-demand prices, so a diff that changes a machine type says what it costs.

A hint, not a bill: list prices in us-central1 (USD per hour, Linux, no sustained-use or
committed-use discounts, no disks, GPUs or TPUs). Other regions cost up to ~20% more.
"""

from __future__ import annotations

PRICES_AS_OF = "2024-06"
PRICE_REGION = "us-central1"

HOURLY_USD: dict[str, float] = {
    "e2-standard-2": 0.0670, "e2-standard-4": 0.1340, "e2-standard-8": 0.2681,
    "e2-standard-16": 0.5361, "e2-standard-32": 1.0721,
    "n1-standard-1": 0.0475, "n1-standard-2": 0.0950, "n1-standard-4": 0.1900,
    "n1-standard-8": 0.3800, "n1-standard-16": 0.7600, "n1-standard-32": 1.5200,
    "n1-standard-64": 3.0400, "n1-standard-96": 4.5600,
    "n1-highmem-2": 0.1183, "n1-highmem-4": 0.2366, "n1-highmem-8": 0.4732,
    "n1-highmem-16": 0.9464,
    "n2-standard-2": 0.0971, "n2-standard-4": 0.1942, "n2-standard-8": 0.3885,
    "n2-standard-16": 0.7769, "n2-standard-32": 1.5539, "n2-standard-64": 3.1078,
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
