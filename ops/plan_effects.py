"""What a planned change does to a running node, said next to it in `invoke diff` and in the
progress of `invoke up/preview`: re-applied in place by the node's watchers, a stop/start of
the instance, or new nodes.

A node's metadata changes in place, and its watchers act on it (bootstrap/node_reapply.sh):
a new startup script (new file_mounts included) reruns the changed stages and restarts Ray, head
first; a new autoscaler config is rewritten for Ray's monitor. Any other input of a head
(machine type, accelerators, scheduling) stops and starts it (`allow_stopping_for_update`),
and it boots into the current script. A worker group's metadata and labels change in place
too (setMetadata on each of its nodes, running or stopped), so a new worker script is
re-applied like the head's; a change to its machines (machine type, disks, accelerators,
scheduling, network, service account) or a new head replaces the group with new workers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from infra.workers.naming import metadata_items
from ops.plan_diff import BOOTSTRAP_CONFIG_KEY, INSTANCE_TYPE, TPU_VM_TYPE, DiffRow

REAPPLIED = ("metadata.startup-script", "metadata.ray-bootstrap-version",
             "metadata.ray-file-mount-")
CONFIG = f"metadata.{BOOTSTRAP_CONFIG_KEY}"
IN_PLACE = ("metadata.", "labels.", "description", "deletionProtection")

REAPPLY_NOTE = ("re-applied in place: the node watcher reruns the changed stages and restarts "
                "Ray (workers restart theirs after the head)")
CONFIG_NOTE = "in place: the config watcher rewrites ~/ray_bootstrap_config.yaml, Ray keeps running"
STOP_START_NOTE = "stop/start: the instance stops for the update and boots into the new script"
NEW_WORKERS_NOTE = "replaced: new workers boot from the new script"
NEW_NODE_NOTE = "replaced: a new node boots from the new script"
NEW_REQUEST_NOTE = "replaced: a new queued request, the slice waits for TPU capacity again"


def effect_of_paths(paths: Iterable[str]) -> str | None:
    """The effect of an in-place update of a head (or TPU head) whose inputs at `paths`
    changed."""
    paths = list(paths)
    notes = []
    if any(p.startswith(REAPPLIED) for p in paths):
        notes.append(REAPPLY_NOTE)
    elif any(p == CONFIG for p in paths):
        notes.append(CONFIG_NOTE)
    if any(not p.startswith(IN_PLACE) for p in paths):
        notes.append(STOP_START_NOTE)
    return "; ".join(notes) or None


def node_effect(row: DiffRow) -> str | None:
    """The effect line for a diff row of a node or worker group; None for other resources."""
    if row.kind == "WorkerGroup":
        if row.action == "replace":
            return NEW_WORKERS_NOTE
        if row.action == "update":  # only metadata and labels reach the nodes (not `count`)
            return effect_of_paths(c.path for c in row.changes if c.path.startswith(IN_PLACE))
        return None
    if row.kind == "QueuedTpuSlice":
        if row.action == "replace":
            return NEW_REQUEST_NOTE
        node_paths = [c.path for c in row.changes if c.path.startswith(("metadata.", "labels."))]
        return effect_of_paths(node_paths) if row.action == "update" else None
    if row.type not in (INSTANCE_TYPE, TPU_VM_TYPE):
        return None
    if row.action == "replace":
        return NEW_NODE_NOTE
    if row.action == "update":
        return effect_of_paths(change.path for change in row.changes)
    return None


def worker_group_effect(old_body: Any, new_body: Any) -> str | None:
    """The effect of an in-place update of a worker group from its whole old and new bodies
    (what engine events carry: inputs, not changed paths); None when either is not shown."""
    if not isinstance(old_body, Mapping) or not isinstance(new_body, Mapping):
        return None
    paths = [f"metadata.{key}" for key in _changed(metadata_items(old_body),
                                                   metadata_items(new_body))]
    paths += [f"labels.{key}" for key in _changed(old_body.get("labels") or {},
                                                  new_body.get("labels") or {})]
    return effect_of_paths(paths)


def _changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return sorted(key for key in set(old) | set(new) if old.get(key) != new.get(key))
