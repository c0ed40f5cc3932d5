"""Ray's `fillout_defaults` on the raw YAML mapping, before the model validates it.

Ray's launcher (`prepare_config` in `ray/autoscaler/_private/util.py`) merges its GCP defaults
key by key at the top level: a key the YAML gives replaces the default whole, so
`head_node_type` keeps its default `ray_head_default` even when the YAML brings its own
`available_node_types`. It then drops a few keys with a warning or silently; keys its schema
does not know it refuses. The tests run Ray's own loader against this one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

# Ray 2.x refuses the pre-1.0 `head_node` / `worker_nodes` format once it holds anything.
LEGACY_KEYS = ("head_node", "worker_nodes")
# The names Ray gives the default types when a YAML still has the (empty) legacy keys.
LEGACY_TYPE_NAMES = ("ray-legacy-head-node-type", "ray-legacy-worker-node-type")


def fill_like_ray(
    data: dict[str, Any], defaults: dict[str, Any], provider_keys: Iterable[str]
) -> tuple[dict[str, Any], list[str], list[tuple[str, str]]]:
    """(merged mapping, warnings, refusals). Refusals are (YAML path, message) pairs."""
    merged = {**defaults, **data}
    warnings: list[str] = []
    refusals: list[tuple[str, str]] = []
    if "available_node_types" not in data and any(key in data for key in LEGACY_KEYS):
        refusals += _rename_for_legacy(merged, data)
    for key in LEGACY_KEYS:
        if key not in merged:
            continue
        if merged[key]:
            refusals.append(
                (
                    key,
                    f"the legacy {key} format is not supported since Ray 2.0: move its "
                    "fields to available_node_types.<type>.node_config and set head_node_type",
                )
            )
        else:
            warnings.append(f"{key}: dropping the empty legacy field, as Ray does: remove it")
        merged.pop(key)
    types = data.get("available_node_types")
    default_head = merged.get("head_node_type")
    if isinstance(types, dict) and types and "head_node_type" not in data and (
        default_head not in types
    ):
        refusals.append(
            (
                "head_node_type",
                f"is not set, and Ray's default {default_head!r} is not a key of "
                f"available_node_types: set head_node_type to one of {sorted(types)}",
            )
        )
    if "min_workers" in merged:
        merged.pop("min_workers")
        warnings.append(
            "min_workers: Ray ignores a top-level min_workers: set min_workers on a node type"
        )
    if "no_restart" in merged:
        merged.pop("no_restart")
        warnings.append("no_restart: set by `ray up --no-restart`, not by the YAML: ignored")
    provider = merged.get("provider")
    if isinstance(provider, dict):
        unused = sorted(set(provider) - set(provider_keys))
        if unused:
            merged["provider"] = {k: v for k, v in provider.items() if k not in unused}
            unset = sorted(set(provider_keys) - set(provider))
            for key in unused:
                close = difflib.get_close_matches(str(key), unset, n=1, cutoff=0.8)
                if close:  # a typo: ignoring it would drop what the user meant to set
                    refusals.append((f"provider.{key}", f"is not a provider key: did you "
                                                       f"mean {close[0]}? Rename it"))
                else:
                    warnings.append(f"provider.{key}: not used on GCP, ignored (Ray's GCP "
                                    "provider does not read it): remove it")
    return merged, warnings, refusals


def _rename_for_legacy(merged: dict[str, Any], data: dict[str, Any]) -> list[tuple[str, str]]:
    """Ray's `merge_legacy_yaml_with_defaults`: the default head and worker types keep their
    settings under Ray's legacy type names. It needs both legacy keys."""
    missing = [key for key in LEGACY_KEYS if key not in data]
    if missing:
        return [
            (
                missing[0],
                f"Ray's legacy format needs both {' and '.join(LEGACY_KEYS)}: remove the "
                "legacy keys and use available_node_types",
            )
        ]
    types, head = merged["available_node_types"], merged["head_node_type"]
    worker = next(name for name in types if name != head)
    legacy_head, legacy_worker = LEGACY_TYPE_NAMES
    merged["available_node_types"] = {legacy_head: types[head], legacy_worker: types[worker]}
    merged["head_node_type"] = legacy_head
    return []
