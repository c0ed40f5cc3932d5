"""`HeadNodeProvider`: Ray's GCPNodeProvider, with a launch path of our own and the workers
Pulumi keeps shown to autoscaler v2 as their types' pinned twins (pinned.py).

The autoscaler config names it as `provider: {type: external, module:
ray_gcp_head_provider.provider.HeadNodeProvider}`. Listing, names, launch hashes and
termination are Ray's, inherited, so existing clusters' autoscaled nodes are listed,
recognised and retired as before; `node_tags` reports a Pulumi node as its twin's worker when
the provider section names twins (v2), `create_node` refuses a twin type and `terminate_node`
a Pulumi node.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ray.autoscaler._private.gcp.node import GCPComputeNode, GCPNodeType
from ray.autoscaler._private.gcp.node_provider import GCPNodeProvider
from ray.autoscaler.node_launch_exception import NodeLaunchException
from ray.autoscaler.tags import NODE_KIND_UNMANAGED, TAG_RAY_NODE_KIND, TAG_RAY_USER_NODE_TYPE

from . import pinned
from .capacity import PROVIDER_FIELD
from .launch import launch_nodes
from .paged import AllPagesApi
from .spend_gate import SpendGate

logger = logging.getLogger(__name__)

# A flex-start instance is PENDING while it waits for Dynamic Workload Scheduler's capacity
# (compute v1's Instance status enum); Ray 2.60 lists only PROVISIONING, STAGING and RUNNING
# ones, so it would not count a pending node and would launch another. In the head's own
# autoscaler process, PENDING is listed too.
GCPComputeNode.NON_TERMINATED_STATUSES = {*GCPComputeNode.NON_TERMINATED_STATUSES, "PENDING"}

LaunchCheck = Callable[[dict[str, Any], dict[str, str], int], None]
"""Run before every launch with (node_config, the autoscaler's tags, count); raising refuses
the launch, and the autoscaler logs the exception's text as the reason."""


class PinnedNodeError(RuntimeError):
    """The autoscaler asked to terminate a node Pulumi keeps."""


class HeadNodeProvider(GCPNodeProvider):
    """Ray's GCP provider; `create_node` runs `launch_checks` (each may refuse the launch),
    then launches through `launch.launch_nodes` under `capacity`, the provider section's
    fallback policies by node type. `twins` (user's type -> pinned twin) are the provider
    section's `pinned_types`, turned around."""

    def __init__(self, provider_config: dict[str, Any], cluster_name: str) -> None:
        super().__init__(provider_config, cluster_name)
        # Every list page past 500 nodes, and rate quotas waited out (paged.py).
        compute = self.resources[GCPNodeType.COMPUTE]
        compute.resource = AllPagesApi(compute.resource)
        self.capacity: dict[str, dict[str, Any]] = dict(provider_config.get(PROVIDER_FIELD) or {})
        self.twins: dict[str, str] = {
            user_type: twin
            for twin, user_type in (provider_config.get(pinned.PROVIDER_FIELD) or {}).items()}
        self.launch_checks: list[LaunchCheck] = [SpendGate(self), self._refuse_twins]
        # The autoscaler's log (monitor.log) says which provider launches, and from where.
        logger.info("HeadNodeProvider from %s: capacity ladders for %s", __file__,
                    ", ".join(sorted(self.capacity)) or "no node type")

    def node_tags(self, node_id: str) -> dict[str, str]:
        return pinned.as_v2_sees_it(super().node_tags(node_id), self.twins)

    def terminate_node(self, node_id: str) -> Any:
        """Ray's, for every node but one Pulumi keeps (whatever the autoscaler was told)."""
        if super().node_tags(node_id).get(TAG_RAY_NODE_KIND) == NODE_KIND_UNMANAGED:
            reason = pinned.termination_refusal(node_id)
            logger.warning("%s", reason)
            raise PinnedNodeError(reason)
        return super().terminate_node(node_id)

    def _refuse_twins(self, node_config: dict[str, Any], tags: dict[str, str],
                      count: int) -> None:
        node_type = tags.get(TAG_RAY_USER_NODE_TYPE, "")
        user_type = next((user for user, twin in self.twins.items() if twin == node_type), None)
        if user_type is not None:
            reason = pinned.launch_refusal(node_type, user_type)
            logger.warning("%s", reason)
            raise NodeLaunchException(pinned.CATEGORY, reason, None)

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
                                node_type, self.provider_config.get("availability_zone"))
