"""Compare two plans (ops.plan) into rows a reviewer reads: added, removed, replaced, updated.

Resources match by (type, logical name). Nodes whose names embed a config hash (the head
instance, TPU VMs) get a new name when their config changes; an unmatched old and new node
of the same role (same parent, same `ray-user-node-type` label) is shown as one replacement
with the input paths that changed. Paths and values use the YAML's vocabulary: node type
names, `count`, `machineType: n1-standard-8` rather than its zone URL.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

from infra.config.urls import short_name
from ops.plan import DYNAMIC_TYPE, Plan

Action = Literal["add", "remove", "replace", "update"]
ACTION_ORDER: tuple[Action, ...] = ("replace", "update", "add", "remove")
ABSENT = "(none)"

INSTANCE_TYPE = "gcp:compute/instance:Instance"
TPU_VM_TYPE = "gcp:tpu/v2Vm:V2Vm"
NODE_TYPE_LABEL = "ray-user-node-type"
NODE_KIND_LABEL = "ray-node-type"

# What a change to these inputs does. WorkerGroup mirrors infra.workers' IN_PLACE_KEYS (a
# test keeps them equal; importing infra.workers here would cost the diff its cloud clients).
WORKER_GROUP_IN_PLACE = frozenset({"count", "cache_stopped_nodes", "credentials", "api_endpoint"})
# pulumi-gcp inputs that cannot change on a live resource.
REPLACE_KEYS: dict[str, frozenset[str]] = {
    INSTANCE_TYPE: frozenset({"name", "project", "zone", "bootDisk", "scratchDisks"}),
    TPU_VM_TYPE: frozenset({"name", "project", "zone", "acceleratorType", "acceleratorConfig",
                            "runtimeVersion", "schedulingConfig", "dataDisks"}),
    "gcp:serviceaccount/account:Account": frozenset({"accountId", "project"}),
    "gcp:projects/iAMMember:IAMMember": frozenset({"member", "project", "role", "condition"}),
    "gcp:compute/firewall:Firewall": frozenset({"name", "project", "network", "direction"}),
}
# Inputs whose values are resource URLs: shown by their last segment, as the YAML writes them.
URL_KEYS = frozenset({"machineType", "acceleratorType", "diskType", "type", "network",
                      "subnetwork", "sourceImage", "image"})
INLINE_LIMIT = 60


@dataclass(frozen=True)
class Change:
    """One input path whose value differs; values already in display form."""

    path: str
    old: str
    new: str


@dataclass
class DiffRow:
    action: Action
    subject: str  # the YAML-level name: a node type, `head`, or the resource's logical name
    kind: str
    type: str
    old_name: str | None
    new_name: str | None
    changes: list[Change] = field(default_factory=list)
    count: int | None = None  # nodes behind the row (worker groups), for the cost hint


def subject_of(resource: dict[str, Any]) -> str:
    """How a reviewer calls the resource: `head`, a node type name, else its logical name."""
    inputs = resource["inputs"]
    if resource["kind"] == "WorkerGroup":
        return str(inputs["node_type"])
    labels = inputs.get("labels") if isinstance(inputs.get("labels"), dict) else {}
    if resource["type"] in (INSTANCE_TYPE, TPU_VM_TYPE) and NODE_TYPE_LABEL in labels:
        return "head" if labels.get(NODE_KIND_LABEL) == "head" else str(labels[NODE_TYPE_LABEL])
    parent = resource["parent"]
    if not resource["custom"] and parent and resource["name"].startswith(f"{parent}-"):
        return resource["name"][len(parent) + 1:]  # `full-ray_tpu` under `full`: `ray_tpu`
    return resource["name"]


def _role(resource: dict[str, Any]) -> tuple[str, ...] | None:
    """The key under which a renamed node is the same node: only for hash-named nodes."""
    if resource["type"] not in (INSTANCE_TYPE, TPU_VM_TYPE):
        return None
    labels = resource["inputs"].get("labels")
    labels = labels if isinstance(labels, dict) else {}
    return (resource["type"], resource["parent"] or "", str(labels.get(NODE_KIND_LABEL)),
            str(labels.get(NODE_TYPE_LABEL)))


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Leaf paths of a value. Lists of `{key, value}` items (GCE metadata) are addressed by
    their key, other lists by index; empty containers are leaves."""
    if isinstance(value, dict) and set(value) == {"items"} and _is_key_values(value["items"]):
        return flatten(value["items"], path)  # GCE's `metadata: {items: [...]}` wrapper
    if isinstance(value, dict) and value:
        leaves: dict[str, Any] = {}
        for key in sorted(value):
            leaves.update(flatten(value[key], f"{path}.{key}" if path else str(key)))
        return leaves
    if isinstance(value, list) and value:
        if _is_key_values(value):
            return flatten({item["key"]: item["value"] for item in value}, path)
        leaves = {}
        for index, item in enumerate(value):
            leaves.update(flatten(item, f"{path}[{index}]"))
        return leaves
    return {path: value}


