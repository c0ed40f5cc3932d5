"""The workers Pulumi keeps, as autoscaler v2 sees them: counted, never launched or retired.

On GCE a worker group's node is Ray's `unmanaged` kind (model/labels.py), which v2's
NodeProviderAdapter drops: its scheduler would not count it for `request_resources`, pending
demand or `max_workers`. So under v2 the head's provider lists each such node as a worker of its
type's *pinned twin*, `<type>.pinned`, a node type the head's config adds (`twin_type`): room
for the type's maximum (never exceeded by Pulumi's nodes: v2 never scales one down, not even
while an `up` lowering the count has yet to delete its node), `min_workers` 0 (v2 never launches
one to make up a minimum: a missing node is Pulumi's to make, `invoke up`) and an idle timeout
no node reaches (no idle termination). Should v2 still pick a twin for demand (its type at its
maximum, the cluster not), the provider refuses the launch; the twin's lower priority makes v2
prefer the type itself. The node's Ray reports the twin as its type and its instance id
(bootstrap/node_bootstrap.sh, export_ray_identity): v2 adopts a Ray node by the type it reports
before it reads the cloud's list, and `ray status` lists the node as `<type>.pinned`; its Ray
label `ray.io/node-group` stays the user's type, so label selectors place work on it as before.
The instance's GCE labels are untouched: to everything but v2 it is the unmanaged node Pulumi
keeps. Under v1, which counts unmanaged nodes and never terminates them, none of this applies:
no twins.

Standard library only (autoscaler_config imports it on the operator's machine).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

PROVIDER_FIELD = "pinned_types"
"""The head's provider section under v2: `{twin type: the user's type}`."""
SUFFIX = ".pinned"
CATEGORY = "PinnedByPulumi"  # a refused launch's category in Ray's logs; under 20 characters

# Ray's node labels (ray.autoscaler.tags), named here so that this module imports no Ray.
KIND_TAG = "ray-node-type"  # the kind: head, worker or unmanaged
USER_TYPE_TAG = "ray-user-node-type"
KIND_UNMANAGED = "unmanaged"
KIND_WORKER = "worker"
NODE_GROUP_LABEL = "ray.io/node-group"  # ray._raylet.RAY_NODE_GROUP_KEY: a Ray node's type


NEVER_IDLE_S = 100 * 365 * 24 * 3600  # a twin's idle_timeout_s: a century
HARDWARE_KEYS = ("machineType", "acceleratorType", "acceleratorConfig")  # gcp.config.get_node_type


def twin(node_type: str) -> str:
    """The pinned twin of a worker type: the type v2 counts Pulumi's nodes of that type as."""
    return node_type + SUFFIX


def twin_type(node_type: Mapping[str, Any], count: int) -> dict[str, Any]:
    """The twin of a node type (its entry in `available_node_types`, as the YAML has it) for
    the `count` nodes Pulumi keeps: room for the type's own maximum (Pulumi's nodes never
    exceed it, so a lowered count never has v2 scale one down before the group removes it);
    its resources and labels; of its body only what names the hardware (Ray's GCP provider
    reads it to tell an instance from a TPU node and to add a pod's head resource), as no twin
    is ever launched."""
    body = node_type["node_config"]
    return {"resources": copy.deepcopy(dict(node_type["resources"])),
            "labels": dict(node_type.get("labels") or {}),
            "node_config": {key: copy.deepcopy(body[key]) for key in HARDWARE_KEYS if key in body},
            "min_workers": 0, "max_workers": max(count, int(node_type.get("max_workers") or 0)),
            "idle_timeout_s": NEVER_IDLE_S,
            "priority": int(node_type.get("priority") or 0) - 1}


def as_v2_sees_it(tags: Mapping[str, str], twins: Mapping[str, str]) -> dict[str, str]:
    """A node's labels as the provider reports them to the autoscaler: an unmanaged node of a
    type with a twin (`twins`: user's type -> twin) is a worker of the twin; any other node
    as it is."""
    node_type = tags.get(USER_TYPE_TAG, "")
    if tags.get(KIND_TAG) != KIND_UNMANAGED or node_type not in twins:
        return dict(tags)
    return {**tags, KIND_TAG: KIND_WORKER, USER_TYPE_TAG: twins[node_type]}


def launch_refusal(node_type: str, user_type: str) -> str:
    """Why the head's provider launches no node of a twin type."""
    return (f"{node_type} is the {user_type} workers Pulumi keeps: the autoscaler launches "
            f"none in place of a missing one (`invoke up` makes the worker group's nodes "
            f"again)")


def termination_refusal(node_id: str) -> str:
    """Why the head's provider terminates no node Pulumi keeps."""
    return (f"{node_id} is a worker Pulumi keeps: the autoscaler never terminates it "
            f"(`invoke scale` or `invoke down` does)")
