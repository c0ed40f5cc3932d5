"""How the head's provider creates the workers its autoscaler asks for: down the node type's
capacity ladder (ladder.py: `provider.capacity.<type>`, the short form `fallback: on-demand`
being [spot, on-demand]), each node labelled with the market it got.

`create` is Ray's own create (GCPNodeProvider.create_node with the autoscaler's tags): the
names, labels and launch hash stay Ray's, and only the body differs. Ray creates in
`availability_zone` alone and lists only that zone, so that zone is every zone an autoscaled
worker may use: a rung whose `zones` leave it out is skipped here (the pinned workers use it).
Nodes are asked for one at a time on every rung but the last (Ray's batch insert raises on the
first refusal without saying which nodes it made); at a rung's first capacity refusal the launch
goes on at the next rung (a reservation rung: at its next reservation), and the last rung takes
the rest in one batch, so each node is created once. Any other refusal (a config error) is
raised as Ray raised it. A flex-start node is created PENDING (it waits for Dynamic Workload
Scheduler's capacity); provider.py has Ray list PENDING instances, so the autoscaler counts it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from .ladder import is_capacity_refusal, ladder_of, rung_body

logger = logging.getLogger(__name__)

Create = Callable[[dict[str, Any], int], dict[str, Any]]
"""Ray's create for one launch: (body, count) -> {instance name: operation result}."""


def launch_nodes(create: Create, body: Mapping[str, Any], count: int,
                 policy: Mapping[str, Any] | None, node_type: str,
                 zone: str | None = None) -> dict[str, Any]:
    """Create `count` nodes of `node_type` from `body` under its capacity `policy` (None: the
    body's own market, no ladder) in `zone` (Ray's availability_zone). A TPU body (no
    machineType) is created as given."""
    if "machineType" not in body:
        return create(dict(body), count)
    steps = [rung_body(body, rung, reservation)
             for rung in ladder_of(policy, body)
             if zone is None or not rung.get("zones") or zone in rung["zones"]
             for reservation in rung.get("reservations") or [None]]
    created: dict[str, Any] = {}
    for index, step in enumerate(steps):
        left = count - len(created)
        if index == len(steps) - 1:
            created.update(create(step, left))  # the last rung: the rest, in one batch
            return created
        try:
            for _ in range(left):
                created.update(create(step, 1))
            return created
        except Exception as exc:  # Ray raises a plain Exception for a failed operation
            if not is_capacity_refusal(str(exc)):
                raise
            logger.warning("%s for %s refused for capacity (%s): %d left for the next rung "
                           "(provider.capacity)", _describe(step), node_type, exc,
                           count - len(created))
    return created


def _describe(body: Mapping[str, Any]) -> str:
    labels = body.get("labels") or {}
    market = labels.get("ray-capacity", "")
    reservation = labels.get("ray-reservation")
    return f"{market} {reservation}" if reservation else market
