"""Where nodes attach and which traffic reaches them (SPEC 2.4).

Explicit `networkInterfaces` on every compute type are used as given; otherwise the region's
subnet is looked up and used, with an external NAT so SSH reaches the head (none in private
mode or with `use_internal_ips`). Firewall rules open Ray's ports between the cluster's nodes
only, and SSH to the head from chosen ranges. In private mode a Cloud Router and Cloud NAT
give the cluster's subnet egress (PyPI, docker registries) without a public address.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.component_options import waits_for
from model.config import ClusterConfig, ComputeNodeConfig, ConfigError
from model.config.network_refs import network_path, subnetwork_path
from model.config.node_config import NetworkInterface
from model.plan import ClusterPlan, NodeGroupPlan, subnet_preference

EXTERNAL_NAT = {"name": "External NAT", "type": "ONE_TO_ONE_NAT"}


def pick_subnetwork(subnetworks: list[Any]) -> dict[str, str]:
    """The region's subnet the nodes join (model.plan.subnet_preference)."""
    if not subnetworks:
        raise pulumi.RunError(
            "the region has no subnetwork: create one (or a network in auto "
            "mode) or give networkInterfaces in every node_config"
        )
    entries = sorted(subnetworks, key=lambda s: subnet_preference(_get(s, "name")))
    chosen = entries[0]
    return {"subnetwork": _get(chosen, "self_link"), "network": _get(chosen, "network")}


def _get(entry: Any, key: str) -> str:
    return entry[key] if isinstance(entry, dict) else getattr(entry, key)


@dataclass(frozen=True)
class GivenNetwork:
    """A network and/or subnetwork the cluster joins and does not own (another stack's, by
    StackReference): Pulumi inputs, each checked when known (model.config.network_refs).
    `network_source` and `subnetwork_source` name them in an error."""

    network: pulumi.Input[str] | None = None
    subnetwork: pulumi.Input[str] | None = None
    network_source: str = "RayClusterArgs.network"
    subnetwork_source: str = "RayClusterArgs.subnetwork"


class ClusterNetwork(pulumi.ComponentResource):
    """The subnet every node uses and the cluster's firewall rules."""

    network: pulumi.Output[str]
    subnetwork: pulumi.Output[str | None]

    def __init__(self, name: str, plan: ClusterPlan, opts: pulumi.ResourceOptions | None = None,
                 given: GivenNetwork | None = None):
        super().__init__("ray-gcp:index:ClusterNetwork", name, None, opts)
        config = plan.config
        child = pulumi.ResourceOptions(parent=self, depends_on=waits_for(opts))
        if given is not None:
            self.network, self.subnetwork = _given_network(plan, given, self)
        elif config.uses_explicit_network:
            first = _first_interface(config)
            network = (
                first.network
                or gcp.compute.get_subnetwork_output(
                    self_link=first.subnetwork, opts=pulumi.InvokeOptions(parent=self)
                ).network
            )
            self.network = pulumi.Output.from_input(network)
            self.subnetwork = pulumi.Output.from_input(first.subnetwork)
        else:
            found = gcp.compute.get_subnetworks_output(
                project=plan.project, region=plan.region, opts=pulumi.InvokeOptions(parent=self)
            ).subnetworks.apply(pick_subnetwork)
            self.network = found.apply(lambda s: s["network"])
            self.subnetwork = found.apply(lambda s: s["subnetwork"])
        firewall = plan.firewall
        self.internal = gcp.compute.Firewall(
            f"{firewall.cluster_tag}-internal",
            project=plan.project,
            network=self.network,
            description=f"Ray cluster {config.cluster_name}: every port between its nodes",
            direction="INGRESS",
            source_tags=[firewall.cluster_tag],
            target_tags=[firewall.cluster_tag],
            allows=[
                gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["0-65535"]),
                gcp.compute.FirewallAllowArgs(protocol="udp", ports=["0-65535"]),
                gcp.compute.FirewallAllowArgs(protocol="icmp"),
            ],
            opts=child,
        )
        self.ssh = gcp.compute.Firewall(
            f"{firewall.cluster_tag}-ssh",
            project=plan.project,
            network=self.network,
            description=f"Ray cluster {config.cluster_name}: SSH to the head",
            direction="INGRESS",
            source_ranges=list(firewall.ssh_source_ranges),
            target_tags=[firewall.head_tag],
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
            opts=child,
        )
        if firewall.cloud_nat:
            self.router, self.nat = _cloud_nat(plan, self.network, self.subnetwork, child)
        self.register_outputs({"network": self.network, "subnetwork": self.subnetwork})

    def interfaces_for(self, group: NodeGroupPlan) -> pulumi.Output[list[dict[str, Any]]]:
        """The group's `networkInterfaces` in Compute API JSON."""
        node_config = group.node_config
        if isinstance(node_config, ComputeNodeConfig) and node_config.network_interfaces:
            return pulumi.Output.from_input(
                [interface.body() for interface in node_config.network_interfaces]
            )
        access = [dict(EXTERNAL_NAT)] if group.external_ip else []
        return pulumi.Output.all(self.network, self.subnetwork).apply(
            lambda pair: [{"network": pair[0], "subnetwork": pair[1], "accessConfigs": access}]
        )


