"""How a changed input is shown in `invoke diff`: flattened to YAML-like paths (`metadata.
startup-script`, `disks[0].type`), in the YAML's vocabulary (`machineType: n1-standard-8`
rather than its zone URL), long text summarised (`changed (+2/-1 of 180 lines)`, the head's
autoscaler config by the YAML paths that changed in it) and secrets never printed.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

import yaml

from model.config.urls import short_name

# Inputs whose values are resource URLs: shown by their last segment, as the YAML writes them.
URL_KEYS = frozenset({"machineType", "acceleratorType", "diskType", "type", "network",
                      "subnetwork", "sourceImage", "image"})
INLINE_LIMIT = 60
# The head's metadata entry holding the autoscaler's cluster config (bootstrap.node_metadata's
# BOOTSTRAP_CONFIG_KEY; a test keeps them equal): summarised by the config paths that changed.
BOOTSTRAP_CONFIG_KEY = "ray-bootstrap-config"
CONFIG_CHANGES_SHOWN = 3
VALUE_LIMIT = 40
# Values never printed, whatever either plan says: file_mounts content (metadata keys
# `ray-file-mount-<n>`; a plan made by older code may hold it unmasked) and credentials.
HIDDEN_PREFIX = "ray-file-mount-"
HIDDEN_KEYS = frozenset({"credentials", "accessToken", "private_key", "ssh_private_key",
                         "secretData"})
HIDDEN = "[secret]"

# A path one side of a change does not have, and how that side shows.
MISSING = object()
ABSENT = "(none)"


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
    if value is MISSING:
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


def show_path(resource: dict[str, Any], path: str) -> str:
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


def change_summary(path: str, old: Any, new: Any) -> str | None:
    """A one-line summary for long text (scripts, configs, file_mounts); None otherwise."""
    if not (_is_long_text(old) or _is_long_text(new)):
        return None
    if path.rsplit(".", 1)[-1] == BOOTSTRAP_CONFIG_KEY and isinstance(old, str) \
            and isinstance(new, str):
        return _bootstrap_config_summary(old, new)
    if (old is MISSING or isinstance(old, str)) and (new is MISSING or isinstance(new, str)):
        return _line_summary(old, new)
    return None


def shown_value(path: str, value: Any, leaves: dict[str, Any]) -> str:
    """`display`, except that a path absent on this side because it is a mapping here (a
    secret-masked value becoming visible, or the reverse) says how many entries it has."""
    if value is MISSING:
        inner = sum(1 for leaf in leaves if leaf.startswith(f"{path}.") or
                    leaf.startswith(f"{path}["))
        if inner:
            return f"<{inner} entries>"
    return display(path, value)
