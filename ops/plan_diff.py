"""Compare two plans (ops.plan) into rows a reviewer reads: added, removed, replaced, updated.

Resources match by (type, logical name). Nodes whose names embed a config hash (the head
instance, TPU VMs) get a new name when their config changes; an unmatched old and new node
of the same role (same parent, same `ray-user-node-type` label) is shown as one replacement
with the input paths that changed. Paths and values use the YAML's vocabulary: node type
names, `count`, `machineType: n1-standard-8` rather than its zone URL. Long text is
summarised, never dumped: a changed startup script as `changed (+2/-1 of 180 lines)`, the
head's autoscaler config (`ray-bootstrap-config`, which names the bucket object holding it) by
the YAML paths that changed in it.
"""

from __future__ import annotations

import difflib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

from infra.config.urls import short_name
from infra.workers.naming import replaced_keys
from infra.workers.provider import IN_PLACE_KEYS
from infra.workers.queued_slice import replaced_keys as queued_slice_replaced_keys
from infra.workers.sweeper import SWEEPER_IDENTITY_KEYS
from ops.command_diff import command_diff
from ops.plan import DYNAMIC_TYPE, Plan

Action = Literal["add", "remove", "replace", "update"]
ACTION_ORDER: tuple[Action, ...] = ("replace", "update", "add", "remove")
ABSENT = "(none)"

INSTANCE_TYPE = "gcp:compute/instance:Instance"
TPU_VM_TYPE = "gcp:tpu/v2Vm:V2Vm"
BUCKET_OBJECT_TYPE = "gcp:storage/bucketObject:BucketObject"
NODE_TYPE_LABEL = "ray-user-node-type"
NODE_KIND_LABEL = "ray-node-type"

# What a change to these inputs does: the dynamic providers' own rules.
WORKER_GROUP_IN_PLACE = frozenset(IN_PLACE_KEYS)
SWEEPER_REPLACE_KEYS = frozenset(SWEEPER_IDENTITY_KEYS)
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
# The head's metadata entry holding the autoscaler's cluster config (bootstrap.node_metadata's
# BOOTSTRAP_CONFIG_KEY; a test keeps them equal): summarised by the config paths that changed.
BOOTSTRAP_CONFIG_KEY = "ray-bootstrap-config"
SCRIPT_KEY = "startup-script"
CONFIG_CHANGES_SHOWN = 3
VALUE_LIMIT = 40
# Values never printed, whatever either plan says: file_mounts content (metadata keys
# `ray-file-mount-<n>`; a plan made by older code may hold it unmasked) and credentials.
HIDDEN_PREFIX = "ray-file-mount-"
HIDDEN_KEYS = frozenset({"credentials", "accessToken", "private_key", "ssh_private_key",
                         "secretData"})
HIDDEN = "[secret]"


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
    if is_hidden(leaf) and value is not None:
        return HIDDEN
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


def is_hidden(key: str) -> bool:
    """Whether the value under this key is never shown (compared, yes; printed, no)."""
    return key.startswith(HIDDEN_PREFIX) or key in HIDDEN_KEYS


def _scrub(value: Any) -> Any:
    """`value` with every hidden entry (a key, or a GCE `{key, value}` item) masked."""
    if isinstance(value, dict):
        if _is_key_values([value]) and is_hidden(str(value["key"])):
            return {"key": value["key"], "value": HIDDEN}
        return {k: HIDDEN if is_hidden(str(k)) else _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(item) for item in value]
    return value


def _show_path(resource: dict[str, Any], path: str) -> str:
    """Worker groups and queued TPU slices carry the node_config as `body`: the YAML has no
    such level."""
    if resource["kind"] in ("WorkerGroup", "QueuedTpuSlice") and path.startswith("body."):
        return path[len("body."):]
    return path


def _is_long_text(value: Any) -> bool:
    return isinstance(value, str) and ("\n" in value or len(value) > INLINE_LIMIT)