def _cloud_nat(
    plan: ClusterPlan,
    network: pulumi.Output[str],
    subnetwork: pulumi.Output[str | None],
    child: pulumi.ResourceOptions,
) -> tuple[gcp.compute.Router, gcp.compute.RouterNat]:
    """A Cloud Router in the cluster's region and network, and a NAT on it for the cluster's
    subnet only (its primary and secondary ranges): another subnet of the network keeps
    whatever egress it has. Addresses are Google's (AUTO_ONLY), nothing to reserve; only
    errors are logged."""
    name = f"ray-{plan.config.cluster_name}"
    router = gcp.compute.Router(
        f"{name}-router",
        name=f"{name}-router",
        project=plan.project,
        region=plan.region,
        network=network,
        description=f"Ray cluster {plan.config.cluster_name}: Cloud NAT for private nodes",
        opts=child,
    )
    nat = gcp.compute.RouterNat(
        f"{name}-nat",
        name=f"{name}-nat",
        project=plan.project,
        region=plan.region,
        router=router.name,
        nat_ip_allocate_option="AUTO_ONLY",
        # A YAML naming only a network (no subnet) gets every subnet of it in the region.
        source_subnetwork_ip_ranges_to_nat=subnetwork.apply(
            lambda link: "LIST_OF_SUBNETWORKS" if link else "ALL_SUBNETWORKS_ALL_IP_RANGES"
        ),
        subnetworks=subnetwork.apply(
            lambda link: [
                gcp.compute.RouterNatSubnetworkArgs(
                    name=link, source_ip_ranges_to_nats=["ALL_IP_RANGES"]
                )
            ] if link else []
        ),
        log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
        opts=child,
    )
    return router, nat


def _given_network(plan: ClusterPlan, given: GivenNetwork, parent: pulumi.Resource
                   ) -> tuple[pulumi.Output[str], pulumi.Output[str | None]]:
    """The given network and subnet as partial URLs; a subnet alone names its network (read
    from the subnet, as Compute infers it)."""
    project, region = plan.project, plan.region
    subnetwork: pulumi.Output[str | None] = pulumi.Output.from_input(None)
    if given.subnetwork is not None:
        # An Output that resolves to None (a network stack exporting no subnet) names none.
        subnetwork = pulumi.Output.from_input(given.subnetwork).apply(_checked(
            lambda value: None if value is None else subnetwork_path(
                value, project, region, given.subnetwork_source)))
    if given.network is None:
        found = gcp.compute.get_subnetwork_output(self_link=subnetwork,
                                                  opts=pulumi.InvokeOptions(parent=parent))
        return found.network, subnetwork
    network = pulumi.Output.from_input(given.network).apply(_checked(
        lambda value: network_path(value, project, given.network_source)))
    return network, subnetwork


def _checked(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A check for Output.apply: a ConfigError ends the run with its lines, no traceback."""
    def apply(value: Any) -> Any:
        try:
            return check(value)
        except ConfigError as error:
            raise pulumi.RunError(str(error)) from None
    return apply


def _first_interface(config: ClusterConfig) -> NetworkInterface:
    """The interface whose network the firewall rules guard: the head's, when it has one."""
    head = config.head_type.node_config
    computes = (
        [head]
        if isinstance(head, ComputeNodeConfig)
        else [
            t.node_config
            for t in config.available_node_types.values()
            if isinstance(t.node_config, ComputeNodeConfig)
        ]
    )
    return computes[0].network_interfaces[0]
