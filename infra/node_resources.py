"""Nodes Pulumi keeps one by one: the head (a `compute.Instance`, or a `tpu.V2Vm` when the
head's type is a TPU), and every TPU VM, head or worker slice, through one V2Vm builder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.instance_args import (
    created_disk_attachment,
    data_disk_args,
    instance_args,
    network_interface_args,
    new_data_disks,
)
from infra.nodes import tpu_args, tpu_network_args
from model.config import TpuNodeConfig
from model.plan import ClusterPlan, NodeGroupPlan


@dataclass(frozen=True)
class NodeInputs:
    """What a node's resource carries beside its plan: its API body (the networking; a queued
    slice's whole node), its metadata (apart from the body: the head's holds secrets) and its
    labels."""

    body: pulumi.Output[dict[str, Any]]
    metadata: pulumi.Input[dict[str, pulumi.Input[str]]]
    labels: pulumi.Output[dict[str, str]]


class HeadNode(pulumi.ComponentResource):
    """One head, its labels carrying Ray's launch hash."""

    internal_ip: pulumi.Output[str]
    external_ip: pulumi.Output[str | None]

    def __init__(
        self,
        name: str,
        plan: ClusterPlan,
        inputs: NodeInputs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("ray-gcp:index:HeadNode", name, None, opts)
        self.name = plan.head.instance_name
        node = create_node(self.name, plan, plan.head, inputs, self)
        self.resource, self.internal_ip, self.external_ip, self.status = node
        self.register_outputs({"internal_ip": self.internal_ip, "external_ip": self.external_ip})


Node = tuple[pulumi.CustomResource, pulumi.Output, pulumi.Output, pulumi.Output]


def create_node(
    name: str,
    plan: ClusterPlan,
    group: NodeGroupPlan,
    inputs: NodeInputs,
    parent: pulumi.Resource,
) -> Node:
    """One node as `compute.Instance` or `tpu.V2Vm` from its API body: (resource, internal IP,
    external IP, status). Metadata comes apart from the body: the head's holds secrets."""
    child = pulumi.ResourceOptions(parent=parent)
    config = group.node_config
    if isinstance(config, TpuNodeConfig):
        return tpu_node(name, name, plan, group, inputs, child)
    static = instance_args(config)
    created = new_data_disks(config)
    disks = [
        gcp.compute.Disk(
            f"{name}-disk-{index}",
            name=f"{name}-disk-{index}",
            project=plan.project,
            zone=plan.zone,
            **data_disk_args(disk),
            opts=child,
        )
        for index, disk in enumerate(created, start=1)
    ]
    if disks:
        static["attached_disks"] = [
            *static.get("attached_disks", []),
            *(
                created_disk_attachment(spec, disk.self_link)
                for disk, spec in zip(disks, created, strict=True)
            ),
        ]
    instance = gcp.compute.Instance(
        name,
        network_interfaces=inputs.body.apply(
            lambda b: [network_interface_args(nic) for nic in b["networkInterfaces"]]
        ),
        **static,
        **_node_inputs(name, plan, group, inputs),
        opts=child,
    )
    return (
        instance,
        instance.network_interfaces[0].network_ip,
        instance.network_interfaces[0].apply(
            lambda nic: nic.access_configs[0].nat_ip if nic.access_configs else None
        ),
        instance.current_status,
    )


def tpu_node(
    resource_name: str,
    node_name: str,
    plan: ClusterPlan,
    group: NodeGroupPlan,
    inputs: NodeInputs,
    opts: pulumi.ResourceOptions,
) -> Node:
    """A TPU VM (the head, or a worker slice) as `tpu.V2Vm`: (resource, host 0's internal IP,
    its external IP, TPU state)."""
    tpu = gcp.tpu.V2Vm(
        resource_name, **tpu_vm_args(node_name, plan, group, inputs), opts=opts
    )
    return (
        tpu,
        tpu.network_endpoints.apply(lambda ends: ends[0].ip_address if ends else None),
        tpu.network_endpoints.apply(_tpu_external_ip),
        tpu.state,
    )


def tpu_vm_args(
    node_name: str,
    plan: ClusterPlan,
    group: NodeGroupPlan,
    inputs: NodeInputs,
) -> dict[str, Any]:
    """Every `tpu.V2Vm` input of one TPU node: what its node_config fixes, the network from
    its API body, and the node's own name, metadata and labels."""
    config = group.node_config
    if not isinstance(config, TpuNodeConfig):
        raise TypeError(f"{group.node_type} is not a TPU node type")
    return {
        **_node_inputs(node_name, plan, group, inputs),
        "network_config": inputs.body.apply(
            lambda b: tpu_network_args(plan.project, plan.region, b["networkConfig"])
        ),
        **tpu_args(config),
    }


def _node_inputs(
    name: str,
    plan: ClusterPlan,
    group: NodeGroupPlan,
    inputs: NodeInputs,
) -> dict[str, Any]:
    """The inputs a `compute.Instance` and a `tpu.V2Vm` name alike: where the node is, what it
    is called and carries, and the service account it runs as."""
    email = group.service_account_email
    return {
        "name": name,
        "project": plan.project,
        "zone": plan.zone,
        "labels": inputs.labels,
        "tags": list(group.network_tags),
        "metadata": inputs.metadata,
        "service_account": (
            {"email": email, "scopes": list(group.service_account_scopes)} if email else None
        ),
    }


def _tpu_external_ip(endpoints: list[Any] | None) -> str | None:
    for endpoint in endpoints or []:
        for access in endpoint.access_configs or []:
            if access.external_ip:
                return access.external_ip
    return None
