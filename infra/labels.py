"""Ray's node labels on GCP, so the autoscaler on the head recognises our nodes as its own."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any, Literal

CLUSTER_NAME = "ray-cluster-name"
NODE_KIND = "ray-node-type"  # Ray's tag key: "head" or "worker"
NODE_NAME = "ray-node-name"
USER_NODE_TYPE = "ray-user-node-type"
LAUNCH_CONFIG = "ray-launch-config"


def node_name_prefix(cluster_name: str, role: Literal["head", "worker"]) -> str:
    """`ray-<cluster>-head` / `ray-<cluster>-worker`: Ray's `ray-node-name` value."""
    return f"ray-{cluster_name}-{role}"


def ray_labels(
    cluster_name: str, role: Literal["head", "worker"], node_type: str
) -> dict[str, str]:
    """The labels every node carries; the launch hash is added once the key is known."""
    return {
        CLUSTER_NAME: cluster_name,
        NODE_KIND: role,
        NODE_NAME: node_name_prefix(cluster_name, role),
        USER_NODE_TYPE: node_type,
    }


def launch_config_hash(node_config: dict[str, Any], auth: dict[str, str]) -> str:
    """Ray's launch hash: sha256 of JSON `[node_config, auth]` (keys sorted), where `auth`
    holds the key *contents*, in lowercase unpadded base32hex (a valid GCE label value).
    A node whose label differs is "outdated" to Ray's autoscaler and gets terminated, so this
    must agree with what the head computes from its bootstrap config."""
    text = json.dumps([node_config, auth], sort_keys=True)
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return base64.b32hexencode(digest).decode("ascii").lower().rstrip("=")


def short_hash(data: Any) -> str:
    """8 hex characters naming a node by its config: a new config gets a new name, so
    create-before-delete replacement never collides."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]
