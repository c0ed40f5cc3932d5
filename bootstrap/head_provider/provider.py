"""`HeadNodeProvider`: Ray's GCPNodeProvider, with a launch path of our own.

The autoscaler config names it as `provider: {type: external, module:
ray_gcp_head_provider.provider.HeadNodeProvider}`; everything but `create_node` is Ray's,
inherited, so existing clusters' autoscaled nodes are listed, recognised and retired as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ray.autoscaler._private.gcp.node_provider import GCPNodeProvider
from ray.autoscaler.tags import TAG_RAY_USER_NODE_TYPE

from .capacity import PROVIDER_FIELD
from .launch import launch_nodes
from .spend_gate import SpendGate

logger = logging.getLogger(__name__)

LaunchCheck = Callable[[dict[str, Any], dict[str, str], int], None]
"""Run before every launch with (node_config, the autoscaler's tags, count); raising refuses
the launch, and the autoscaler logs the exception's text as the reason."""


class HeadNodeProvider(GCPNodeProvider):
    """Ray's GCP provider; `create_node` runs `launch_checks` (each may refuse the launch),
    then launches through `launch.launch_nodes` under `capacity`, the provider section's
    fallback policies by node type."""

    def __init__(self, provider_config: dict[str, Any], cluster_name: str) -> None:
        super().__init__(provider_config, cluster_name)
        self.capacity: dict[str, dict[str, Any]] = dict(provider_config.get(PROVIDER_FIELD) or {})
        self.launch_checks: list[LaunchCheck] = [SpendGate(self)]
        # The autoscaler's log (monitor.log) says which provider launches, and from where.
        logger.info("HeadNodeProvider from %s: on-demand fallback for %s", __file__,
                    ", ".join(sorted(self.capacity)) or "no node type")

    def create_node(self, base_config: dict[str, Any], tags: dict[str, str],
                    count: int) -> dict[str, Any]:
        node_type = tags.get(TAG_RAY_USER_NODE_TYPE, "")

        def create(body: dict[str, Any], how_many: int) -> dict[str, Any]:
            return GCPNodeProvider.create_node(self, body, tags, how_many)

        # One launch at a time, as Ray's own create_node does: a check sees the nodes of every
        # launch before this one.
        with self.lock:
            for check in self.launch_checks:
                check(base_config, tags, count)
            return launch_nodes(create, base_config, count, self.capacity.get(node_type),
                                node_type)
