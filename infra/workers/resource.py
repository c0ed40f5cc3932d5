"""`WorkerGroup`: the Pulumi resource the program declares, one per worker node type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pulumi
from pulumi.dynamic import Resource

from infra.workers.provider import WorkerGroupProvider


@dataclass
class WorkerGroupArgs:
    """Inputs of a worker group; `body` is the insert body (or TPU node body) without a name."""

    project: pulumi.Input[str]
    zone: pulumi.Input[str]
    cluster_name: pulumi.Input[str]
    node_type: pulumi.Input[str]
    name_prefix: pulumi.Input[str]
    body: pulumi.Input[dict[str, Any]]
    count: pulumi.Input[int]
    kind: Literal["compute", "tpu"] = "compute"
    cache_stopped_nodes: pulumi.Input[bool] = False
    credentials: pulumi.Input[str] | None = None
    """Service-account JSON (or an OAuth token); kept secret in the state. None: ADC."""
    api_endpoint: str | None = None
    """host:port of an emulator or the test fake, spoken to over plain http."""


_OUTPUTS = (
    "count",
    "group_id",
    "instance_names",
    "stopped_instance_names",
    "instances",
    "autoscaler_instance_names",
)


class WorkerGroup(Resource):
    """N workers of one node type, scaled in place by changing `count`."""

    count: pulumi.Output[int]
    group_id: pulumi.Output[str]
    instance_names: pulumi.Output[list[str]]
    stopped_instance_names: pulumi.Output[list[str]]
    instances: pulumi.Output[list[dict[str, Any]]]
    autoscaler_instance_names: pulumi.Output[list[str]]

    def __init__(
        self, name: str, args: WorkerGroupArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        props: dict[str, Any] = {key: None for key in _OUTPUTS}
        props.update(
            {
                "project": args.project,
                "zone": args.zone,
                "kind": args.kind,
                "cluster_name": args.cluster_name,
                "node_type": args.node_type,
                "name_prefix": args.name_prefix,
                "body": args.body,
                "count": args.count,
                "cache_stopped_nodes": args.cache_stopped_nodes,
                "credentials": (
                    pulumi.Output.secret(args.credentials) if args.credentials is not None else None
                ),
                "api_endpoint": args.api_endpoint,
            }
        )
        secret_state = pulumi.ResourceOptions(additional_secret_outputs=["credentials"])
        super().__init__(
            WorkerGroupProvider(), name, props, pulumi.ResourceOptions.merge(opts, secret_state)
        )
