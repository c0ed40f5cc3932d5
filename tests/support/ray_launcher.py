"""A cluster made as `ray up` makes it, with Ray's own launcher code from the wheel, against the
fake cloud: `commands._bootstrap_config` (Ray's GCP `bootstrap_gcp`: the project, the
`ray-autoscaler-sa-v1` account and its role bindings, the SSH key pair it generates into
`~/.ssh` and adds to the project's `ssh-keys` metadata, the subnet), then
`commands.get_or_create_head_node` (the head, with the tags and launch hash `ray up` gives it;
a head whose launch hash changed is terminated and made anew, as a second `ray up` of a changed
head does), then each worker type's `min_workers` through `GCPNodeProvider` with the tags the
autoscaler's NodeLauncher gives them. What `ray up` does over SSH is left out: Ray's
`NodeUpdaterThread` runs without its `do_update` (the SSH, the setup and `ray start`), so it
ends as after a setup that succeeded, setting the tags it sets then (`ray-node-status:
up-to-date`, `ray-runtime-config`); the workers get the same.

Ray's Google API clients are built as Ray builds them (discovery documents, Ray's own
`build_request`), pointed at the fake, with the user's credentials (ADC), as `ray up` runs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
import ray.autoscaler._private.commands as ray_commands
import ray.autoscaler._private.gcp.config as ray_gcp_config
import ray.autoscaler._private.providers as ray_providers
from google.oauth2.credentials import Credentials
from googleapiclient import discovery

from tests.fakes.compute import FakeComputeServer


@dataclass
class RayMade:
    """What Ray's launcher made: the bootstrapped config (as `ray up` keeps it), the head's
    name and each worker type's node names."""

    config: dict[str, Any]
    head: str
    workers: dict[str, list[str]]


def point_ray_at(fake: FakeComputeServer, monkeypatch: pytest.MonkeyPatch,
                 token: str | None = None) -> None:
    """Ray's `_create_*` client builders at the fake, as the user (or `token`'s identity)."""

    def builder(api: str, version: str, path: str):
        def build(gcp_credentials=None):
            return discovery.build(
                api, version, credentials=Credentials(token=token or fake.user_token()),
                requestBuilder=ray_gcp_config.build_request, cache_discovery=False,
                static_discovery=True,
                client_options={"api_endpoint": f"http://{fake.endpoint}/{path}"})

        return build

    monkeypatch.setattr(ray_gcp_config, "_create_compute", builder("compute", "v1", "compute/v1/"))
    monkeypatch.setattr(ray_gcp_config, "_create_crm", builder("cloudresourcemanager", "v1", ""))
    monkeypatch.setattr(ray_gcp_config, "_create_iam", builder("iam", "v1", ""))
    monkeypatch.setattr(ray_providers, "_provider_instances", {})


def ray_provider(config: dict[str, Any]) -> Any:
    """Ray's node provider for the bootstrapped config (Ray's GCPNodeProvider)."""
    from ray.autoscaler._private.providers import _get_node_provider

    return _get_node_provider(config["provider"], config["cluster_name"])


class _UpdaterWithoutSsh(ray_commands.NodeUpdaterThread):
    """Ray's updater thread with nothing done over SSH: `run` ends as after `do_update`
    succeeded (it sets the node's status and runtime hash, exit code 0)."""

    def do_update(self) -> None:
        return None


def ray_up(cluster_yaml: dict[str, Any], demand: dict[str, int] | None = None) -> RayMade:
    """`ray up -y` of `cluster_yaml` without SSH: what it creates, as Ray's code creates it;
    `demand`: workers per type the autoscaler launched beyond `min_workers` (for pending
    work). Run again with a changed head node_config, it replaces the head as `ray up`
    does; workers already running are kept."""
    from ray.autoscaler._private.commands import _bootstrap_config, hash_runtime_conf
    from ray.autoscaler._private.util import hash_launch_conf
    from ray.autoscaler.tags import (
        NODE_KIND_HEAD,
        NODE_KIND_WORKER,
        STATUS_UNINITIALIZED,
        STATUS_UP_TO_DATE,
        TAG_RAY_LAUNCH_CONFIG,
        TAG_RAY_NODE_KIND,
        TAG_RAY_NODE_NAME,
        TAG_RAY_NODE_STATUS,
        TAG_RAY_RUNTIME_CONFIG,
        TAG_RAY_USER_NODE_TYPE,
    )

    config = _bootstrap_config(copy.deepcopy(cluster_yaml), no_config_cache=True)
    provider = ray_provider(config)
    name = config["cluster_name"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ray_commands, "NodeUpdaterThread", _UpdaterWithoutSsh)
        ray_commands.get_or_create_head_node(
            config, printable_config_file="cluster.yaml", no_restart=False, restart_only=False,
            yes=True, override_cluster_name=None, _provider=provider)
    (head,) = provider.non_terminated_nodes({TAG_RAY_NODE_KIND: NODE_KIND_HEAD})
    runtime_hash, _ = hash_runtime_conf(
        config["file_mounts"], config["cluster_synced_files"],
        [config["worker_setup_commands"], config["worker_start_ray_commands"]])
    ready = {TAG_RAY_NODE_STATUS: STATUS_UP_TO_DATE, TAG_RAY_RUNTIME_CONFIG: runtime_hash}
    workers: dict[str, list[str]] = {}
    for node_type, spec in sorted(config["available_node_types"].items()):
        if node_type == config["head_node_type"]:
            continue
        kind = {TAG_RAY_USER_NODE_TYPE: node_type, TAG_RAY_NODE_KIND: NODE_KIND_WORKER}
        count = spec.get("min_workers", 0) + (demand or {}).get(node_type, 0) \
            - len(provider.non_terminated_nodes(kind))
        if count > 0:
            node_config = spec["node_config"]
            provider.create_node(node_config, {
                **kind, TAG_RAY_NODE_NAME: f"ray-{name}-worker",
                TAG_RAY_NODE_STATUS: STATUS_UNINITIALIZED,
                TAG_RAY_LAUNCH_CONFIG: hash_launch_conf(node_config, config["auth"])}, count)
        made = provider.non_terminated_nodes(kind)
        for node in made:
            provider.set_node_tags(node, ready)
        if made:
            workers[node_type] = sorted(made)
    return RayMade(config=config, head=head, workers=workers)


def ray_sees(config: dict[str, Any]) -> list[str]:
    """What `ray down`'s teardown_cluster would find: Ray's provider's non-terminated nodes of
    the cluster (a fresh provider, no cache)."""
    ray_providers._provider_instances.clear()
    return sorted(ray_provider(config).non_terminated_nodes({}))
