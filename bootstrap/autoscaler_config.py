"""`~/ray_bootstrap_config.yaml`: the cluster config as the head's Ray autoscaler reads it.

It mirrors what `ray up` writes to the head (`_set_up_config_for_head_node`): auth points at
the key copied to the head, file mounts point at their own remote paths, and the provider
section carries what Ray's GCPNodeProvider reads (project, zone, and `_has_tpus` so it builds a
TPU client). The provider is the head's own (`type: external`, bootstrap/head_provider): Ray's
GCPNodeProvider with our launch path, which also reads `capacity` (the spot types that fall
back to on-demand). Each node type's `node_config` is the final body the program created nodes with,
kept exactly as given: the autoscaler hashes it to recognise its own nodes as up to date.

Pulumi's workers are unmanaged nodes to Ray (model/labels.py), and both autoscalers count them
(resource requests, pending demand, `max_workers`) without ever terminating them. Autoscaler v1
counts them towards their type's size, so a type's `min_workers` here is only what Pulumi does
not already keep, and under v1 the config does not change when a worker count does (no window in
which the head's autoscaler sees a new minimum before the worker group has made the nodes).
Autoscaler v2 drops unmanaged instances, so under v2 every node type also gets its pinned twin
(bootstrap/head_provider/pinned.py): a type `<type>.pinned` with the type's resources, room for
the type's maximum, no minimum and no idle timeout, which the head's provider reports Pulumi's
nodes as. The type itself keeps for the autoscaler's own workers what Pulumi's leave: its
`max_workers` lowered by the count; the cluster's `max_workers` is the YAML's, Pulumi's nodes
being among the nodes v2 counts.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from bootstrap.head_provider import pinned
from bootstrap.head_provider.capacity import PROVIDER_FIELD as CAPACITY_PROVIDER_FIELD
from bootstrap.head_provider.spend import PROVIDER_FIELD as SPEND_CAP_PROVIDER_FIELD
from bootstrap.head_provider_metadata import PROVIDER_MODULE
from model.config import ClusterConfig

REMOTE_KEY_PATH = "~/ray_bootstrap_key.pem"
REMOTE_CONFIG_PATH = "~/ray_bootstrap_config.yaml"
HAS_TPU_PROVIDER_FIELD = "_has_tpus"  # ray.autoscaler._private.gcp.config
DISABLE_NODE_UPDATERS_FIELD = "disable_node_updaters"  # ray.autoscaler._private.constants


def autoscaler_config(
    config: ClusterConfig,
    node_configs: Mapping[str, dict],
    worker_counts: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The dict to write as YAML to the head's `~/ray_bootstrap_config.yaml`.

    `worker_counts` are the workers of each type the program's worker groups keep (the plan's
    resolved counts, each at least the type's `min_workers`). Ray counts those towards the
    type's minimum when it launches, but keeps only its own workers for it when it retires idle
    ones: so each type's `min_workers` becomes what the count leaves, `max(0, min - count)`, or an
    idle worker of its own would be kept beside ours for good. Under autoscaler v2 each worker
    type's maximum is lowered by its count too, and its pinned twin added (module docstring)."""
    missing = sorted(set(config.available_node_types) - set(node_configs))
    if missing:
        raise ValueError(
            f"no final node_config for node types {missing}: pass one body per type in "
            "available_node_types"
        )
    data = config.ray_dict()
    data["auth"] = {"ssh_user": config.auth.ssh_user, "ssh_private_key": REMOTE_KEY_PATH}
    data["file_mounts"] = {target: target for target in config.file_mounts}
    data["no_restart"] = False
    data["provider"] = _provider(config)
    # `ray up` writes the prepared config, whose role commands already begin with
    # `setup_commands` (Ray's merge_setup_commands); the head's autoscaler reads it as is when
    # it sets up the workers it launches.
    data["head_setup_commands"] = config.setup_commands_for("head", config.head_node_type)
    data["worker_setup_commands"] = [*config.setup_commands, *config.worker_setup_commands]
    counts = worker_counts or {}
    for name, node_type in data["available_node_types"].items():
        node_type["node_config"] = copy.deepcopy(node_configs[name])
        if "worker_setup_commands" in node_type:
            node_type["worker_setup_commands"] = config.setup_commands_for("worker", name)
        node_type["min_workers"] = max(0, node_type.get("min_workers", 0) - counts.get(name, 0))
    if config.provider.autoscaler_version == "v2":
        _add_pinned_twins(data, counts)
    return data


def _add_pinned_twins(data: dict[str, Any], counts: Mapping[str, int]) -> None:
    """Under v2: each node type's pinned twin (pinned.twin_type; every type's, even one Pulumi
    keeps none of, so that a node it has yet to remove still has its type), the type's maximum
    lowered by the count, and the provider section naming the twins. A twin's name cannot be a
    user's type: type names are GCE label values, which have no `.`."""
    types = data["available_node_types"]
    twins: dict[str, str] = {}
    for name in list(types):
        node_type, count = types[name], counts.get(name, 0)
        types[pinned.twin(name)] = pinned.twin_type(node_type, count)
        if "max_workers" in node_type:
            node_type["max_workers"] = max(node_type["min_workers"],
                                           node_type["max_workers"] - count)
        twins[pinned.twin(name)] = name
    data["provider"][pinned.PROVIDER_FIELD] = twins


def _provider(config: ClusterConfig) -> dict[str, Any]:
    """The keys GCPNodeProvider and its clients read; credentials stay out (the head runs
    as the autoscaler service account)."""
    provider = config.provider
    section: dict[str, Any] = {
        # Ray's loader for a provider of one's own (ray.autoscaler._private.providers).
        "type": "external",
        "module": PROVIDER_MODULE,
        "project_id": provider.project,
        "region": provider.region,
        "availability_zone": provider.availability_zone,
        "cache_stopped_nodes": provider.cache_stopped_nodes,
        # A private cluster's nodes have no other address to dial.
        "use_internal_ips": provider.use_internal_ips or bool(provider.private_cluster),
        # Every node sets itself up from its startup script, the autoscaler's own included:
        # Ray's SSH updaters would race it (`ray stop` mid-boot), as they do for KubeRay.
        DISABLE_NODE_UPDATERS_FIELD: True,
    }
    if config.has_tpu:
        section[HAS_TPU_PROVIDER_FIELD] = True
    capacity = {name: config.provider.capacity_input(name) for name in provider.capacity or {}}
    if capacity:
        section[CAPACITY_PROVIDER_FIELD] = capacity
    if provider.spend_cap is not None:  # the amounts and prices: the head's `ray-spend-cap`
        section[SPEND_CAP_PROVIDER_FIELD] = True
    return section
