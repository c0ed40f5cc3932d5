"""How the head's provider creates the workers its autoscaler asks for: down the node type's
capacity ladder (ladder.py: `provider.capacity.<type>`, the short form `fallback: on-demand`
being [spot, on-demand]), each node labelled with the market it got.

`create` is Ray's own create (GCPNodeProvider.create_node with the autoscaler's tags, or Ray's
GCPCompute of another zone): the names, labels and launch hash stay Ray's, and only the body
and the zone differ. A rung is tried in each of its `zones` in turn (absent: Ray's
`availability_zone`; a reservation rung in its first zone only), the body's zonal URLs moved
there; provider.py lists and terminates the nodes in every zone the ladders name.
Nodes are asked for one at a time on every step but the last (Ray's batch insert raises on the
first refusal without saying which nodes it made); at a step's first capacity refusal the launch
goes on at the next (the rung's next zone, a reservation rung's next reservation, the next
rung), and the last step takes the rest in one batch, so each node is created once. Any other
refusal (a config error) is raised as Ray raised it. A flex-start node is created PENDING (it
waits for Dynamic Workload Scheduler's capacity); provider.py has Ray list PENDING instances,
so the autoscaler counts it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from .ladder import in_zone, is_capacity_refusal, ladder_of, rung_body, rung_zones

logger = logging.getLogger(__name__)

Create = Callable[[dict[str, Any], int, "str | None"], dict[str, Any]]
"""Ray's create for one launch: (body, count, zone or None for availability_zone) ->
{instance name: operation result}."""


def launch_nodes(create: Create, body: Mapping[str, Any], count: int,
                 policy: Mapping[str, Any] | None, node_type: str) -> dict[str, Any]:
    """Create `count` nodes of `node_type` from `body` under its capacity `policy` (None: the
    body's own market, no ladder). A TPU body (no machineType) is created as given."""
    if "machineType" not in body:
        return create(dict(body), count, None)
    steps = [(in_zone(rung_body(body, rung, reservation), zone), zone)
             for rung in ladder_of(policy, body)
             for reservation in rung.get("reservations") or [None]
             for zone in rung_zones(rung)]
    created: dict[str, Any] = {}
    for index, (step, zone) in enumerate(steps):
        left = count - len(created)
        if index == len(steps) - 1:
            created.update(create(step, left, zone))  # the last step: the rest, in one batch
            return created
        try:
            for _ in range(left):
                created.update(create(step, 1, zone))
            return created
        except Exception as exc:  # Ray raises a plain Exception for a failed operation
            if not is_capacity_refusal(str(exc)):
                raise
            logger.warning("%s for %s refused for capacity (%s): %d left for the next step "
                           "(provider.capacity)", _describe(step, zone), node_type, exc,
                           count - len(created))
    return created


def _describe(body: Mapping[str, Any], zone: str | None) -> str:
    labels = body.get("labels") or {}
    market = labels.get("ray-capacity", "")
    reservation = labels.get("ray-reservation")
    where = f" in {zone}" if zone else ""
    return f"{market} {reservation}{where}" if reservation else f"{market}{where}"
