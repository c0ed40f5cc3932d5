"""The dated price table (`price_table.yaml` beside this module) and its one rule for a machine
type's hourly price, read the same way by everyone who prices a node: `model.prices` (plans,
diffs, `invoke cost`, the head's spend cap) and the policy pack's `policy.prices`.

Standalone: it imports only the standard library and PyYAML, nothing else of the project, not
even the rest of `model`, so the policy pack, which runs on its own under Pulumi's analyzer,
imports it without the config model (as infra/workers imports bootstrap/head_provider/capacity).

Compute Engine bills predefined machine types as vCPU-hours plus GiB-hours of memory, so a
machine's price is vCPUs x the family's vCPU rate + GiB x its memory rate; the table holds
those rates, the shapes of types not named <family>-<shape>-<vCPUs>, and the GPUs a2/a3/g2
types come with.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import yaml

TABLE_FILE = Path(__file__).with_name("price_table.yaml")
_PREDEFINED = re.compile(r"^(?P<family>[a-z0-9]+)-(?P<shape>[a-z]+)-(?P<vcpus>\d+)$")
_CUSTOM = re.compile(r"^(?:(?P<family>[a-z0-9]+)-)?custom-(?P<vcpus>\d+)-(?P<mb>\d+)$")


@functools.cache
def load_table(path: str = str(TABLE_FILE)) -> dict[str, Any]:
    """The table at `path` (the shipped one unless a pack config names another), read once."""
    return yaml.safe_load(Path(path).read_text())


def machine_rate(table: dict[str, Any], machine_type: str, spot: bool) -> float | None:
    """USD per hour of a machine type (its short name) in the reference region, GPUs that come
    with it apart (`bundled_gpus`): the table's own figure for the type, else vCPUs x the
    family's vCPU rate + GiB x its memory rate; None when the table has neither."""
    entry = table.get("machine_types", {}).get(machine_type, {})
    kind = "spot" if spot else "on_demand"
    if kind in entry:
        return float(entry[kind])
    if "vcpus" in entry:
        family = machine_type.split("-", 1)[0]
        vcpus, memory = float(entry["vcpus"]), float(entry["gib"])
    elif match := _CUSTOM.match(machine_type):
        family, vcpus = match["family"] or "n1", int(match["vcpus"])
        memory = int(match["mb"]) / 1024
    elif (match := _PREDEFINED.match(machine_type)) and (
            per_vcpu := table["machine_shapes"].get(f"{match['family']}-{match['shape']}")
    ) is not None:
        family, vcpus = match["family"], int(match["vcpus"])
        memory = vcpus * float(per_vcpu)
    else:
        return None
    rates = table["machine_families"].get(family) or {}
    prefix = "spot_" if spot else ""
    if f"{prefix}vcpu" not in rates:
        return None
    return vcpus * rates[f"{prefix}vcpu"] + memory * rates[f"{prefix}gib"]


def bundled_gpus(table: dict[str, Any], machine_type: str) -> list[tuple[str, int]]:
    """The GPUs a machine type (its short name) comes with (a2, a3, g2): (type, count)."""
    entry = table.get("machine_types", {}).get(machine_type, {})
    return [(str(entry["gpus"][0]), int(entry["gpus"][1]))] if "gpus" in entry else []
