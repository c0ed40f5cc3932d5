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

import re
from collections.abc import Iterable, Mapping
from typing import Any

from infra.dynamic_types import WORKER_GROUP_TYPE
from infra.workers.naming import metadata_items
from ops.pulumi_types import INSTANCE_TYPE, TPU_VM_TYPE
from ops.review.plan_diff import DiffRow
from ops.review.plan_values import BOOTSTRAP_CONFIG_KEY

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
# One element of an engine property path (resource.PropertyPath.String): a plain key, a quoted
# key (`["startup-script"]`, `\"` escaping a quote) or a list index.
_PATH_PART = re.compile(r'\.?([A-Za-z0-9_]+)|\["((?:[^"\\]|\\.)*)"\]|\[(\d+)\]')


def dotted_path(engine_path: str) -> str:
    """An engine property path as `invoke diff` writes it: `metadata["startup-script"]` is
    `metadata.startup-script`, `networkInterfaces[0].network` is
    `networkInterfaces.0.network`. A path it cannot read is kept as it is."""
    parts, at = [], 0
    while at < len(engine_path):
        match = _PATH_PART.match(engine_path, at)
        if match is None:
            return engine_path
        key, quoted, index = match.groups()
        parts.append(key if key is not None else index if index is not None
                     else re.sub(r"\\(.)", r"\1", quoted))
        at = match.end()
    return ".".join(parts)


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


def step_effect(type_: str, op: str, detailed_diff: dict[str, Any] | None,
                diffs: list[str] | None, old: Any = None, new: Any = None) -> str | None:
    """What a step of `invoke up/preview` does to a running node, worded as `invoke diff`
    words it, for nodes Pulumi updates or replaces itself; paths from the provider's detailed
    diff (pulumi-gcp's bridge writes `metadata["startup-script"]`, one path per changed
    leaf), or only the changed top-level inputs where a provider gives none. For a worker
    group (`old`/`new`: the step's states), from its old and new bodies."""
    if type_ == WORKER_GROUP_TYPE:
        return _worker_group_step_effect(op, old, new)
    if type_ not in (INSTANCE_TYPE, TPU_VM_TYPE):
        return None
    if op in ("replace", "create-replacement"):
        return f"({NEW_NODE_NOTE})"
    if op != "update":
        return None
    paths = [dotted_path(path) for path in detailed_diff or {}]
    effect = effect_of_paths(paths or list(diffs or []))
    return f"({effect})" if effect else None


def _worker_group_step_effect(op: str, old: Any, new: Any) -> str | None:
    """Only a WorkerGroup's state has a `group_id` (the sweeper's has not)."""
    if old is None or "group_id" not in (old.outputs or {}):
        return None
    if op in ("replace", "create-replacement"):
        return f"({NEW_WORKERS_NOTE})"
    if op != "update" or new is None:
        return None
    effect = worker_group_effect((old.inputs or {}).get("body"), (new.inputs or {}).get("body"))
    return f"({effect})" if effect else None
