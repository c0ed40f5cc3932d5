"""The program's top: stack config -> ClusterConfig -> ClusterPlan -> RayCluster -> exports."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.cluster import RayCluster
from infra.config import ClusterConfig, ConfigError, load_cluster_config, parse_cluster_config
from infra.metadata_limits import check_metadata_limits
from infra.plan import check_boot_disks, plan_cluster
from infra.stack_config import PROJECT_ROOT, resolve_cluster_path

CONFIG_NAMESPACE = "ray-gcp"


def read_cluster_config(settings: pulumi.Config) -> tuple[ClusterConfig, str]:
    """`ray-gcp:cluster` (a YAML path) or `ray-gcp:clusterConfig` (the YAML inline)."""
    inline = settings.get_object("clusterConfig")
    if inline is not None:
        return parse_cluster_config(inline, "ray-gcp:clusterConfig"), ""
    path = settings.get("cluster")
    if not path:
        raise ConfigError(
            [
                (
                    "ray-gcp:cluster",
                    f"stacks/Pulumi.{pulumi.get_stack()}.yaml names no cluster: run "
                    "`pulumi config set ray-gcp:cluster stacks/clusters/<name>.yaml`",
                )
            ]
        )
    resolved = resolve_cluster_path(path)
    shown = (
        str(resolved.relative_to(PROJECT_ROOT))
        if resolved.is_relative_to(PROJECT_ROOT)
        else str(resolved)
    )
    return load_cluster_config(resolved), shown


def gcp_provider(config: ClusterConfig) -> gcp.Provider | None:
    """An explicit provider when the YAML carries credentials; otherwise ADC as usual."""
    credentials = config.provider.gcp_credentials
    if credentials is None:
        return None
    secret = pulumi.Output.secret(credentials.credentials.get_secret_value())
    key = "credentials" if credentials.type == "service_account" else "access_token"
    return gcp.Provider(
        "gcp",
        project=config.provider.project,
        zone=config.provider.availability_zone,
        **{key: secret},
    )


def define_cluster() -> RayCluster:
    settings = pulumi.Config(CONFIG_NAMESPACE)
    config, config_file = read_cluster_config(settings)
    plan = plan_cluster(config, settings.get_object("workerCounts"))
    check_metadata_limits(plan)
    check_boot_disks(plan)
    provider = gcp_provider(config)
    credentials = config.provider.gcp_credentials
    cluster = RayCluster(
        config.cluster_name,
        plan,
        credentials=(
            pulumi.Output.secret(credentials.credentials.get_secret_value())
            if credentials is not None and credentials.type == "service_account"
            else None
        ),
        opts=pulumi.ResourceOptions(providers=[provider] if provider else None),
    )
    export_outputs(cluster, config, config_file)
    return cluster


def export_outputs(cluster: RayCluster, config: ClusterConfig, config_file: str) -> None:
    """What `invoke attach`, `exec`, `status` and the user need next."""
    head = cluster.head
    pulumi.export("cluster_name", config.cluster_name)
    pulumi.export("project", config.provider.project)
    pulumi.export("zone", config.provider.availability_zone)
    pulumi.export("cluster_config_file", config_file)
    pulumi.export("head_name", head.name)
    pulumi.export("head_internal_ip", head.internal_ip)
    pulumi.export("head_external_ip", head.external_ip)
    pulumi.export("ssh_user", config.auth.ssh_user)
    pulumi.export("ssh_port", 22)
    pulumi.export("ssh_private_key", cluster.ssh_key.private_key)
    pulumi.export("service_account_email", cluster.service_account.email)
    pulumi.export(
        "docker_container_name", config.docker.container_name if config.docker.enabled else ""
    )
    pulumi.export("dashboard_url", "http://localhost:8265 (after `invoke attach -p 8265`)")
    groups = cluster.worker_groups
    instance_names = {node_type: group.instance_names for node_type, group in groups.items()}
    pulumi.export(
        "node_names",
        # Output.all() of nothing is a list: a head-only cluster has no groups to name.
        (pulumi.Output.all(**instance_names) if instance_names else pulumi.Output.from_input({}))
        .apply(lambda names: _node_names(config, head.name, names)),
    )
    pulumi.export(
        "nodes",
        pulumi.Output.all(
            head.internal_ip,
            head.external_ip,
            *[group.instances for group in groups.values()],
        ).apply(lambda values: _nodes(config, head.name, list(groups), values)),
    )


def _node_names(config: ClusterConfig, head_name: str, workers: dict[str, list[str]]):
    names = {name: list(workers.get(name) or []) for name in config.available_node_types}
    names[config.head_node_type] = [head_name, *names[config.head_node_type]]
    return names


def _nodes(
    config: ClusterConfig, head_name: str, worker_types: list[str], values: list[Any]
) -> list[dict[str, Any]]:
    internal, external, *groups = values
    nodes = [
        {
            "name": head_name,
            "node_type": config.head_node_type,
            "kind": "head",
            "internal_ip": internal,
            "external_ip": external,
            "status": "RUNNING",
        }
    ]
    for node_type, instances in zip(worker_types, groups, strict=True):
        nodes += [
            {
                "name": i["name"],
                "node_type": node_type,
                "kind": "worker",
                "internal_ip": i.get("internal_ip"),
                "external_ip": i.get("external_ip"),
                "status": i.get("status"),
            }
            for i in instances or []
        ]
    return nodes
