"""The pinned nodes' hourly price from the project's dated price table
(`model/price_table.yaml`, which `model.prices` reads for estimates and the head): a small loader
of the policy pack's own, because the pack runs without the project's packages. Machine
(vCPU and memory rates), GPUs and TPU chips, spot priced as such, the region factor applied;
disks are left out (cents a day).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import yaml

from policy.nodes import Node

DEFAULT_TABLE = Path(__file__).resolve().parents[1] / "model" / "price_table.yaml"
_PREDEFINED = re.compile(r"^(?P<family>[a-z0-9]+)-(?P<shape>[a-z]+)-(?P<vcpus>\d+)$")
_CUSTOM = re.compile(r"^(?:(?P<family>[a-z0-9]+)-)?custom-(?P<vcpus>\d+)-(?P<mb>\d+)$")


@functools.cache
def load_table(path: str = str(DEFAULT_TABLE)) -> dict[str, Any]:
    return yaml.safe_load(Path(path).read_text())


def _machine(table: dict[str, Any], machine_type: str, spot: bool) -> float | None:
    """As model.prices.machine_price: the table's figure for the type, else vCPUs and GiB at
    the family's rates (GPUs that come with the type apart)."""
    entry = table.get("machine_types", {}).get(machine_type, {})
    if (kind := "spot" if spot else "on_demand") in entry:
        return float(entry[kind])
    if "vcpus" in entry:
        family, vcpus, memory = machine_type.split("-", 1)[0], entry["vcpus"], entry["gib"]
    elif match := _CUSTOM.match(machine_type):
        family, vcpus = match["family"] or "n1", int(match["vcpus"])
        memory = int(match["mb"]) / 1024
    elif (match := _PREDEFINED.match(machine_type)) and (
            per_vcpu := table["machine_shapes"].get(f"{match['family']}-{match['shape']}")):
        family, vcpus = match["family"], int(match["vcpus"])
        memory = vcpus * float(per_vcpu)
    else:
        return None
    rates = table["machine_families"].get(family) or {}
    prefix = "spot_" if spot else ""
    if f"{prefix}vcpu" not in rates:
        return None
    return vcpus * rates[f"{prefix}vcpu"] + memory * rates[f"{prefix}gib"]


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
        machine = _machine(table, node.machine_type, node.spot)
        if machine is None:
            unpriced.append(node.machine_type)
        else:
            price += machine
    bundled = table.get("machine_types", {}).get(node.machine_type, {}).get("gpus")
    for gpu, count in [tuple(bundled)] if bundled else node.gpus:
        if kind not in table["gpus"].get(gpu, {}):
            unpriced.append(gpu)
        else:
            price += table["gpus"][gpu][kind] * count
    factor = float(table["region_factors"].get(node.region, 1.0))
    return price * factor, unpriced
