"""The Pulumi resources the program declares: `WorkerGroup`, one per worker node type, and
`ClusterSweeper`, one per cluster, which `pulumi destroy` deletes last."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import Resource

from infra.dynamic_types import MODULE, legacy_aliases
from infra.workers.provider import WorkerGroupProvider
from infra.workers.sweeper import ClusterSweeperProvider


@dataclass
class WorkerGroupArgs:
    """Inputs of a worker group; `body` is the instances.insert body without a name."""

    project: pulumi.Input[str]
    zone: pulumi.Input[str]
    cluster_name: pulumi.Input[str]
    node_type: pulumi.Input[str]
    name_prefix: pulumi.Input[str]
    body: pulumi.Input[dict[str, Any]]
    count: pulumi.Input[int]
    cache_stopped_nodes: pulumi.Input[bool] = False
    credentials: pulumi.Input[str] | None = None
    """Service-account JSON (or an OAuth token); kept secret in the state. None: ADC."""
    api_endpoint: str | None = None
    """host:port of an emulator or the test fake, spoken to over plain http."""
    fallback_zones: pulumi.Input[list[str]] | bool | None = None
    """Where workers go when `zone` is out of capacity: None any zone of the region, False
    none, a list those zones in order (`provider.fallback_zones`)."""
    capacity: dict[str, Any] | None = None
    """`provider.capacity.<type>`: `{fallback: on-demand, return_to_spot: bool}` or None
    (infra/workers/capacity.py)."""
    adopt: dict[str, list[str]] | None = None
    """Running workers of a cluster `ray up` made: `pinned` the group takes as its own,
    `autoscaler` it labels with the stack and the type's launch hash (model/adoption.py)."""


_OUTPUTS = (
    "count",
    "group_id",
    "instance_names",
    "stopped_instance_names",
    "instances",
    "autoscaler_instance_names",
)


class WorkerGroup(Resource, module=MODULE, name="WorkerGroup"):
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
                "cluster_name": args.cluster_name,
                "node_type": args.node_type,
                "name_prefix": args.name_prefix,
                "body": args.body,
                "count": args.count,
                "cache_stopped_nodes": args.cache_stopped_nodes,
                "credentials": _secret(args.credentials),
                "api_endpoint": args.api_endpoint,
                "fallback_zones": args.fallback_zones,
                "capacity": args.capacity,
                "adopt": args.adopt,
            }
        )
        secret_state = pulumi.ResourceOptions(additional_secret_outputs=["credentials"])
        super().__init__(
            WorkerGroupProvider(), name, props,
            pulumi.ResourceOptions.merge(legacy_aliases(opts), secret_state),
        )


def _secret(value: pulumi.Input[str] | None) -> pulumi.Output[str] | None:
    return pulumi.Output.secret(value) if value is not None else None


@dataclass
class ClusterSweeperArgs:
    """Where the cluster's nodes live and how to reach the API; nothing is created from it."""

    project: pulumi.Input[str]
    zone: pulumi.Input[str]
    cluster_name: pulumi.Input[str]
    has_tpu: pulumi.Input[bool] = False
    """Also sweep TPU nodes (only then is the TPU API called)."""
    credentials: pulumi.Input[str] | None = None
    """Service-account JSON (or an OAuth token); kept secret in the state. None: ADC."""
    api_endpoint: str | None = None
    """host:port of an emulator or the test fake, spoken to over plain http."""
    stack: pulumi.Input[str] | None = None
    """The stack's identity (`ray-gcp-stack` on everything it creates): what it claims and
    sweeps."""
    adopted: list[str] | None = None
    """Nodes of a cluster `ray up` made that the stack takes over: its claim allows them
    without the stack's label (model/adoption.py)."""


class ClusterSweeper(Resource, module=MODULE, name="ClusterSweeper"):
    """Deleting it deletes every instance (and TPU node) labelled `ray-cluster-name=<cluster>`
    and `ray-gcp-stack=<stack>`.

    Create it before everything else and make every other resource `depends_on` it: its
    create claims the cluster name (refused when another stack's nodes hold it), and destroy
    deletes it last, after what Pulumi tracks, so it removes what Pulumi does not (the
    autoscaler's workers, nodes of a create that failed half-way). Updating it calls no API.
    """

    project: pulumi.Output[str]
    zone: pulumi.Output[str]
    cluster_name: pulumi.Output[str]
    has_tpu: pulumi.Output[bool]

    def __init__(
        self, name: str, args: ClusterSweeperArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        props: dict[str, Any] = {
            "project": args.project,
            "zone": args.zone,
            "cluster_name": args.cluster_name,
            "has_tpu": args.has_tpu,
            "credentials": _secret(args.credentials),
            "api_endpoint": args.api_endpoint,
            "stack": args.stack,
            "adopted": args.adopted,
        }
        secret_state = pulumi.ResourceOptions(additional_secret_outputs=["credentials"])
        super().__init__(
            ClusterSweeperProvider(), name, props,
            pulumi.ResourceOptions.merge(legacy_aliases(opts), secret_state),
        )