def _is_key_values(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(item, dict) and set(item) == {"key", "value"} for item in value
    )


def display(path: str, value: Any) -> str:
    """A value as one short token: URLs shortened, long text summarised by its line count."""
    if value is _MISSING:
        return ABSENT
    leaf = path.rsplit(".", 1)[-1].split("[", 1)[0]
    if isinstance(value, str):
        if leaf in URL_KEYS and "/" in value:
            return short_name(value)
        if "\n" in value or len(value) > INLINE_LIMIT:
            return f"<{len(value.splitlines())} lines>"
        return value
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value == [] or value == {}:
        return "[]" if value == [] else "{}"
    return str(value)


_MISSING = object()


def _show_path(resource: dict[str, Any], path: str) -> str:
    """Worker groups carry the node_config as `body`: the YAML has no such level."""
    if resource["kind"] == "WorkerGroup" and path.startswith("body."):
        return path[len("body."):]
    return path


def _text_change(old: Any, new: Any) -> str | None:
    if isinstance(old, str) and isinstance(new, str) and ("\n" in old or "\n" in new):
        lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0))
        added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
        removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
        return f"+{added}/-{removed} lines"
    return None


def input_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Changed leaf paths between two resources' inputs (the logical name excluded: the row
    shows it), in path order."""
    old_leaves = flatten(old["inputs"]) if old["inputs"] else {}
    new_leaves = flatten(new["inputs"]) if new["inputs"] else {}
    changes = []
    for path in sorted(set(old_leaves) | set(new_leaves)):
        before, after = old_leaves.get(path, _MISSING), new_leaves.get(path, _MISSING)
        if before == after or path == "name":
            continue
        shown = _show_path(new, path)
        summary = _text_change(before, after)
        if summary is not None:
            changes.append(Change(shown, display(path, before), summary))
        else:
            changes.append(Change(shown, display(path, before), display(path, after)))
    if (old["parent"] or "") != (new["parent"] or ""):
        changes.append(Change("(parent)", str(old["parent"]), str(new["parent"])))
    return changes


def _replaces(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether Pulumi would replace rather than update in place."""
    changed = {k for k in set(old["inputs"]) | set(new["inputs"])
               if old["inputs"].get(k, _MISSING) != new["inputs"].get(k, _MISSING)}
    if new["type"] == DYNAMIC_TYPE and new["kind"] == "WorkerGroup":
        return bool(changed - WORKER_GROUP_IN_PLACE)
    return bool(changed & REPLACE_KEYS.get(new["type"], frozenset()))


def _count(resource: dict[str, Any]) -> int | None:
    value = resource["inputs"].get("count")
    return int(value) if isinstance(value, int | float) else None


def _row(action: Action, old: dict[str, Any] | None, new: dict[str, Any] | None) -> DiffRow:
    current = new or old
    assert current is not None
    return DiffRow(
        action=action,
        subject=subject_of(current),
        kind=current["kind"],
        type=current["type"],
        old_name=old["name"] if old else None,
        new_name=new["name"] if new else None,
        changes=input_changes(old, new) if old and new else [],
        count=_count(current),
    )


def diff_plans(base: Plan, head: Plan) -> list[DiffRow]:
    """Rows for every resource that differs, ordered by action then subject."""
    old_by_key = {(r["type"], r["name"]): r for r in base["resources"]}
    new_by_key = {(r["type"], r["name"]): r for r in head["resources"]}
    rows: list[DiffRow] = []
    for key in sorted(old_by_key.keys() & new_by_key.keys()):
        old, new = old_by_key[key], new_by_key[key]
        if old["inputs"] == new["inputs"] and old["parent"] == new["parent"]:
            continue
        rows.append(_row("replace" if _replaces(old, new) else "update", old, new))

    removed = [old_by_key[k] for k in sorted(old_by_key.keys() - new_by_key.keys())]
    added = [new_by_key[k] for k in sorted(new_by_key.keys() - old_by_key.keys())]
    removed_by_role: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for resource in removed:
        role = _role(resource)
        if role is not None:
            removed_by_role[role].append(resource)
    for resource in added:
        role = _role(resource)
        if role is not None and removed_by_role.get(role):
            old = removed_by_role[role].pop(0)
            removed.remove(old)
            rows.append(_row("replace", old, resource))
        else:
            rows.append(_row("add", None, resource))
    rows += [_row("remove", resource, None) for resource in removed]
    rows.sort(key=lambda r: (ACTION_ORDER.index(r.action), r.subject, r.new_name or r.old_name))
    return rows


def unchanged_count(base: Plan, head: Plan) -> int:
    old = {(r["type"], r["name"]): r for r in base["resources"]}
    return sum(1 for r in head["resources"]
               if (r["type"], r["name"]) in old
               and old[(r["type"], r["name"])]["inputs"] == r["inputs"]
               and old[(r["type"], r["name"])]["parent"] == r["parent"])
