"""The program's top: stack config -> ClusterConfig -> ClusterPlan -> RayCluster -> exports."""

from __future__ import annotations

import os
from typing import Any

import pulumi
import pulumi_gcp as gcp

from bootstrap.file_mounts import pack_file_mounts, synced_files_outside_mounts
from bootstrap.node_metadata import script_versions
from infra.cluster import RayCluster, RayClusterArgs
from infra.metadata import REAPPLY_ENV
from infra.metadata_limits import check_metadata_limits
from model.config import (
    ClusterConfig,
    ConfigError,
    TpuNodeConfig,
    load_cluster_config,
    parse_cluster_config,
)
from model.labels import stack_identity
from model.plan import check_boot_disks, plan_cluster
from model.stack_config import PROJECT_ROOT, resolve_cluster_path

CONFIG_NAMESPACE = "ray-gcp"
# host:port of an emulator (the tests' fake cloud) that the dynamic providers call instead of
# Google's APIs, over plain http; `invoke kill-random-node --hard` reads the same variable.
API_ENDPOINT_ENV = "RAY_GCP_API_ENDPOINT"
STACK_KEY_PREFIX = f"{CONFIG_NAMESPACE}:"


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


def warn_unsynced_files(config: ClusterConfig) -> None:
    """`cluster_synced_files` outside every mount target reach no other node: say so."""
    for path in synced_files_outside_mounts(config):
        pulumi.log.warn(
            f"cluster_synced_files {path}: not under any file_mounts target, so no node gets it "
            "(every node fetches file_mounts from the cluster's bucket, nothing is copied from "
            "the head): add its local source to file_mounts"
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


def _define(settings: pulumi.Config, config: ClusterConfig, config_file: str) -> RayCluster:
    for warning in [*config.warnings, *config.review_warnings]:
        pulumi.log.warn(warning)
    plan = plan_cluster(config, settings.get_object("workerCounts"))
    check_boot_disks(plan)
    # Packed once: every node's script names the archive by its content's keyed hash.
    mounts = pack_file_mounts(config)
    check_metadata_limits(plan, mounts.stand_in() if mounts is not None else None)
    warn_unsynced_files(config)
    provider = gcp_provider(config)
    credentials = config.provider.gcp_credentials
    cluster = RayCluster(
        config.cluster_name,
        RayClusterArgs(
            plan,
            # Either type (service-account JSON or OAuth token): the worker groups and the
            # sweeper call Google APIs as the same identity as the gcp provider, never ADC
            # behind its back.
            credentials=(
                pulumi.Output.secret(credentials.credentials.get_secret_value())
                if credentials is not None
                else None
            ),
            reapply_request=os.environ.get(REAPPLY_ENV, ""),
            api_endpoint=os.environ.get(API_ENDPOINT_ENV) or None,
            mounts=mounts,
            stack=stack_identity(pulumi.get_organization(), pulumi.get_project(),
                                 pulumi.get_stack()),
        ),
        opts=pulumi.ResourceOptions(providers=[provider] if provider else None),
    )
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
    pulumi.export("service_account_email", cluster.service_account.email)
    pulumi.export(
        "docker_container_name", config.docker.container_name if config.docker.enabled else ""
    )
    # What each node reports once it runs the current script (`invoke status` compares).
    pulumi.export("script_versions", versions)
    pulumi.export("dashboard_url", "http://localhost:8265 (after `invoke attach -p 8265`)")
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