def _line_summary(old: Any, new: Any) -> str:
    """`changed (+2/-1 of 180 lines)`, `added (12 lines)`, `removed (12 lines)`."""
    if not isinstance(old, str):
        return f"added ({len(new.splitlines())} lines)"
    if not isinstance(new, str):
        return f"removed ({len(old.splitlines())} lines)"
    old_lines, new_lines = old.splitlines(), new.splitlines()
    diff = list(difflib.unified_diff(old_lines, new_lines, lineterm="", n=0))
    added = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
    if not added and not removed:  # same lines, different line endings or trailing newline
        return f"changed (whitespace only, {len(new_lines)} lines)"
    return f"changed (+{added}/-{removed} of {len(new_lines)} lines)"


def _short(path: str, value: Any) -> str:
    """A config value in a few characters: URLs by their last segment, long text by lines."""
    structured = isinstance(value, dict | list) and value
    text = json.dumps(_scrub(value), sort_keys=True) if structured else display(path, value)
    return text if len(text) <= VALUE_LIMIT else text[:VALUE_LIMIT - 1] + "…"


def _keyed(value: Any) -> Any:
    """GCE's `{items: [{key, value}]}` metadata as a mapping, so entries diff by key."""
    if isinstance(value, dict) and set(value) == {"items"} and _is_key_values(value["items"]):
        value = value["items"]
    if _is_key_values(value):
        return {item["key"]: item["value"] for item in value}
    return value


