"""Spot with on-demand fallback for the workers Pulumi keeps. Which market a body asks for,
its on-demand twin and the label a node carries saying which it got are the rules the head's
autoscaler uses too: they live in bootstrap/head_provider/capacity.py (shipped to the head,
which has none of our packages) and are imported here under their old names.

A group whose node type has `provider.capacity.<type>.fallback: on-demand` (see model/config)
gets the policy as its `capacity` input: when every allowed zone refuses the spot body for
capacity, the slots left are created from `on_demand_body` under the same names, so a slot is
never both. Every node a group creates is labelled `ray-capacity: spot|on-demand`; its
bootstrap reads the instance's own scheduling from the metadata server, so Ray's market-type
label (`RAY_NODE_MARKET_TYPE`) follows what the node really is.

The workers Ray's autoscaler launches fall back in the head's own node provider
(bootstrap/head_provider/launch.py), not through a twin node type: Ray 2.60's GCP node provider
raises a plain exception on a stockout. v1's NodeLauncher then logs "Failed to launch" and
records nothing that moves demand elsewhere: its availability tracker takes only a
NodeLaunchException, and its scorer ignores `priority`. v2 marks the instance ALLOCATION_FAILED
and retries the same type. Its CloudResourceMonitor lowers a type's availability only on
ALLOCATION_TIMEOUT (allocated, but not running Ray within an hour). So an on-demand twin type
with a lower `priority` would not be chosen after spot launches fail.
"""

from __future__ import annotations

from bootstrap.head_provider.capacity import (
    CAPACITY_LABEL,
    ON_DEMAND,
    SPOT,
    Market,
    falls_back,
    market_of,
    on_demand_body,
    returns_to_spot,
    with_market,
)

__all__ = ["CAPACITY_LABEL", "ON_DEMAND", "SPOT", "Market", "falls_back", "market_of",
           "on_demand_body", "returns_to_spot", "with_market"]
