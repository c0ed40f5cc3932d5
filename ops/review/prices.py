"""Approximate prices from the dated table `price_table.yaml`: a machine type's hourly price
(the diff's cost hint), a node type's (machine, GPUs, TPU chips, disks; spot and preemptible
priced as such), and a cluster's per hour at its pinned size and at `max_workers`.

A hint, not a bill. Compute Engine bills predefined machine types as vCPU-hours plus GiB-hours
of memory, so a machine's price is vCPUs x the family's vCPU rate + GiB x its memory rate; the
table holds those rates, accelerator and disk prices, region factors, its source and its date.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from infra.config import ClusterConfig, ComputeNodeConfig, NodeType, TpuNodeConfig
from infra.config.urls import short_name

TABLE_FILE = Path(__file__).with_name("price_table.yaml")
STALE_AFTER_DAYS = 183  # six months
DEFAULT_DISK_GB = 10  # GCE's boot disk size when none is given
_PREDEFINED = re.compile(r"^(?P<family>[a-z0-9]+)-(?P<shape>[a-z]+)-(?P<vcpus>\d+)$")
_CUSTOM = re.compile(r"^(?:(?P<family>[a-z0-9]+)-)?custom-(?P<vcpus>\d+)-(?P<mb>\d+)$")


@functools.cache
def price_table() -> dict[str, Any]:
    return yaml.safe_load(TABLE_FILE.read_text())


def table_age_days(today: date | None = None) -> int:
    return ((today or date.today()) - date.fromisoformat(price_table()["as_of"])).days


def staleness_warning(today: date | None = None) -> str | None:
    """A line to show when the table is more than six months old."""
    age = table_age_days(today)
    if age <= STALE_AFTER_DAYS:
        return None
    return (f"warning: the price table ({TABLE_FILE.name}, as of {price_table()['as_of']}) is "
            f"{age // 30} months old: re-check its figures against its sources")


def region_factor(region: str) -> tuple[float, str | None]:
    """The region's price factor, and a note when the table has none for it."""
    factors = price_table()["region_factors"]
    if region in factors:
        return float(factors[region]), None
    reference = price_table()["reference_region"]
    return 1.0, f"no price factor for region {region}: priced as {reference}"


def machine_price(machine_type: str, spot: bool = False) -> float | None:
    """USD per hour of a predefined or custom machine type in the reference region."""
    name = short_name(machine_type)
    families = price_table()["machine_families"]
    if match := _CUSTOM.match(name):
        family, vcpus = match["family"] or "n1", int(match["vcpus"])
        memory = int(match["mb"]) / 1024
    elif (match := _PREDEFINED.match(name)) and (
            per_vcpu := price_table()["machine_shapes"].get(f"{match['family']}-"
                                                             f"{match['shape']}")) is not None:
        family, vcpus = match["family"], int(match["vcpus"])
        memory = vcpus * float(per_vcpu)
    else:
        return None
    rates = families.get(family)
    if rates is None:
        return None
    prefix = "spot_" if spot else ""
    return round(vcpus * rates[f"{prefix}vcpu"] + memory * rates[f"{prefix}gib"], 6)


def hourly_price(machine_type: str) -> float | None:
    """On-demand USD per hour of a machine type (None: not in the table)."""
    return machine_price(machine_type)


@dataclass
class NodePrice:
    """USD per hour of one node of a type, by part; `unpriced` names what the table lacks."""

    machine: float = 0.0
    accelerators: float = 0.0
    disks: float = 0.0
    spot: bool = False
    unpriced: list[str] = field(default_factory=list)

    @property
    def running(self) -> float:
        return self.machine + self.accelerators + self.disks

    @property
    def stopped(self) -> float:
        """A stopped instance still pays for its disks."""
        return self.disks


def node_type_price(node_type: NodeType, region: str, spot: bool | None = None) -> NodePrice:
    """One node of the type; `spot` prices a compute node as spot (True) or on-demand (False)
    whatever its node_config asks, as a node created on-demand in fallback is billed."""
    config = node_type.node_config
    factor, _ = region_factor(region)
    if isinstance(config, TpuNodeConfig):
        return _tpu_price(config, factor)
    return _compute_price(config, factor, config.scheduling.is_preemptible if spot is None
                          else spot)


def _tpu_price(config: TpuNodeConfig, factor: float) -> NodePrice:
    scheduling = config.scheduling_config
    spot = bool(scheduling and (scheduling.spot or scheduling.preemptible))
    chip = price_table()["tpu_chips"].get(config.version)
    if chip is None:
        return NodePrice(spot=spot, unpriced=[f"TPU {config.tpu_type_name}"])
    rate = chip["spot" if spot else "on_demand"]
    return NodePrice(accelerators=round(config.chips * rate * factor, 6), spot=spot)


def _compute_price(config: ComputeNodeConfig, factor: float, spot: bool) -> NodePrice:
    price = NodePrice(spot=spot)
    machine = machine_price(config.machine_type, spot)
    if machine is None:
        price.unpriced.append(short_name(config.machine_type))
    else:
        price.machine = round(machine * factor, 6)
    gpus = price_table()["gpus"]
    for accelerator in config.guest_accelerators:
        name = short_name(accelerator.accelerator_type)
        if name not in gpus:
            price.unpriced.append(name)
            continue
        rate = gpus[name]["spot" if spot else "on_demand"]
        price.accelerators += round(accelerator.accelerator_count * rate * factor, 6)
    disks, per_month = price_table()["disks"], price_table()["hours_per_month"]
    for disk in config.disks or []:
        params = disk.initialize_params
        kind = ("local-ssd" if disk.type == "SCRATCH"
                else short_name(params.disk_type) if params and params.disk_type
                else "pd-standard")
        size = (params.disk_size_gb if params else None) or disk.disk_size_gb or (
            375 if disk.type == "SCRATCH" else DEFAULT_DISK_GB)
        if kind not in disks:
            price.unpriced.append(kind)
            continue
        price.disks += round(size * disks[kind] / per_month * factor, 6)
    if not config.disks:  # GCE gives a 10 GB pd-standard boot disk
        price.disks = round(DEFAULT_DISK_GB * disks["pd-standard"] / per_month * factor, 6)
    return price


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
            f"{table['as_of']} (ops/{TABLE_FILE.name}, region factors applied), without "
            "discounts.")
