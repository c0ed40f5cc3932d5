"""Spot with on-demand fallback, as pure rules: which market a body asks for, its on-demand
twin, the label a node carries saying which it got, and which insert errors mean the zone is
out of capacity.

Shared by the workers Pulumi keeps (infra/workers/capacity.py, infra/workers/zones.py import
these names) and the workers the head's autoscaler launches (launch.py): both classify a
refusal and build the on-demand body the same way. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

CAPACITY_LABEL = "ray-capacity"
PROVIDER_FIELD = "capacity"
"""The head's provider section: `{node type: {fallback: on-demand, return_to_spot: bool}}`."""
Market = Literal["spot", "on-demand"]
SPOT: Market = "spot"
ON_DEMAND: Market = "on-demand"

# Scheduling fields a spot body may carry that an on-demand instance cannot (or that only
# make sense with an instanceTerminationAction, which goes with them).
_SPOT_ONLY = ("preemptible", "instanceTerminationAction", "maxRunDuration", "terminationTime",
              "onInstanceStopAction")

CAPACITY_CODES = ("ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS")
_CAPACITY_TEXT = "does not have enough resources available"
# A quota that binds one zone (not the region's, which every zone of the region shares).
_ZONE_QUOTA = re.compile(r"QUOTA_EXCEEDED\b.*\bin zone\b")


def is_zone_capacity_error(error: str) -> bool:
    """An insert refused for the zone's capacity or a per-zone quota: another zone, or the
    other market, may work."""
    return (
        any(code in error for code in CAPACITY_CODES)
        or _CAPACITY_TEXT in error
        or bool(_ZONE_QUOTA.search(error))
    )


def market_of(scheduling: Mapping[str, Any] | None) -> Market:
    """What an insert body's (or instance's) scheduling asks for: SPOT or preemptible is spot."""
    scheduling = scheduling or {}
    model = str(scheduling.get("provisioningModel") or "").upper()
    return SPOT if model == "SPOT" or scheduling.get("preemptible") is True else ON_DEMAND


def on_demand_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The same body as a STANDARD (on-demand) instance: spot-only scheduling fields dropped,
    the rest (onHostMaintenance, node affinities...) kept."""
    scheduling = {k: v for k, v in (body.get("scheduling") or {}).items() if k not in _SPOT_ONLY}
    return {**body, "scheduling": {**scheduling, "provisioningModel": "STANDARD"}}


def with_market(body: Mapping[str, Any], market: Market) -> dict[str, Any]:
    """The body labelled with the market its nodes get."""
    return {**body, "labels": {**(body.get("labels") or {}), CAPACITY_LABEL: market}}


def falls_back(policy: Mapping[str, Any] | None, body: Mapping[str, Any]) -> bool:
    """Nodes of this body may be created on-demand when spot is refused for capacity."""
    return bool(policy) and policy.get("fallback") == ON_DEMAND and (
        market_of(body.get("scheduling")) == SPOT)


def returns_to_spot(policy: Mapping[str, Any] | None, body: Mapping[str, Any]) -> bool:
    """A later reconcile replaces the group's on-demand nodes by spot ones when it can."""
    return falls_back(policy, body) and bool(policy and policy.get("return_to_spot"))
