"""What a scale change does, as data: decided from the live nodes, before any API call.

Pure so that the rules (newest go first, stopped ones are restarted before new ones are made,
the autoscaler's nodes are never touched) are tested without a cloud.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from infra.workers.nodes import Node


@dataclass(frozen=True)
class ScalePlan:
    start: list[str] = field(default_factory=list)
    create: int = 0
    stop: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)


def plan_scale(ours: Sequence[Node], desired: int, cache_stopped_nodes: bool) -> ScalePlan:
    """Reach `desired` live nodes of ours. `ours` holds only our group's nodes, oldest first.

    Dead nodes (preempted, or stopped when we do not cache) are deleted and replaced.
    """
    live = [n.name for n in ours if n.phase == "live"]
    stopped = [n.name for n in ours if n.phase == "stopped"]
    dead = [n.name for n in ours if n.phase == "dead"]
    if not cache_stopped_nodes:
        dead, stopped = dead + stopped, []
    if len(live) >= desired:
        newest_first = list(reversed(live[desired:]))
        if cache_stopped_nodes:
            return ScalePlan(stop=newest_first, delete=dead)
        return ScalePlan(delete=newest_first + dead)
    missing = desired - len(live)
    restart = stopped[-missing:][::-1] if missing else []
    return ScalePlan(start=restart, create=missing - len(restart), delete=dead)
