"""Compare two plans (`plan`) into rows a reviewer reads: added, removed, replaced, updated.

Resources match by (type, logical name). Nodes whose names embed a config hash (the head
instance, TPU VMs) get a new name when their config changes; an unmatched old and new node
of the same role (same parent, same `ray-user-node-type` label) is shown as one replacement
with the input paths that changed. How each path and value is shown is `plan_values`'s job;
whether a change replaces the resource, `replacements`'s. The head's autoscaler config, an
object in the cluster's bucket that `ray-bootstrap-config` names, is shown on the head
(`configs_inline`); a changed startup script also as a diff of its commands (`command_diff`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

from ops.pulumi_types import BUCKET_OBJECT_TYPE, INSTANCE_TYPE, TPU_VM_TYPE
from ops.review.command_diff import command_diff
from ops.review.plan import Plan
from ops.review.plan_values import (
    BOOTSTRAP_CONFIG_KEY,
    MISSING,
    change_summary,
    flatten,
    show_path,
    shown_value,
)
from ops.review.replacements import replaces

Action = Literal["add", "remove", "replace", "update"]
ACTION_ORDER: tuple[Action, ...] = ("replace", "update", "add", "remove")

NODE_TYPE_LABEL = "ray-user-node-type"
NODE_KIND_LABEL = "ray-node-type"
SCRIPT_KEY = "startup-script"


@dataclass(frozen=True)
class Change:
    """One input path whose value differs; values already in display form."""

    path: str
    old: str
    new: str
    summary: str | None = None  # shown instead of `old -> new` (long text)
    commands: tuple[str, ...] = ()  # a startup script's: unified diff of its YAML commands


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
    body = inputs.get("body") if resource["kind"] == "QueuedTpuSlice" else None
    if isinstance(body, dict) and NODE_TYPE_LABEL in (body.get("labels") or {}):
        return str(body["labels"][NODE_TYPE_LABEL])
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


def input_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Changed leaf paths between two resources' inputs (the logical name excluded: the row
    shows it), in path order."""
    old_leaves = flatten(old["inputs"]) if old["inputs"] else {}
    new_leaves = flatten(new["inputs"]) if new["inputs"] else {}
    changes = []
    for path in sorted(set(old_leaves) | set(new_leaves)):
        before, after = old_leaves.get(path, MISSING), new_leaves.get(path, MISSING)
        if before == after or path == "name":
            continue
        commands = (tuple(command_diff(before, after))
                    if path.endswith(SCRIPT_KEY) and isinstance(before, str)
                    and isinstance(after, str) else ())
        changes.append(Change(show_path(new, path), shown_value(path, before, old_leaves),
                              shown_value(path, after, new_leaves),
                              change_summary(path, before, after), commands))
    if (old["parent"] or "") != (new["parent"] or ""):
        changes.append(Change("(parent)", str(old["parent"]), str(new["parent"])))
    return changes


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


def matched_pairs(base: Plan, head: Plan) -> dict[tuple[str, str], tuple[str, str]]:
    """New resource key -> the old key Pulumi sees as the same resource: the same (type, name),
    or an old (type, name) the new resource lists among its aliases (a rename, or a dynamic
    resource's own type where a base planned before had the shared one: not a replacement)."""
    old_keys = {(r["type"], r["name"]) for r in base["resources"]}
    new_keys = {(r["type"], r["name"]) for r in head["resources"]}
    pairs = {key: key for key in old_keys & new_keys}
    for resource in head["resources"]:
        key = (resource["type"], resource["name"])
        for alias in resource.get("aliases", []):
            old_key = (alias["type"], alias["name"])
            if key not in pairs and old_key in old_keys - new_keys:
                pairs[key] = old_key
    return pairs


def configs_inline(plan: Plan) -> Plan:
    """The plan as a reviewer reads it: the head's `ray-bootstrap-config` names the bucket
    object holding the autoscaler config (`gs://BUCKET/OBJECT`); here it holds that object's
    text again, so a config change reads field by field on the head (as a plan made by older
    code, with the text in metadata, has it). The object keeps its own row: it is named after
    its content, so Pulumi replaces it whenever the config changes, and the diff says so."""
    stored = {(r["inputs"].get("bucket"), r["inputs"].get("name")): r
              for r in plan["resources"] if r["type"] == BUCKET_OBJECT_TYPE}
    inlined = []
    for resource in plan["resources"]:
        metadata = resource["inputs"].get("metadata")
        reference = metadata.get(BOOTSTRAP_CONFIG_KEY) if isinstance(metadata, dict) else None
        if isinstance(reference, str) and reference.startswith("gs://"):
            key = tuple(reference.removeprefix("gs://").split("/", 1))
            if key in stored:
                metadata = {**metadata, BOOTSTRAP_CONFIG_KEY: stored[key]["inputs"]["source"]}
                resource = {**resource, "inputs": {**resource["inputs"], "metadata": metadata}}
        inlined.append(resource)
    return {**plan, "resources": inlined}


def diff_plans(base: Plan, head: Plan) -> list[DiffRow]:
    """Rows for every resource that differs, ordered by action then subject."""
    base, head = configs_inline(base), configs_inline(head)
    old_by_key = {(r["type"], r["name"]): r for r in base["resources"]}
    new_by_key = {(r["type"], r["name"]): r for r in head["resources"]}
    pairs = matched_pairs(base, head)
    rows: list[DiffRow] = []
    for key in sorted(pairs):
        old, new = old_by_key[pairs[key]], new_by_key[key]
        if old["inputs"] == new["inputs"] and old["parent"] == new["parent"]:
            continue
        rows.append(_row("replace" if replaces(old, new) else "update", old, new))

    removed = [old_by_key[k] for k in sorted(old_by_key.keys() - set(pairs.values()))]
    added = [new_by_key[k] for k in sorted(new_by_key.keys() - pairs.keys())]
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
    pairs = matched_pairs(base, head)
    return sum(1 for r in head["resources"]
               if (key := (r["type"], r["name"])) in pairs
               and old[pairs[key]]["inputs"] == r["inputs"]
               and old[pairs[key]]["parent"] == r["parent"])
