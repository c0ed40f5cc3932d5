"""The TPU slices Pulumi keeps for one TPU worker type: `count` `tpu.V2Vm` resources, or, with
`provider.tpu_queued_resources`, `count` `QueuedTpuSlice` requests (infra/workers/queued_slice.py).

Each slice is its own resource, so a preview shows its accelerator, runtime version and
scheduling, and pulumi-gcp validates them. Slice `i` keeps its logical name and its node name
(derived from the config and `i`) while the config stays the same: a count change adds or
removes only the highest indices, the newest slices.
"""

from __future__ import annotations

from typing import Any

import pulumi

from infra.metadata import PINNED_METADATA
from infra.node_resources import Node, NodeInputs, tpu_node
from infra.workers.queued_slice import QueuedTpuSlice, QueuedTpuSliceArgs
from model.config.cluster import TpuQueuedResources
from model.plan import ClusterPlan, NodeGroupPlan


class TpuSlices(pulumi.ComponentResource):
    """N TPU VMs of one worker type, with the names and addresses `invoke` needs."""

    instance_names: pulumi.Output[list[str]]
    instances: pulumi.Output[list[dict[str, Any]]]

    def __init__(
        self,
        name: str,
        plan: ClusterPlan,
        group: NodeGroupPlan,
        inputs: NodeInputs,
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
        credentials: pulumi.Output[str] | None = None,
        api_endpoint: str | None = None,
    ) -> None:
        super().__init__("ray-gcp:index:TpuSlices", name, None, opts)
        # Delete before replace: a replacement keeps its name (a preempted slice) or needs
        # the TPU quota its predecessor holds; each slice depends on the sweeper and the head
        # itself, so `destroy` deletes it before the sweep.
        child = pulumi.ResourceOptions(
            parent=self, depends_on=depends_on, delete_before_replace=True
        )
        queued = plan.config.provider.tpu_queued_resources
        if queued is not None:
            nodes = [
                queued_node(
                    f"{name}-{index}",
                    group.node_name(index),
                    plan,
                    queued,
                    inputs,
                    credentials,
                    child,
                    api_endpoint,
                    plan.config.provider.capacity_input(group.node_type),
                )
                for index in range(group.count)
            ]
        else:
            nodes = [
                tpu_node(
                    f"{name}-{index}",
                    group.node_name(index),
                    plan,
                    group,
                    inputs,
                    child,
                )
                for index in range(group.count)
            ]
        self.slices = [node[0] for node in nodes]
        self.instance_names = pulumi.Output.all(*[group.node_name(i) for i in range(group.count)])
        self.instances = pulumi.Output.all(
            *[
                pulumi.Output.all(group.node_name(index), internal, external, state).apply(
                    lambda values: dict(
                        zip(("name", "internal_ip", "external_ip", "status"), values, strict=True)
                    )
                )
                for index, (_, internal, external, state) in enumerate(nodes)
            ]
        )
        self.register_outputs({"instance_names": self.instance_names})


def queued_node(
    resource_name: str,
    node_name: str,
    plan: ClusterPlan,
    queued: TpuQueuedResources,
    inputs: NodeInputs,
    credentials: pulumi.Output[str] | None,
    opts: pulumi.ResourceOptions,
    api_endpoint: str | None = None,
    capacity: dict[str, Any] | None = None,
) -> Node:
    """A slice through the queued-resources API: the node body as any TPU worker's (its
    metadata holds the startup script) with the slice's labels; (resource, host 0's internal
    IP, its external IP, node state)."""
    request = QueuedTpuSlice(
        resource_name,
        QueuedTpuSliceArgs(
            project=plan.project,
            zone=plan.zone,
            name=node_name,
            body=pulumi.Output.all(inputs.body, inputs.labels).apply(
                lambda pair: {
                    **pair[0],
                    "metadata": {**pair[0]["metadata"], **PINNED_METADATA},
                    "labels": pair[1],
                }
            ),
            wait_minutes=queued.wait_minutes,
            valid_until_minutes=queued.valid_until_minutes,
            capacity=capacity,
            credentials=credentials,
            api_endpoint=api_endpoint,
        ),
        opts=opts,
    )
    return request, request.internal_ip, request.external_ip, request.status
