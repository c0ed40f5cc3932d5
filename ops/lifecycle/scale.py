"""`invoke scale`: set one worker type's count in a stack file, then run `pulumi up`.

The count lives under `ray-gcp:workerCounts` (node type -> count) in the stack file the engine
reads (`.ray-gcp/stacks/Pulumi.<stack>.yaml`: for a tracked stack, its copy there, never the
tracked file); the program reads it and sets each WorkerGroup's `count`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from model.config import ClusterConfig, ConfigError, load_cluster_config
from model.plan import resolve_worker_counts
from model.stack_config import COUNTS_KEY, StackFileError, cluster_path_for_stack
from ops.confirm import confirm
from ops.errors import OpsError
from ops.lifecycle.pulumi_cli import run_operation
from ops.stack import Stack, engine_stack_file, engine_workspace, require_cli, stack_file_path


class ScaleError(OpsError):
    """A scale request that cannot be applied; the message is one line naming the fix."""


def check_count(cluster: ClusterConfig, pinned: Mapping[str, object], node_type: str,
                count: int) -> None:
    """The plan's own check of the counts the stack would pin (model.plan.resolve_worker_counts,
    as `up` makes it): `count` for `node_type` beside the other types' pinned counts, each
    within its [min_workers, max_workers] and all together within the cluster's max_workers."""
    try:
        resolve_worker_counts(cluster, {**pinned, node_type: count})
    except ConfigError as exc:
        raise ScaleError(f"count {count} for {node_type!r}: "
                         + "; ".join(message for _, message in exc.problems)) from None


def _cluster_of(stack: str, stacks_dir: Path | None) -> ClusterConfig:
    try:
        return load_cluster_config(
            cluster_path_for_stack(stack, stacks_dir or stack_file_path(stack).parent))
    except (ConfigError, StackFileError) as exc:
        raise ScaleError(" ".join(str(exc).split())) from None


def set_worker_count(stack: str, node_type: str, count: int,
                     stacks_dir: Path | None = None) -> Path:
    """Validate against the counts pinned in the file, then write the count into the stack file
    the engine reads, keeping every other key: `stacks_dir`'s, else the state folder's (for a
    tracked stack its copy there: the tracked file is never written)."""
    cluster = _cluster_of(stack, stacks_dir)
    if stacks_dir:
        path = stacks_dir / f"Pulumi.{stack}.yaml"
    else:
        engine_workspace(stack)
        path = engine_stack_file(stack)
    document = yaml.safe_load(path.read_text()) or {}
    settings = document.setdefault("config", {}) or {}
    document["config"] = settings
    counts = settings.get(COUNTS_KEY) or {}
    if not isinstance(counts, dict):
        raise ScaleError(f"{path}: {COUNTS_KEY} must be a mapping of node type to count")
    check_count(cluster, counts, node_type, count)
    counts[node_type] = count
    settings[COUNTS_KEY] = counts
    path.write_text(yaml.safe_dump(document, sort_keys=False, default_flow_style=False))
    return path


def scale(stack: str | None, node_type: str, count: str, yes: bool = False) -> None:
    """`invoke scale`: write the count (checked as the plan checks it: the type's limits and the
    cluster's max_workers), then up as `invoke up` does (refresh first, progress as it goes);
    fewer workers than the stack has pinned are deleted only once confirmed (ops.confirm)."""
    if not str(count).isdigit():
        raise OpsError(f"--count {count!r} is not a whole number: pass a count such as 2")
    chosen = Stack.choose(stack, require_file=True)
    # every check before the file is written or the CLI is looked for
    check_count(chosen.cluster, chosen.worker_counts, node_type, int(count))
    require_cli()
    now = chosen.worker_counts.get(node_type, 0)
    if int(count) < now:
        cluster = chosen.cluster
        confirm(f"stack {chosen.name!r}: cluster {cluster.cluster_name!r} in project "
                f"{cluster.provider.project}, zone {cluster.provider.availability_zone}: "
                f"{now - int(count)} {node_type} worker(s) will be deleted ({now} -> {count})",
                yes)
    path = set_worker_count(chosen.name, node_type, int(count))
    print(f"{node_type}: count {count} written to {path}")
    run_operation(chosen, "up")
