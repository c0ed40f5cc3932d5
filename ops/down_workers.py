"""`invoke down --workers-only [--keep-min-workers]`, as `ray down` names them.

--workers-only destroys only the stack's WorkerGroup resources (targeted `pulumi destroy`,
which deletes their instances); the head and the rest stay, and the next `up` brings the
groups back. --keep-min-workers instead scales every worker type to its `min_workers` (the
counts are written to the stack file, as `invoke scale` does) and runs `up`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.config import load_cluster_config
from infra.stack_config import cluster_path_for_stack
from ops.errors import OpsError
from ops.pulumi_cli import require_cli, run_operation, select_stack
from ops.scale import ScaleError, set_worker_count

DYNAMIC_TYPE = "pulumi-python:dynamic:Resource"


def worker_group_urns(deployment: dict[str, Any]) -> list[str]:
    """URNs of the WorkerGroups in an exported deployment: dynamic resources whose outputs
    carry a `group_id` (the ClusterSweeper's do not)."""
    return [resource["urn"] for resource in deployment.get("resources") or []
            if resource.get("type") == DYNAMIC_TYPE
            and "group_id" in (resource.get("outputs") or {})]


def keep_min_workers(stack: str, stacks_dir: Path | None = None) -> dict[str, int]:
    """Write each worker type's min_workers as its count; the counts written."""
    config = load_cluster_config(cluster_path_for_stack(stack, stacks_dir))
    counts = {name: node_type.min_workers for name, node_type in config.worker_types.items()}
    try:
        for name, count in counts.items():
            set_worker_count(stack, name, count, stacks_dir)
    except ScaleError as exc:
        raise OpsError(str(exc)) from None
    return counts


def down_workers(stack: str, keep_min: bool, workers_only: bool) -> None:
    if not workers_only:
        raise OpsError("--keep-min-workers only goes with --workers-only (without it `down` "
                       "deletes the whole cluster): add --workers-only")
    require_cli()
    if keep_min:
        counts = keep_min_workers(stack)
        print("worker counts set to min_workers: "
              + ", ".join(f"{name}={count}" for name, count in counts.items()), flush=True)
        run_operation(stack, "up")
        return
    urns = worker_group_urns(select_stack(stack).export_stack().deployment or {})
    if not urns:
        print(f"stack {stack!r} has no worker groups: nothing to delete")
        return
    run_operation(stack, "destroy", target=urns, target_dependents=True)
