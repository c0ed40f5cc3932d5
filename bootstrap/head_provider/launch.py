"""How the head's provider creates the workers its autoscaler asks for: each labelled with the
market it gets, and for a type with `provider.capacity.<type>.fallback: on-demand`, on-demand
when the zone refuses spot for capacity.

`create` is Ray's own create (GCPNodeProvider.create_node with the autoscaler's tags): the
names, labels and launch hash stay Ray's, and only the body differs. Ray creates in
`availability_zone` alone and lists only that zone, so that zone is every zone an autoscaled
worker may use. A fallback type's nodes are asked for as spot one at a time (Ray's batch
insert raises on the first refusal without saying which nodes it made); at the first
capacity refusal the rest of the launch goes on-demand in one batch, so each node is created
once, as spot or as on-demand.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from .capacity import (
    ON_DEMAND,
    SPOT,
    falls_back,
    is_zone_capacity_error,
    market_of,
    on_demand_body,
    with_market,
)

logger = logging.getLogger(__name__)

Create = Callable[[dict[str, Any], int], dict[str, Any]]
"""Ray's create for one launch: (body, count) -> {instance name: operation result}."""


def launch_nodes(create: Create, body: Mapping[str, Any], count: int,
                 policy: Mapping[str, Any] | None, node_type: str) -> dict[str, Any]:
    """Create `count` nodes of `node_type` from `body` under its capacity `policy` (None: the
    body's own market, no fallback). A TPU body (no machineType) is created as given."""
    if "machineType" not in body:
        return create(dict(body), count)
    if not falls_back(policy, body):
        return create(with_market(body, market_of(body.get("scheduling"))), count)
    created: dict[str, Any] = {}
    spot = with_market(body, SPOT)
    for made in range(count):
        try:
            created.update(create(spot, 1))
        except Exception as exc:  # Ray raises a plain Exception for a failed operation
            if not is_zone_capacity_error(str(exc)):
                raise
            left = count - made
            logger.warning("spot %s refused for capacity (%s): creating %d on-demand "
                           "(provider.capacity fallback)", node_type, exc, left)
            created.update(create(with_market(on_demand_body(body), ON_DEMAND), left))
            break
    return created
