"""Ray's node labels on GCP, so the autoscaler on the head knows every node of the cluster.

The keys and values are Ray's (`ray.autoscaler.tags`). Which node kind a node gets decides who
manages it:
- the head: `head`, as `ray up` labels it;
- nodes Pulumi keeps (worker groups): `unmanaged`. Ray's autoscaler counts an unmanaged node
  with a `ray-user-node-type` towards that type's size and packs demand onto it, but never
  terminates, health-checks or replaces it; Pulumi owns its lifetime;
- nodes the autoscaler launches itself: `worker` (Ray's own provider labels those).
Every node we label is `up-to-date`: it set itself up from its startup script.

Besides Ray's labels, everything a stack creates carries `ray-gcp-stack` (STACK), the stack's
identity (`stack_identity`): the sweeper deletes only nodes carrying its own, and a stack
refuses a cluster name whose nodes carry another's. It is kept out of the labels node names
are derived from (`identity_labels`, `NodeGroupPlan.node_name`): adding it to the nodes of a
stack deployed before it existed updates their labels in place, it renames (replaces) nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any, Literal

CLUSTER_NAME = "ray-cluster-name"
NODE_KIND = "ray-node-type"  # Ray's tag key for the node *kind*, despite its name
NODE_NAME = "ray-node-name"
USER_NODE_TYPE = "ray-user-node-type"
LAUNCH_CONFIG = "ray-launch-config"
NODE_STATUS = "ray-node-status"
STACK = "ray-gcp-stack"  # ours, not Ray's: which Pulumi stack made the node

KIND_HEAD = "head"
KIND_WORKER = "worker"  # the autoscaler's own workers
KIND_UNMANAGED = "unmanaged"  # ours: Pulumi keeps them, the autoscaler only counts them
STATUS_UP_TO_DATE = "up-to-date"

Role = Literal["head", "worker"]


def node_name_prefix(cluster_name: str, role: Role) -> str:
    """`ray-<cluster>-head` / `ray-<cluster>-worker`: Ray's `ray-node-name` value."""
    return f"ray-{cluster_name}-{role}"


def ray_labels(cluster_name: str, role: Role, node_type: str) -> dict[str, str]:
    """The labels a node we create carries; the launch hash is added once the key is known."""
    return {
        CLUSTER_NAME: cluster_name,
        NODE_KIND: KIND_HEAD if role == "head" else KIND_UNMANAGED,
        NODE_NAME: node_name_prefix(cluster_name, role),
        USER_NODE_TYPE: node_type,
        NODE_STATUS: STATUS_UP_TO_DATE,
    }


def stack_identity(organization: str, project: str, stack: str) -> str:
    """The `ray-gcp-stack` label value: the stack's name made a valid GCE label value (at most
    63 of lowercase letters, digits, `_` and `-`) and 8 hex of its full name, so two stacks of
    the same name in other projects or organizations (or names that read the same once
    lowercased) differ."""
    readable = re.sub(r"[^a-z0-9_-]+", "-", stack.lower()).strip("-")[:54] or "stack"
    digest = hashlib.sha256(f"{organization}/{project}/{stack}".encode()).hexdigest()[:8]
    return f"{readable}-{digest}"


def identity_labels(labels: dict[str, str]) -> dict[str, str]:
    """The labels that say what a node is, without its state (`ray-node-status`): a node's
    name is derived from these, so a state label never renames (replaces) a node."""
    return {key: value for key, value in labels.items() if key != NODE_STATUS}


def launch_config_hash(node_config: dict[str, Any], auth: dict[str, str]) -> str:
    """Ray's launch hash: sha256 of JSON `[node_config, auth]` (keys sorted), where `auth`
    holds the key *contents*, in lowercase unpadded base32hex (a valid GCE label value).
    A worker whose label differs is "outdated" to Ray's autoscaler and gets terminated, so this
    must agree with what the head computes from its bootstrap config."""
    text = json.dumps([node_config, auth], sort_keys=True)
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return base64.b32hexencode(digest).decode("ascii").lower().rstrip("=")


def short_hash(data: Any) -> str:
    """8 hex characters naming a node by its config: a new config gets a new name, so
    create-before-delete replacement never collides."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]
