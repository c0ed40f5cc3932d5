"""The review's price estimates: a machine type's hourly price (the diff's cost hint), and a
cluster's per hour at its pinned size and at `max_workers`, from the node prices of
`model.prices` (the dated table `model/price_table.yaml`), whose names are importable from here
too; and how old the table is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from model.config import ClusterConfig
from model.price_table import TABLE_FILE
from model.prices import (
    NodePrice,
    machine_price,
    node_type_price,
    price_table,
    region_factor,
)

__all__ = [
    "TABLE_FILE",
    "ClusterPrice",
    "NodePrice",
    "cluster_price",
    "cost_hint",
    "hourly_price",
    "machine_price",
    "node_type_price",
    "price_note",
    "price_table",
    "region_factor",
    "staleness_warning",
    "table_age_days",
]

STALE_AFTER_DAYS = 183  # six months


def table_age_days(today: date | None = None) -> int:
    return ((today or date.today()) - date.fromisoformat(price_table()["as_of"])).days


def staleness_warning(today: date | None = None) -> str | None:
    """A line to show when the table is more than six months old."""
    age = table_age_days(today)
    if age <= STALE_AFTER_DAYS:
        return None
    return (f"warning: the price table ({TABLE_FILE.name}, as of {price_table()['as_of']}) is "
            f"{age // 30} months old: re-check its figures against its sources")


def hourly_price(machine_type: str) -> float | None:
    """On-demand USD per hour of a machine type (None: not in the table)."""
    return machine_price(machine_type)


@dataclass(frozen=True)
class ClusterPrice:
    """USD per hour of the whole cluster at its pinned worker counts and at max_workers."""

    pinned: float
    at_max_workers: float
    unpriced: tuple[str, ...]
    notes: tuple[str, ...]

    def summary(self) -> str:
        floor = "at least " if self.unpriced else ""  # an unpriced part is not free
        text = (f"{floor}${self.pinned:.2f}/h at the pinned size, up to {floor}"
                f"${self.at_max_workers:.2f}/h at max_workers")
        if self.unpriced:
            text += f" (without {', '.join(self.unpriced)}: not in the price table)"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {"pinned": round(self.pinned, 4), "at_max_workers": round(self.at_max_workers, 4),
                "unpriced": list(self.unpriced), "prices_as_of": price_table()["as_of"]}


def cluster_price(config: ClusterConfig, counts: dict[str, int]) -> ClusterPrice:
    """The head plus each worker type at `counts`; and the dearest mix Ray's autoscaler may
    reach: the cluster's max_workers filled with the most expensive types first, each up to its
    own max_workers."""
    region = config.provider.region
    prices = {name: node_type_price(t, region) for name, t in config.available_node_types.items()}
    head = prices[config.head_node_type].running
    pinned = head + sum(prices[name].running * count for name, count in counts.items())
    room, at_max = config.max_workers, head
    for name in sorted(config.worker_types, key=lambda n: -prices[n].running):
        take = min(room, config.available_node_types[name].max_workers or 0)
        at_max += prices[name].running * take
        room -= take
    unpriced = sorted({item for price in prices.values() for item in price.unpriced})
    _, note = region_factor(region)
    return ClusterPrice(pinned, at_max, tuple(unpriced), (note,) if note else ())


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
    table = price_table()
    return (f"Prices are approximate list prices in {table['reference_region']} as of "
            f"{table['as_of']} (model/{TABLE_FILE.name}, region factors applied), without "
            "discounts.")
