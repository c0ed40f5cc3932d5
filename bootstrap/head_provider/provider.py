"""`HeadNodeProvider`: Ray's GCPNodeProvider, with a launch path of our own and the workers
Pulumi keeps shown to autoscaler v2 as their types' pinned twins (pinned.py).

The autoscaler config names it as `provider: {type: external, module:
ray_gcp_head_provider.provider.HeadNodeProvider}`. Listing, names, launch hashes and
termination are Ray's, inherited, so existing clusters' autoscaled nodes are listed,
recognised and retired as before; `node_tags` reports a Pulumi node as its twin's worker when
the provider section names twins (v2), `create_node` refuses a twin type and `terminate_node`
a Pulumi node.

Zones: Ray's provider lists and creates in `availability_zone` only. A capacity ladder may
name other zones (a rung's `zones`); for each, the provider keeps one more of Ray's own
GCPCompute (the same API client, that zone), lists the cluster's nodes there too, creates a
rung's nodes there, and acts on a node (terminate, tags, command runner) through the GCPCompute
that listed it, that is in the node's own zone. So both autoscalers see every node once,
wherever its rung put it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ray.autoscaler._private.gcp.node import GCPCompute, GCPComputeNode, GCPNodeType, GCPResource
from ray.autoscaler._private.gcp.node_provider import GCPNodeProvider
from ray.autoscaler.node_launch_exception import NodeLaunchException
from ray.autoscaler.tags import NODE_KIND_UNMANAGED, TAG_RAY_NODE_KIND, TAG_RAY_USER_NODE_TYPE

from . import pinned
from .capacity import PROVIDER_FIELD
from .ladder import ladder_zones
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
        self.capacity: dict[str, dict[str, Any]] = dict(provider_config.get(PROVIDER_FIELD) or {})
        self.twins: dict[str, str] = {
            user_type: twin
            for twin, user_type in (provider_config.get(pinned.PROVIDER_FIELD) or {}).items()}
        self.launch_checks: list[LaunchCheck] = [SpendGate(self), self._refuse_twins]
        # The autoscaler's log (monitor.log) says which provider launches, and from where.
        logger.info("HeadNodeProvider from %s: capacity ladders for %s", __file__,
                    ", ".join(sorted(self.capacity)) or "no node type")

    def _construct_clients(self) -> None:
        """Ray's clients, its compute client reading every list page past 500 nodes and
        waiting out rate quotas (paged.py), and a GCPCompute of that client for each other zone
        the ladders name (all rebuilt together, as Ray rebuilds its clients after a broken
        pipe)."""
        super()._construct_clients()
        compute = self.resources[GCPNodeType.COMPUTE]
        compute.resource = AllPagesApi(compute.resource)
        home = self.provider_config["availability_zone"]
        self.zone_resources: dict[str, GCPCompute] = {
            zone: GCPCompute(compute.resource, self.provider_config["project_id"], zone,
                             self.cluster_name)
            for zone in ladder_zones(self.provider_config.get(PROVIDER_FIELD) or {})
            if zone != home}

    def non_terminated_nodes(self, tag_filters: dict[str, str]) -> list[str]:
        """Ray's listing, then the other zones' (the cache holds every node listed)."""
        names = super().non_terminated_nodes(tag_filters)
        with self.lock:
            for resource in self.zone_resources.values():
                found = resource.list_instances(tag_filters)
                self.cached_nodes.update({node["name"]: node for node in found})
                names += [node["name"] for node in found]
        return names

    def _get_resource_depending_on_node_name(self, node_name: str) -> GCPResource:
        """The GCPCompute that listed the node (its zone's), else Ray's by the name."""
        node = self.cached_nodes.get(node_name)
        if node is not None and node.resource in self.zone_resources.values():
            return node.resource
        return super()._get_resource_depending_on_node_name(node_name)

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

        def create(body: dict[str, Any], how_many: int, zone: str | None) -> dict[str, Any]:
            if zone is None or zone not in self.zone_resources:
                return GCPNodeProvider.create_node(self, body, tags, how_many)
            made = self.zone_resources[zone].create_instances(body, tags, how_many)
            return {name: result for result, name in made}

        # One launch at a time, as Ray's own create_node does: a check sees the nodes of every
        # launch before this one.
        with self.lock:
            for check in self.launch_checks:
                check(base_config, tags, count)
            return launch_nodes(create, base_config, count, self.capacity.get(node_type),
                                node_type)
