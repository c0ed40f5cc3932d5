"""The head node: a `compute.Instance`, or a `tpu.V2Vm` when the head's type is a TPU."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.config import ComputeNodeConfig
from infra.nodes import (
    instance_args,
    network_interface_args,
    new_data_disks,
    tpu_args,
    tpu_network_config_args,
)
from infra.plan import ClusterPlan


class HeadNode(pulumi.ComponentResource):
    """One head, its body given in API JSON, its labels carrying Ray's launch hash."""

    name: str
    internal_ip: pulumi.Output[str]
    external_ip: pulumi.Output[str | None]

    def __init__(
        self,
        name: str,
        plan: ClusterPlan,
        interfaces: pulumi.Output[list[dict[str, Any]]],
        metadata: pulumi.Output[dict[str, str]],
        labels: pulumi.Output[dict[str, str]],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("ray-gcp:index:HeadNode", name, None, opts)
        group = plan.head
        self.name = group.instance_name
        child = pulumi.ResourceOptions(parent=self)
        config = group.node_config
        if isinstance(config, ComputeNodeConfig):
            disks = [
                gcp.compute.Disk(
                    f"{self.name}-disk-{index}",
                    name=f"{self.name}-disk-{index}",
                    project=plan.project,
                    zone=plan.zone,
                    image=disk.initialize_params.source_image,
                    size=disk.initialize_params.disk_size_gb,
                    type=(disk.initialize_params.disk_type or "").rsplit("/", 1)[-1] or None,
                    labels=disk.initialize_params.labels,
                    opts=child,
                )
                for index, disk in enumerate(new_data_disks(config), start=1)
                if disk.initialize_params is not None
            ]
            static = instance_args(config)
            if disks:
                static["attached_disks"] = [
                    *static.get("attached_disks", []),
                    *({"source": d.self_link} for d in disks),
                ]
            instance = gcp.compute.Instance(
                self.name,
                name=self.name,
                project=plan.project,
                zone=plan.zone,
                labels=labels,
                tags=list(group.network_tags),
                metadata=metadata,
                network_interfaces=interfaces.apply(
                    lambda nics: [network_interface_args(nic) for nic in nics]
                ),
                service_account=_service_account(group.service_account_email,
                                                 group.service_account_scopes),
                **static,
                opts=child,
            )
            self.resource: pulumi.CustomResource = instance
            self.internal_ip = instance.network_interfaces[0].network_ip
            self.external_ip = instance.network_interfaces[0].apply(
                lambda nic: nic.access_configs[0].nat_ip if nic.access_configs else None
            )
        else:
            tpu = gcp.tpu.V2Vm(
                self.name,
                name=self.name,
                project=plan.project,
                zone=plan.zone,
                labels=labels,
                tags=list(group.network_tags),
                metadata=metadata,
                network_config=interfaces.apply(
                    lambda nics: tpu_network_config_args(config, nics)
                ),
                service_account=_service_account(group.service_account_email,
                                                 group.service_account_scopes),
                **tpu_args(config),
                opts=child,
            )
            self.resource = tpu
            self.internal_ip = tpu.network_endpoints.apply(
                lambda endpoints: endpoints[0].ip_address if endpoints else None
            )
            self.external_ip = tpu.network_endpoints.apply(_tpu_external_ip)
        self.register_outputs({"internal_ip": self.internal_ip, "external_ip": self.external_ip})


def _service_account(email: str | None, scopes: tuple[str, ...]) -> dict | None:
    return {"email": email, "scopes": list(scopes)} if email else None


def _tpu_external_ip(endpoints: list[Any] | None) -> str | None:
    for endpoint in endpoints or []:
        for access in endpoint.access_configs or []:
            if access.external_ip:
                return access.external_ip
    return None
