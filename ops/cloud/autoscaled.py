"""The workers Ray's autoscaler launched, as the Compute API lists them, for `invoke status`.

The stack's outputs know the head and the nodes Pulumi keeps; the autoscaler's own workers
(Ray's kind `ray-node-type: worker`) are asked of the API in the head's zone, the one zone Ray's
GCP provider creates them in. Each shows with the market it got, by its own scheduling: a spot
type's worker that the head's provider created on-demand (provider.capacity) shows on-demand.
"""

from __future__ import annotations

from ops.cloud.cloud_api import StackApi, api_errors
from ops.errors import OpsError
from ops.stacks.stack import Node

AUTOSCALED_KIND = "autoscaled"  # the KIND column's word for them
LISTING = "listing the autoscaler's workers"  # what failed, when the API did not answer


def autoscaled_nodes(api: StackApi) -> list[Node]:
    """The cluster's autoscaler-launched instances in the stack's zone, by name."""
    from google.cloud import compute_v1

    from infra.workers.compute_api import instance_market, label_filter
    from infra.workers.retry import INTERACTIVE, each_page
    from model.labels import CLUSTER_NAME, KIND_WORKER, NODE_KIND, USER_NODE_TYPE

    outputs = api.outputs
    wanted = label_filter({CLUSTER_NAME: outputs.cluster_name, NODE_KIND: KIND_WORKER})

    def ask(token: str) -> compute_v1.services.instances.pagers.ListPager:
        return api.clients.instances.list(request=compute_v1.ListInstancesRequest(
            project=outputs.project, zone=outputs.zone, filter=wanted, page_token=token),
            retry=None)

    nodes = []
    for instance in (i for page in each_page(ask, INTERACTIVE) for i in page.items):
        interface = instance.network_interfaces[0] if instance.network_interfaces else None
        access = interface.access_configs[0] if interface and interface.access_configs else None
        nodes.append(Node(
            name=instance.name, node_type=instance.labels.get(USER_NODE_TYPE, ""),
            kind=AUTOSCALED_KIND, internal_ip=interface.network_i_p if interface else "",
            external_ip=(access.nat_i_p or None) if access else None, status=instance.status,
            zone=outputs.zone, market=instance_market(instance)))
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
