"""The plan's capacity ladders: for each worker type with `provider.capacity.<type>.ladder`,
its rungs in order and which pinned node each rung is meant for: a reservation rung's nodes
spread over its reservations by what each still has free (`free`, when the preflight could read
them: `invoke preflight` with credentials), else "as it holds them"; the rungs below take the
nodes the ones above refuse."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model.config import ClusterConfig

Free = Mapping[tuple[str, str], int]
"""(zone, reservation as written) -> how many nodes it can still take; (zone, any_key(type))
-> how many nodes of the type an any-reservation rung there can place."""


def any_key(node_type: str) -> str:
    """The Free key of a type's any-reservation rung (its reservations are not named)."""
    return f"any-reservation:{node_type}"


def ladder_rows(config: ClusterConfig, counts: Mapping[str, int],
                free: Free | None = None) -> list[dict[str, Any]]:
    """One entry per laddered worker type: its pinned count and rungs, each with the pinned
    nodes (1-based) it is meant for."""
    rows = []
    for name, policy in sorted((config.provider.capacity or {}).items()):
        if not policy.is_ladder:
            continue
        pinned = counts.get(name, 0)
        left = list(range(1, pinned + 1))
        rungs = []
        for rung in policy.ladder or []:
            zones = rung.zones or [config.provider.availability_zone]
            for reference in rung.reservations or [None]:
                entry: dict[str, Any] = {**rung.as_input(), "zones": zones,
                                         "failover": not rung.zones, "nodes": []}
                key = reference if reference is not None else (
                    any_key(name) if rung.market == "any-reservation" else None)
                if reference is not None:
                    entry["reservations"] = [reference]
                if key is not None:
                    held = (free or {}).get((zones[0], key))
                    if reference is None and held is None:
                        rungs.append(entry)  # an any-reservation rung, counts unread
                        continue
                    entry["free"] = held
                    # Unread: meant for every node left, as many as it holds.
                    entry["nodes"] = left if held is None else left[:held]
                    if held is not None:
                        left = left[held:]
                rungs.append(entry)
        rows.append({"node_type": name, "pinned": pinned, "rungs": rungs})
    return rows


def ladder_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The ladders for people: one line per rung (per reservation of a reservation rung)."""
    lines = []
    for row in rows:
        lines.append(f"capacity ladder of {row['node_type']} ({row['pinned']} pinned, the "
                     "first rung with room takes a node):")
        for rung in row["rungs"]:
            lines.append(f"  {_rung(rung)}: {_meant_for(rung)}")
    return lines


def _rung(rung: Mapping[str, Any]) -> str:
    what = rung["market"]
    if rung.get("reservations"):
        what += f" {rung['reservations'][0]}"
    if rung.get("machine_type"):
        what += f" as {rung['machine_type']}"
    if rung.get("max_run_duration_s"):
        what += f" ({rung['max_run_duration_s'] / 3600:g} h at most)"
    pinned = rung["market"] in ("reservation", "any-reservation")
    failover = " (+ failover zones)" if rung.get("failover") and not pinned else ""
    return f"{what} in {', '.join(rung['zones'])}{failover}"


def _meant_for(rung: Mapping[str, Any]) -> str:
    nodes = rung["nodes"]
    if "free" not in rung:
        return "the nodes the rungs above cannot place"
    if rung["free"] is None:
        where = f"nodes {_span(nodes)}, as many as it holds" if nodes else "none left"
        why = ("shared from another project: not ours to read"
               if rung["reservations"][0].startswith("projects/")
               else "free count not read: `invoke preflight` reads it")
        return f"{where} ({why})"
    if not nodes:
        return f"none ({rung['free']} free)"
    return f"nodes {_span(nodes)} ({rung['free']} free)"


def _span(nodes: list[int]) -> str:
    return str(nodes[0]) if len(nodes) == 1 else f"{nodes[0]}-{nodes[-1]}"
