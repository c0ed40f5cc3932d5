"""The program's top: stack config -> ClusterConfig -> RayCluster -> the stack's outputs.

The stack outputs are what another stack reads through `pulumi.StackReference` (the README's
"Stack outputs"): `cluster_name`, `project`, `zone`, `head_name`, `head_internal_ip`,
`head_external_ip`, `bucket_name`, `network`, `subnetwork`, `service_account_email`,
`worker_service_account_email`, `dashboard_url`, `nodes`, `node_names`, ... (secrets:
`ssh_private_key`, `ray_auth_token`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_gcp as gcp

from bootstrap.node_metadata import script_versions
from infra.cluster import DASHBOARD_URL, RayCluster
from infra.cluster_args import ClusterConfigError, RayClusterArgs
from model.config import (
    ClusterConfig,
    ConfigError,
    TpuNodeConfig,
    load_cluster_config,
    parse_cluster_config,
)
from model.config.network_refs import network_path, networks_named_by_yaml, subnetwork_path
from model.stack_config import NETWORK_STACK_KEY, PROJECT_ROOT, resolve_cluster_path

CONFIG_NAMESPACE = "ray-gcp"
STACK_KEY_PREFIX = f"{CONFIG_NAMESPACE}:"
NETWORK_STACK = NETWORK_STACK_KEY.removeprefix(STACK_KEY_PREFIX)


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
    try:
        return _define(settings, config, config_file)
    except ConfigError as error:
        raise _naming_the_file(error, config_file) from None


def _naming_the_file(error: ConfigError, config_file: str) -> ConfigError:
    """Every config error names its file: the stack file for `ray-gcp:` keys (worker counts),
    else the cluster YAML (or the inline `ray-gcp:clusterConfig`)."""
    if error.source:
        return error
    if all(path.startswith(STACK_KEY_PREFIX) for path, _ in error.problems):
        return ConfigError(error.problems, f"stacks/Pulumi.{pulumi.get_stack()}.yaml")
    return ConfigError(error.problems, config_file or f"{STACK_KEY_PREFIX}clusterConfig")


def network_from_stack(settings: pulumi.Config, config: ClusterConfig
                       ) -> tuple[pulumi.Output[str] | None, pulumi.Output[str | None] | None]:
    """`ray-gcp:networkStack: org/net/prod`: the network and subnetwork that stack exports
    (outputs `network`, `subnetwork`), read by StackReference, each checked with the stack
    named in its error; (None, None) without the key. The cluster YAML then names no network."""
    stack = settings.get(NETWORK_STACK)
    if not stack:
        return None, None
    named = networks_named_by_yaml(config)
    if named:
        raise ConfigError([(NETWORK_STACK_KEY,
                            f"the cluster YAML names the network too ({named[0]}): take it "
                            "from one place, remove one of the two")])
    reference = pulumi.StackReference(f"{NETWORK_STACK}-{stack}", stack_name=stack)
    project, region = config.provider.project, config.provider.region
    where = f"{NETWORK_STACK_KEY}: stack {stack}'s output"

    def network(value: Any) -> str:
        if value is None:
            raise pulumi.RunError(f"{where} `network` is missing: export the VPC network from "
                                  "it (pulumi.export(\"network\", network.id))")
        return _checked_ref(lambda: network_path(value, project, f"{where} `network`"))

    def subnetwork(value: Any) -> str | None:
        return None if value is None else _checked_ref(
            lambda: subnetwork_path(value, project, region, f"{where} `subnetwork`"))

    return (reference.get_output("network").apply(network),
            reference.get_output("subnetwork").apply(subnetwork))


def _checked_ref(check: Callable[[], str]) -> str:
    try:
        return check()
    except ConfigError as error:
        raise pulumi.RunError(str(error).split("\n", 1)[-1].strip()) from None


def _define(settings: pulumi.Config, config: ClusterConfig, config_file: str) -> RayCluster:
    provider = gcp_provider(config)
    network, subnetwork = network_from_stack(settings, config)
    try:
        cluster = RayCluster(
            config.cluster_name,
            RayClusterArgs(config=config, worker_counts=settings.get_object("workerCounts"),
                           adopt=settings.get_object("adopt"), network=network,
                           subnetwork=subnetwork),
            opts=pulumi.ResourceOptions(providers=[provider] if provider else None),
        )
    except ClusterConfigError as error:
        raise error.error from None
    archive = cluster.file_mounts
    versions: pulumi.Input[dict[str, str]] = (
        script_versions(config)
        if archive is None
        # Versions of scripts that name the archive by its keyed hash: no secret in them.
        else pulumi.Output.unsecret(archive.apply(lambda value: script_versions(config, value)))
    )
    export_outputs(cluster, config, config_file, versions)
    return cluster


def export_outputs(
    cluster: RayCluster,
    config: ClusterConfig,
    config_file: str,
    versions: pulumi.Input[dict[str, str]],
) -> None:
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
    # How the tasks reach the head (IAP in private mode): a template that
    # ops/remote/ssh_proxy.py fills in.
    pulumi.export("ssh_proxy_command", config.provider.proxy_command or "")
    # With OS Login the tasks register the stack's key for this account (ops/remote/os_login.py).
    pulumi.export("os_login", config.provider.os_login is not None)
    pulumi.export("os_login_account", config.provider.os_login_account)
    pulumi.export("ssh_private_key", cluster.ssh_key.private_key)
    # A secret: the day-two tasks read it to reach the dashboard; "" when token auth is off.
    pulumi.export("ray_auth_token", cluster.ray_token.token if cluster.ray_token else "")
    pulumi.export("service_account_email", cluster.service_account_email)
    pulumi.export("worker_service_account_email", cluster.worker_service_account_email)
    pulumi.export("bucket_name", cluster.bucket_name)
    pulumi.export("network", cluster.network_name)
    pulumi.export("subnetwork", cluster.subnetwork)
    pulumi.export(
        "docker_container_name", config.docker.container_name if config.docker.enabled else ""
    )
    # What each node reports once it runs the current script (`invoke status` compares).
    pulumi.export("script_versions", versions)
    pulumi.export("dashboard_url", DASHBOARD_URL)
    groups = cluster.worker_groups
    # Positional, not keyword: `Output.all()` of no outputs is a list, even with `**{}`.
    pulumi.export(
        "node_names",
        pulumi.Output.all(*[group.instance_names for group in groups.values()]).apply(
            lambda names: _node_names(config, head.name, dict(zip(groups, names, strict=True)))
        ),
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
            "zone": config.provider.availability_zone,
            "market": _head_market(config),
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
                "zone": i.get("zone") or config.provider.availability_zone,
                "market": i.get("market") or "",
            }
            for i in instances or []
        ]
    return nodes


def _head_market(config: ClusterConfig) -> str:
    """The head is what its node_config asks: it never falls back."""
    head = config.head_type.node_config
    if isinstance(head, TpuNodeConfig):
        return ""
    return "spot" if head.scheduling.is_preemptible else "on-demand"


def run_program() -> None:
    """The program as the engine runs it (infra/__main__.py, or inline through the Automation
    API): a config error ends the run with its message, not a traceback."""
    try:
        define_cluster()
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None
