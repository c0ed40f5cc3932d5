"""The workers Ray's autoscaler launched, as the Compute API lists them, for `invoke status`.

The stack's outputs know the head and the nodes Pulumi keeps; the autoscaler's own workers
(Ray's kind `ray-node-type: worker`) are asked of the API in every zone (one aggregated list):
the head's provider creates them in `availability_zone` and in any zone a capacity ladder's
rung names. Each shows with the market it got, by its own scheduling: a spot
type's worker that the head's provider created on-demand (provider.capacity) shows on-demand.
"""

from __future__ import annotations

from ops.cloud.cloud_api import StackApi, api_errors
from ops.errors import OpsError
from ops.stacks.stack import Node

AUTOSCALED_KIND = "autoscaled"  # the KIND column's word for them
LISTING = "listing the autoscaler's workers"  # what failed, when the API did not answer


def autoscaled_nodes(api: StackApi) -> list[Node]:
    """The cluster's autoscaler-launched instances in every zone, by name."""
    from google.cloud import compute_v1

    from infra.workers.compute_api import instance_market, label_filter
    from model.labels import CLUSTER_NAME, KIND_WORKER, NODE_KIND, USER_NODE_TYPE

    outputs = api.outputs
    request = compute_v1.AggregatedListInstancesRequest(
        project=outputs.project,
        filter=label_filter({CLUSTER_NAME: outputs.cluster_name, NODE_KIND: KIND_WORKER}))
    nodes = []
    for scope, scoped in api.clients.instances.aggregated_list(request=request, retry=None):
        for instance in scoped.instances:
            interface = instance.network_interfaces[0] if instance.network_interfaces else None
            access = (interface.access_configs[0]
                      if interface and interface.access_configs else None)
            nodes.append(Node(
                name=instance.name, node_type=instance.labels.get(USER_NODE_TYPE, ""),
                kind=AUTOSCALED_KIND, internal_ip=interface.network_i_p if interface else "",
                external_ip=(access.nat_i_p or None) if access else None,
                status=instance.status, zone=scope.rsplit("/", 1)[-1],
                market=instance_market(instance)))
    return sorted(nodes, key=lambda node: node.name)


def autoscaled_rows(api: StackApi) -> tuple[list[Node], list[str]]:
    """The autoscaler's workers for the nodes table, or none and the one line `api_errors`
    words for why the API could not be asked."""
    if not (api.outputs.project and api.outputs.zone):
        return [], []
    try:
        with api_errors(LISTING):
            return autoscaled_nodes(api), []
    except OpsError as exc:
        return [], [str(exc)]
