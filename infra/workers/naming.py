"""Names and labels of a worker group's nodes: what Ray expects and how we find our own.

Our nodes carry Ray's labels as an *unmanaged* node kind (see model/labels.py): Ray's autoscaler
counts them for its type and packs demand onto them, but never terminates them. We add
`ray-gcp-group`, a hash of everything that defines the group's machines, so our nodes are found
again after a half-failed call: the labels in the cloud, not Pulumi's state, are the source of
truth.

A node's metadata (its startup script) and labels change in place (setMetadata, setLabels),
so they are no part of the group's identity, but for the head address: a new head gets new
workers. Groups created before that carry an id hashed over the whole body; a group keeps the
id it was created with (in its state) for as long as it lives, so their nodes stay found (see
WorkerGroupProvider.update).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from typing import Any

from model.labels import CLUSTER_NAME, KIND_WORKER, NODE_KIND, USER_NODE_TYPE, ray_labels

GROUP_LABEL = "ray-gcp-group"
MAX_NAME_LENGTH = 63

# What decides which nodes a group owns; a change to any of these makes a new group, except
# for the body's BODY_IN_PLACE parts.
IDENTITY_KEYS = ("project", "zone", "cluster_name", "node_type", "name_prefix", "body")
# The parts of the insert body a running node takes in place (its watcher acts on a new script).
BODY_IN_PLACE = ("metadata", "labels")
# Metadata that is identity all the same: the head a worker's Ray joins (bootstrap.node_metadata's
# HEAD_ADDRESS_KEY; a test keeps them equal). A new head means new workers, booted to join it.
HEAD_ADDRESS_KEY = "ray-head-address"


def metadata_items(body: Mapping[str, Any]) -> dict[str, str]:
    """The body's metadata as key -> value (GCE's `{items: [{key, value}]}`)."""
    items = (body.get("metadata") or {}).get("items") or []
    return {str(item["key"]): str(item["value"]) for item in items}


def machine_of(body: Any) -> Any:
    """What the nodes are made of and whose they are: the body without what changes in place.
    A body not known yet (a preview's unknown) stays as it is."""
    if not isinstance(body, Mapping):
        return body
    kept = {key: value for key, value in body.items() if key not in BODY_IN_PLACE}
    head = metadata_items(body).get(HEAD_ADDRESS_KEY)
    return {**kept, HEAD_ADDRESS_KEY: head} if head is not None else kept


def replaced_keys(olds: Mapping[str, Any], news: Mapping[str, Any]) -> list[str]:
    """The identity keys whose change replaces the group; `body` only when its machine did."""
    return [key for key in IDENTITY_KEYS if _identity(olds, key) != _identity(news, key)]


def _identity(props: Mapping[str, Any], key: str) -> Any:
    value = props.get(key)
    return machine_of(value) if key == "body" else value


def group_id(props: Mapping[str, Any]) -> str:
    """Stable id of a group: the same machines find the same nodes after a failed create."""
    identity = {key: _identity(props, key) for key in IDENTITY_KEYS}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return f"g{digest[:16]}"


def resource_id(props: Mapping[str, Any]) -> str:
    return f"projects/{props['project']}/zones/{props['zone']}/workerGroups/{group_id(props)}"


def node_type_labels(cluster_name: str, node_type: str) -> dict[str, str]:
    """The labels every worker of this type carries, ours or the autoscaler's."""
    return {CLUSTER_NAME: cluster_name, USER_NODE_TYPE: node_type}


def owned_worker_labels(cluster_name: str, node_type: str, group: str) -> dict[str, str]:
    """What every node the group creates carries, whatever the body says: Ray's labels of a
    node Pulumi keeps (unmanaged, up to date) and the group's own."""
    return {
        **ray_labels(cluster_name, "worker", node_type),
        GROUP_LABEL: group,
    }


def is_autoscaler_worker(labels: Mapping[str, str]) -> bool:
    """A worker Ray's autoscaler launched itself: its own kind, no group of ours."""
    return labels.get(NODE_KIND) == KIND_WORKER and GROUP_LABEL not in labels


def new_node_name(name_prefix: str) -> str:
    """`<prefix>-<8 hex>-compute`, as Ray's node provider names instances."""
    name = f"{name_prefix}-{secrets.token_hex(4)}-compute"
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(
            f"node name {name!r} is longer than {MAX_NAME_LENGTH} characters: "
            "shorten the cluster name"
        )
    return name
