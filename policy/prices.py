"""The pinned nodes' hourly price from the project's dated price table, read by
`model.price_table` (the one reader `model.prices` uses too: standalone, so the pack imports it
without the rest of the project). Machine (vCPU and memory rates), GPUs and TPU chips, spot
priced as such, the region factor applied; disks are left out (cents a day).
"""

from __future__ import annotations

from typing import Any

from model.price_table import bundled_gpus, machine_rate
from policy.nodes import Node


def node_price(table: dict[str, Any], node: Node) -> tuple[float, list[str]]:
    """USD per hour of one such node, and what the table has no price for."""
    kind = "spot" if node.spot else "on_demand"
    price, unpriced = 0.0, []
    if node.tpu_version:  # acceleratorConfig's V5LITE_POD is the table's v5litepod
        chip = table["tpu_chips"].get(node.tpu_version.replace("_", ""))
        if chip is None:
            unpriced.append(f"TPU {node.tpu_version}")
        else:
            price += chip[kind] * node.tpu_chips
    if node.machine_type:
        machine = machine_rate(table, node.machine_type, node.spot)
        if machine is None:
            unpriced.append(node.machine_type)
        else:
            price += machine
    for gpu, count in bundled_gpus(table, node.machine_type or "") or node.gpus:
        if kind not in table["gpus"].get(gpu, {}):
            unpriced.append(gpu)
        else:
            price += table["gpus"][gpu][kind] * count
    factor = float(table["region_factors"].get(node.region, 1.0))
    return price * factor, unpriced
