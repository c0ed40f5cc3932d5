"""The plan per node type, as a reviewer reads it in one glance: role, machine or accelerator
type, zones, count (pinned / max), spot or on-demand (or spot with an on-demand fallback),
boot disk and price per hour, with the cluster's total. A type the price table does not know
is `unknown`, and the total then says "at least": it never passes for free."""

from __future__ import annotations

from typing import Any

from model.config import ClusterConfig, ComputeNodeConfig, TpuNodeConfig
from model.config.urls import short_name
from ops.review.prices import node_type_price

HEADERS = ("NODE TYPE", "ROLE", "MACHINE", "ZONES", "COUNT", "PROVISIONING", "DISK", "PER HOUR")


def node_type_rows(config: ClusterConfig, counts: dict[str, int]) -> list[dict[str, Any]]:
    """One row per node type, the head's first; `price_per_hour` is per node, None when
    unpriced. `counts` are the pinned worker counts."""
    region = config.provider.region
    rows = []
    for name, node_type in config.available_node_types.items():
        head = name == config.head_node_type
        price = node_type_price(node_type, region)
        node_config = node_type.node_config
        rows.append({
            "node_type": name,
            "role": "head" if head else "worker",
            "machine": _machine(node_config),
            "zones": _zones(config, head or isinstance(node_config, TpuNodeConfig)),
            "pinned": 1 if head else counts.get(name, 0),
            "max": 1 if head else node_type.max_workers or 0,
            "spot": price.spot,
            "on_demand_fallback": config.provider.capacity_input(name) is not None,
            "ladder": [rung["market"] for rung in
                       (config.provider.capacity_input(name) or {}).get("ladder", [])],
            "disk": _disk(node_config),
            "price_per_hour": None if price.unpriced else round(price.running, 4),
            "unpriced": list(price.unpriced),
        })
    rows.sort(key=lambda row: (row["role"] != "head", row["node_type"]))
    return rows


def render_node_types(rows: list[dict[str, Any]], price: dict[str, Any]) -> list[str]:
    """The table, then the cluster's total from `price` (the plan's `price_per_hour`): at the
    pinned size and at max_workers, where the cluster's max_workers caps the sum of the types'
    (unpriced types make it a floor)."""
    cells = [HEADERS] + [(
        row["node_type"], row["role"], row["machine"], row["zones"],
        "1" if row["role"] == "head" else f"{row['pinned']} / {row['max']}",
        _provisioning(row), row["disk"],
        "unknown" if row["price_per_hour"] is None else f"${row['price_per_hour']:.2f}",
    ) for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(HEADERS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
             .rstrip() for line in cells]
    unknown = price["unpriced"]
    floor = "at least " if unknown else ""
    lines.append(f"total: {floor}${price['pinned']:.2f}/h at the pinned size, up to {floor}"
                 f"${price['at_max_workers']:.2f}/h at max_workers (approximate, prices as of "
                 f"{price['prices_as_of']})"
                 + (f" (unpriced: {', '.join(unknown)})" if unknown else ""))
    return lines


def _provisioning(row: dict[str, Any]) -> str:
    """`spot`, `on-demand`, or `spot, else on-demand` for a type with the capacity fallback
    (priced as spot: the price it pays while spot lasts); a ladder's markets in order (priced
    as its node_config)."""
    if row.get("ladder"):
        return " > ".join(row["ladder"])
    if not row["spot"]:
        return "on-demand"
    return "spot, else on-demand" if row.get("on_demand_fallback") else "spot"


def _machine(node_config: ComputeNodeConfig | TpuNodeConfig) -> str:
    if isinstance(node_config, TpuNodeConfig):
        return f"TPU {node_config.tpu_type_name}"
    parts = [short_name(node_config.machine_type)]
    parts += [f"{gpu.accelerator_count}x {short_name(gpu.accelerator_type)}"
              for gpu in node_config.guest_accelerators]
    return " + ".join(parts)


def _zones(config: ClusterConfig, one_zone: bool) -> str:
    """The head and TPU slices stay in availability_zone; compute workers fail over."""
    zone, fallback = config.provider.availability_zone, config.provider.fallback_zones
    if one_zone or fallback is False:
        return zone
    if fallback:
        return ", ".join([zone, *fallback])
    return f"{zone} (+ other zones of {config.provider.region})"


def _disk(node_config: ComputeNodeConfig | TpuNodeConfig) -> str:
    if isinstance(node_config, TpuNodeConfig):
        return "TPU boot disk"
    boot = node_config.boot_disk
    params = boot.initialize_params if boot else None
    size = (params.disk_size_gb if params else None) or (boot.disk_size_gb if boot else None)
    kind = short_name(params.disk_type) if params and params.disk_type else "pd-standard"
    return f"{size or 10} GB {kind}"
