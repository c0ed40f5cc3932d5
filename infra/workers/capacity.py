"""Spot with on-demand fallback: which market a body asks for, its on-demand twin, and the
label a node carries saying which it got.

A group whose node type has `provider.capacity.<type>.fallback: on-demand` (see infra/config)
gets the policy as its `capacity` input: when every allowed zone refuses the spot body for
capacity, the slots left are created from `on_demand_body` under the same names, so a slot is
never both. Every node a group creates is labelled `ray-capacity: spot|on-demand`; its
bootstrap reads the instance's own scheduling from the metadata server, so Ray's market-type
label (`RAY_NODE_MARKET_TYPE`) follows what the node really is.

The workers Ray's autoscaler launches have no fallback. Ray 2.60's GCP node provider inserts in
`availability_zone` only and raises a plain exception on a stockout. v1's NodeLauncher then logs
"Failed to launch" and records nothing that moves demand elsewhere: its availability tracker
takes only a NodeLaunchException, and its scorer ignores `priority`. v2 marks the instance
ALLOCATION_FAILED and retries the same type. Its CloudResourceMonitor lowers a type's
availability only on ALLOCATION_TIMEOUT (allocated, but not running Ray within an hour). So an
on-demand twin type with a lower `priority` would not be chosen after spot launches fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A node's market and how its scheduling says it: infra.spend's, which the head runs too.
from infra.spend import ON_DEMAND, SPOT, Market, market_of

__all__ = ["CAPACITY_LABEL", "ON_DEMAND", "SPOT", "Market", "falls_back", "market_of",
           "on_demand_body", "returns_to_spot", "with_market"]

CAPACITY_LABEL = "ray-capacity"

# Scheduling fields a spot body may carry that an on-demand instance cannot (or that only
# make sense with an instanceTerminationAction, which goes with them).
_SPOT_ONLY = ("preemptible", "instanceTerminationAction", "maxRunDuration", "terminationTime",
              "onInstanceStopAction")


def on_demand_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The same body as a STANDARD (on-demand) instance: spot-only scheduling fields dropped,
    the rest (onHostMaintenance, node affinities...) kept."""
    scheduling = {k: v for k, v in (body.get("scheduling") or {}).items() if k not in _SPOT_ONLY}
    return {**body, "scheduling": {**scheduling, "provisioningModel": "STANDARD"}}


def with_market(body: Mapping[str, Any], market: Market) -> dict[str, Any]:
    """The body labelled with the market its nodes get."""
    return {**body, "labels": {**(body.get("labels") or {}), CAPACITY_LABEL: market}}


def falls_back(policy: Mapping[str, Any] | None, body: Mapping[str, Any]) -> bool:
    """The group may create on-demand nodes when spot is out everywhere."""
    return bool(policy) and policy.get("fallback") == ON_DEMAND and (
        market_of(body.get("scheduling")) == SPOT)


def returns_to_spot(policy: Mapping[str, Any] | None, body: Mapping[str, Any]) -> bool:
    """A later reconcile replaces the group's on-demand nodes by spot ones when it can."""
    return falls_back(policy, body) and bool(policy and policy.get("return_to_spot"))
