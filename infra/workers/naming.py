"""Names and labels of a worker group's nodes: what Ray expects and how we find our own.

Ray's autoscaler recognises workers by `ray-cluster-name`, `ray-node-type` and
`ray-user-node-type`. We add `ray-gcp-group`, a hash of everything that defines the group, so
our nodes can be told from the autoscaler's and found again after a half-failed call: the
labels in the cloud, not Pulumi's state, are the source of truth.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from typing import Any

GROUP_LABEL = "ray-gcp-group"
CLUSTER_LABEL = "ray-cluster-name"
MAX_NAME_LENGTH = 63

# What decides which nodes a group owns; a change to any of these makes a new group.
IDENTITY_KEYS = ("project", "zone", "cluster_name", "node_type", "name_prefix", "body")


def group_id(props: Mapping[str, Any]) -> str:
    """Stable id of a group: the same inputs find the same nodes after a failed create."""
    identity = {key: props.get(key) for key in IDENTITY_KEYS}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return f"g{digest[:16]}"


def resource_id(props: Mapping[str, Any]) -> str:
    return f"projects/{props['project']}/zones/{props['zone']}/workerGroups/{group_id(props)}"


def ray_worker_labels(cluster_name: str, node_type: str) -> dict[str, str]:
    """The labels every worker of this type carries, ours or the autoscaler's."""
    return {
        CLUSTER_LABEL: cluster_name,
        "ray-node-type": "worker",
        "ray-user-node-type": node_type,
    }


def new_node_name(name_prefix: str) -> str:
    """`<prefix>-<8 hex>-compute`, as Ray's node provider names instances."""
    name = f"{name_prefix}-{secrets.token_hex(4)}-compute"
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(
            f"node name {name!r} is longer than {MAX_NAME_LENGTH} characters: "
            "shorten the cluster name"
        )
    return name
