"""`invoke status` says which nodes are spot and which on-demand: a spot type's workers that
fell back to on-demand show as such, from the stack's outputs (the worker group records what
each instance really is); outputs written before that show `-`."""

from __future__ import annotations

from typing import Any

from ops.cloud.status import nodes_table
from ops.stack import parse_outputs


def outputs(*workers: dict[str, Any]) -> dict[str, Any]:
    return {
        "cluster_name": "c", "head_name": "ray-c-head", "head_internal_ip": "10.0.0.2",
        "ssh_user": "ubuntu", "ssh_private_key": "unused",
        "nodes": [{"name": "ray-c-head", "node_type": "head", "kind": "head",
                   "internal_ip": "10.0.0.2", "status": "RUNNING", "market": "on-demand"},
                  *workers],
    }


def worker(name: str, market: str | None) -> dict[str, Any]:
    node = {"name": name, "node_type": "gpu", "kind": "worker", "internal_ip": "10.0.0.3",
            "status": "RUNNING"}
    return node if market is None else {**node, "market": market}


def rows(raw: dict[str, Any]) -> dict[str, list[str]]:
    table = nodes_table(parse_outputs("s", raw)).splitlines()
    header = table[0].split()
    assert header[3] == "MARKET"
    return {line.split()[0]: line.split() for line in table[1:]}


def test_spot_workers_and_their_on_demand_fallbacks_are_told_apart():
    found = rows(outputs(worker("w-spot", "spot"), worker("w-fallback", "on-demand")))
    assert found["w-spot"][3] == "spot"
    assert found["w-fallback"][3] == "on-demand"
    assert found["ray-c-head"][3] == "on-demand"


def test_outputs_from_before_the_market_was_recorded_show_a_dash():
    assert rows(outputs(worker("w-old", None)))["w-old"][3] == "-"
