"""A cluster made as `ray up` makes it, with Ray's own launcher code from the wheel, against the
fake cloud: `commands._bootstrap_config` (Ray's GCP `bootstrap_gcp`: the project, the
`ray-autoscaler-sa-v1` account and its role bindings, the SSH key pair it generates into
`~/.ssh` and adds to the project's `ssh-keys` metadata, the subnet), then `GCPNodeProvider`
creating the head with the tags `get_or_create_head_node` gives it and each worker type's
`min_workers` with the tags the autoscaler's NodeLauncher gives them. What `ray up` does over
SSH (the updater) is not run: its outcome, the labels it sets once setup finished
(`ray-node-status: up-to-date`, `ray-runtime-config`), is set through the same provider.

Ray's Google API clients are built as Ray builds them (discovery documents, Ray's own
`build_request`), pointed at the fake, with the user's credentials (ADC), as `ray up` runs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
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


def ray_up(cluster_yaml: dict[str, Any], demand: dict[str, int] | None = None) -> RayMade:
    """`ray up` of `cluster_yaml` without SSH: what it creates, as Ray's code creates it;
    `demand`: workers per type the autoscaler launched beyond `min_workers` (for pending
    work)."""
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
    runtime_hash, _ = hash_runtime_conf(
        config["file_mounts"], config["cluster_synced_files"],
        [config["worker_setup_commands"], config["worker_start_ray_commands"]])
    head_type = config["head_node_type"]
    # commands.get_or_create_head_node: the deprecated `head_node` (bootstrap_gcp put the
    # service account there) under the head type's node_config.
    head_config = {**copy.deepcopy(config.get("head_node", {})),
                   **config["available_node_types"][head_type]["node_config"]}
    head_tags = {TAG_RAY_NODE_KIND: NODE_KIND_HEAD, TAG_RAY_USER_NODE_TYPE: head_type,
                 TAG_RAY_LAUNCH_CONFIG: hash_launch_conf(head_config, config["auth"]),
                 TAG_RAY_NODE_NAME: f"ray-{name}-head", TAG_RAY_NODE_STATUS: STATUS_UNINITIALIZED}
    provider.create_node(head_config, head_tags, 1)
    (head,) = provider.non_terminated_nodes({TAG_RAY_NODE_KIND: NODE_KIND_HEAD})
    ready = {TAG_RAY_NODE_STATUS: STATUS_UP_TO_DATE, TAG_RAY_RUNTIME_CONFIG: runtime_hash}
    provider.set_node_tags(head, ready)
    workers: dict[str, list[str]] = {}
    for node_type, spec in sorted(config["available_node_types"].items()):
        count = (spec.get("min_workers", 0) + (demand or {}).get(node_type, 0)
                 if node_type != head_type else 0)
        if not count:
            continue
        node_config = spec["node_config"]
        tags = {TAG_RAY_NODE_NAME: f"ray-{name}-worker", TAG_RAY_NODE_KIND: NODE_KIND_WORKER,
                TAG_RAY_NODE_STATUS: STATUS_UNINITIALIZED, TAG_RAY_USER_NODE_TYPE: node_type,
                TAG_RAY_LAUNCH_CONFIG: hash_launch_conf(node_config, config["auth"])}
        provider.create_node(node_config, tags, count)
        made = provider.non_terminated_nodes({TAG_RAY_USER_NODE_TYPE: node_type,
                                              TAG_RAY_NODE_KIND: NODE_KIND_WORKER})
        for node in made:
            provider.set_node_tags(node, ready)
        workers[node_type] = sorted(made)
    return RayMade(config=config, head=head, workers=workers)


def ray_sees(config: dict[str, Any]) -> list[str]:
    """What `ray down`'s teardown_cluster would find: Ray's provider's non-terminated nodes of
    the cluster (a fresh provider, no cache)."""
    ray_providers._provider_instances.clear()
    return sorted(ray_provider(config).non_terminated_nodes({}))
