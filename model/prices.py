"""Node prices from the dated table `price_table.yaml` beside this module: a machine type's
hourly price, and a node type's (machine, GPUs, TPU chips, disks; spot and preemptible priced
as such) running and stopped. `ops.review.prices` builds the plan's and diff's estimates on
these, `invoke cost` prices each node with them, and the head's spend cap gets them rendered
into its metadata (bootstrap.spend_metadata).

A hint, not a bill. Compute Engine bills predefined machine types as vCPU-hours plus GiB-hours
of memory, so a machine's price is vCPUs x the family's vCPU rate + GiB x its memory rate; the
table holds those rates, the shapes of types not named <family>-<shape>-<vCPUs> and the GPUs
a2/a3/g2 types come with, accelerator and disk prices, region factors, its source and its
date. `model.price_table` reads it, for this module and the policy pack's `policy.prices`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from model.config import ComputeNodeConfig, NodeType, TpuNodeConfig
from model.config.urls import short_name
from model.price_table import bundled_gpus as _bundled_gpus
from model.price_table import load_table, machine_rate

DEFAULT_DISK_GB = 10  # GCE's boot disk size when none is given


def price_table() -> dict[str, Any]:
    return load_table()


def region_factor(region: str) -> tuple[float, str | None]:
    """The region's price factor, and a note when the table has none for it."""
    factors = price_table()["region_factors"]
    if region in factors:
        return float(factors[region]), None
    reference = price_table()["reference_region"]
    return 1.0, f"no price factor for region {region}: priced as {reference}"


def machine_price(machine_type: str, spot: bool = False) -> float | None:
    """USD per hour of a machine type (a URL or short name) in the reference region, GPUs that
    come with it apart (`bundled_gpus`), as model.price_table reckons it; None when the table
    has no price for it."""
    price = machine_rate(price_table(), short_name(machine_type), spot)
    return None if price is None else round(price, 6)


def bundled_gpus(machine_type: str) -> list[tuple[str, int]]:
    """The GPUs a machine type (a URL or short name) comes with (a2, a3, g2): (type, count)."""
    return _bundled_gpus(price_table(), short_name(machine_type))


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
    gpus, kind = price_table()["gpus"], "spot" if spot else "on_demand"
    attached = bundled_gpus(config.machine_type) or [
        (short_name(a.accelerator_type), a.accelerator_count) for a in config.guest_accelerators]
    for name, count in attached:
        if kind not in gpus.get(name, {}):
            price.unpriced.append(name)
            continue
        price.accelerators += round(count * gpus[name][kind] * factor, 6)
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