def config_changes(old: Any, new: Any, path: str = "") -> list[str]:
    """What differs between two parsed configs, at the shallowest path that differs: `a.b:
    1 -> 2`, `a.c added`, `a.d removed`. Lists of the same length are compared by index."""
    old, new = _keyed(old), _keyed(new)
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in sorted(set(old) | set(new), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in old:
                found.append(f"{where} added")
            elif key not in new:
                found.append(f"{where} removed")
            else:
                found += config_changes(old[key], new[key], where)
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [line for index, (a, b) in enumerate(zip(old, new, strict=True))
                for line in config_changes(a, b, f"{path}[{index}]")]
    if old == new:
        return []
    return [f"{path or '(whole)'}: {_short(path, old)} -> {_short(path, new)}"]


def _bootstrap_config_summary(old: Any, new: Any) -> str:
    """The autoscaler config's changed paths, a few shown: reviewers care which node type
    or setting moved, not about 400 lines of rendered YAML."""
    try:
        before, after = yaml.safe_load(old), yaml.safe_load(new)
    except yaml.YAMLError:
        return _line_summary(old, new)
    if not isinstance(before, dict) or not isinstance(after, dict):
        return _line_summary(old, new)
    found = config_changes(before, after)
    if not found:
        return "changed (formatting only)"
    shown = "; ".join(found[:CONFIG_CHANGES_SHOWN])
    more = len(found) - CONFIG_CHANGES_SHOWN
    plural = "change" if len(found) == 1 else "changes"
    return f"{len(found)} {plural}: {shown}" + (f"; and {more} more" if more > 0 else "")


def _summary(path: str, old: Any, new: Any) -> str | None:
    """A one-line summary for long text (scripts, configs, file_mounts); None otherwise."""
    if not (_is_long_text(old) or _is_long_text(new)):
        return None
    if path.rsplit(".", 1)[-1] == BOOTSTRAP_CONFIG_KEY and isinstance(old, str) \
            and isinstance(new, str):
        return _bootstrap_config_summary(old, new)
    if (old is _MISSING or isinstance(old, str)) and (new is _MISSING or isinstance(new, str)):
        return _line_summary(old, new)
    return None


def _shown(path: str, value: Any, leaves: dict[str, Any]) -> str:
    """`display`, except that a path absent on this side because it is a mapping here (a
    secret-masked value becoming visible, or the reverse) says how many entries it has."""
    if value is _MISSING:
        inner = sum(1 for leaf in leaves if leaf.startswith(f"{path}.") or
                    leaf.startswith(f"{path}["))
        if inner:
            return f"<{inner} entries>"
    return display(path, value)


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
        commands = (tuple(command_diff(before, after))
                    if path.endswith(SCRIPT_KEY) and isinstance(before, str)
                    and isinstance(after, str) else ())
        changes.append(Change(_show_path(new, path), _shown(path, before, old_leaves),
                              _shown(path, after, new_leaves), _summary(path, before, after),
                              commands))
    if (old["parent"] or "") != (new["parent"] or ""):
        changes.append(Change("(parent)", str(old["parent"]), str(new["parent"])))
    return changes


def _replaces(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether Pulumi would replace rather than update in place."""
    changed = {k for k in set(old["inputs"]) | set(new["inputs"])
               if old["inputs"].get(k, _MISSING) != new["inputs"].get(k, _MISSING)}
    if new["type"] == DYNAMIC_TYPE and new["kind"] == "WorkerGroup":
        # The body's metadata and labels change in place; its machine replaces the group.
        others = changed - WORKER_GROUP_IN_PLACE - {"body"}
        return bool(others or replaced_keys(old["inputs"], new["inputs"]))
    if new["type"] == DYNAMIC_TYPE and new["kind"] == "ClusterSweeper":
        return bool(changed & SWEEPER_REPLACE_KEYS)
    if new["type"] == DYNAMIC_TYPE and new["kind"] == "QueuedTpuSlice":
        return bool(queued_slice_replaced_keys(old["inputs"], new["inputs"]))
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


def matched_pairs(base: Plan, head: Plan) -> dict[tuple[str, str], tuple[str, str]]:
    """New resource key -> the old key Pulumi sees as the same resource: the same (type, name),
    or an old name the new resource lists among its aliases (a rename, not a replacement)."""
    old_keys = {(r["type"], r["name"]) for r in base["resources"]}
    new_keys = {(r["type"], r["name"]) for r in head["resources"]}
    pairs = {key: key for key in old_keys & new_keys}
    for resource in head["resources"]:
        key = (resource["type"], resource["name"])
        for alias in resource.get("aliases", []):
            old_key = (resource["type"], alias)
            if key not in pairs and old_key in old_keys - new_keys:
                pairs[key] = old_key
    return pairs


def configs_inline(plan: Plan) -> Plan:
    """The plan as a reviewer reads it: the head's `ray-bootstrap-config` names the bucket
    object holding the autoscaler config (`gs://BUCKET/OBJECT`); here it holds that object's
    text again, and the object is not a row of its own, so a config change reads as before
    (and as a plan made by older code, with the text in metadata, has it)."""
    stored = {(r["inputs"].get("bucket"), r["inputs"].get("name")): r
              for r in plan["resources"] if r["type"] == BUCKET_OBJECT_TYPE}
    inlined, used = [], set()
    for resource in plan["resources"]:
        metadata = resource["inputs"].get("metadata")
        reference = metadata.get(BOOTSTRAP_CONFIG_KEY) if isinstance(metadata, dict) else None
        if isinstance(reference, str) and reference.startswith("gs://"):
            key = tuple(reference.removeprefix("gs://").split("/", 1))
            if key in stored:
                used.add(key)
                metadata = {**metadata, BOOTSTRAP_CONFIG_KEY: stored[key]["inputs"]["source"]}
                resource = {**resource, "inputs": {**resource["inputs"], "metadata": metadata}}
        inlined.append(resource)
    kept = [r for r in inlined if r["type"] != BUCKET_OBJECT_TYPE
            or (r["inputs"].get("bucket"), r["inputs"].get("name")) not in used]
    return {**plan, "resources": kept}


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
        rows.append(_row("replace" if _replaces(old, new) else "update", old, new))

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
