"""`invoke down --workers-only [--keep-min-workers]`, as `ray down` names them.

--workers-only destroys only the stack's workers: its WorkerGroup resources and the TPU slices
it keeps (targeted `pulumi destroy`, which deletes their instances and slices), then, as `ray
down --workers-only` does, the workers Ray's autoscaler launched itself (instances, and TPU
nodes on a TPU cluster); the head and the rest stay, and the next `up` brings the workers back.
--keep-min-workers instead scales every worker type to its `min_workers` (the counts are
written to the stack file, as `invoke scale` does) and runs `up`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.config import load_cluster_config
from infra.dynamic_types import LEGACY_TYPE, WORKER_GROUP_TYPE
from infra.labels import CLUSTER_NAME, KIND_WORKER, NODE_KIND
from infra.stack_config import cluster_path_for_stack
from infra.workers.naming import GROUP_LABEL
from ops.cloud.cloud_api import api_errors, nodes_api
from ops.errors import OpsError
from ops.lifecycle.cluster_yaml import stack_from_yaml
from ops.lifecycle.preempted import SLICE_KINDS
from ops.lifecycle.pulumi_cli import operate, run_operation
from ops.lifecycle.scale import ScaleError, set_worker_count
from ops.stack import Stack, cluster_credentials, require_cli, select_stack, stack_file_path


def worker_urns(deployment: dict[str, Any]) -> list[str]:
    """URNs of the workers in an exported deployment: the WorkerGroups (dynamic resources whose
    outputs carry a `group_id`; the ClusterSweeper's do not, and a stack last updated before
    the dynamic resources had their own types has both under the shared one) and the kept TPU
    worker slices (V2Vm or queued, under a TpuSlices component; a TPU head is not one)."""
    return [resource["urn"] for resource in deployment.get("resources") or []
            if (resource.get("type") in (WORKER_GROUP_TYPE, LEGACY_TYPE)
                and "group_id" in (resource.get("outputs") or {}))
            or any(kind in resource.get("urn", "") for kind in SLICE_KINDS)]


def keep_min_workers(stack: str, stacks_dir: Path | None = None) -> dict[str, int]:
    """Write each worker type's min_workers as its count; the counts written."""
    config = load_cluster_config(
        cluster_path_for_stack(stack, stacks_dir or stack_file_path(stack).parent))
    counts = {name: node_type.min_workers for name, node_type in config.worker_types.items()}
    try:
        for name, count in counts.items():
            set_worker_count(stack, name, count, stacks_dir)
    except ScaleError as exc:
        raise OpsError(str(exc)) from None
    return counts


def down(stack: str | None, workers_only: bool, keep_min: bool,
         cluster_yaml: str | None = None) -> None:
    """`invoke down`: the whole cluster (pulumi destroy), or only its workers; the stack named
    by --stack, or (--config) the one the cluster YAML deploys as."""
    if not (workers_only or keep_min):
        operate(stack, "destroy", cluster_yaml)
    elif cluster_yaml:
        down_workers(stack_from_yaml(stack, cluster_yaml, create=False), keep_min, workers_only)
    else:
        down_workers(Stack.choose(stack), keep_min, workers_only)


def down_workers(stack: Stack, keep_min: bool, workers_only: bool) -> None:
    if not workers_only:
        raise OpsError("--keep-min-workers only goes with --workers-only (without it `down` "
                       "deletes the whole cluster): add --workers-only")
    require_cli()
    if keep_min:
        counts = keep_min_workers(stack.name)
        print("worker counts set to min_workers: "
              + ", ".join(f"{name}={count}" for name, count in counts.items()), flush=True)
        run_operation(stack, "up")
        return
    outputs = stack.outputs
    has_tpu = stack.cluster.has_tpu
    urns = worker_urns(select_stack(stack.name).export_stack().deployment or {})
    if urns:
        run_operation(stack, "destroy", target=urns, target_dependents=True)
    else:
        print(f"stack {stack.name!r} keeps no workers")
    credentials = cluster_credentials(stack.settings)
    deleted = delete_autoscaler_workers(
        outputs.project, outputs.zone, outputs.cluster_name, credentials=credentials
    )
    if has_tpu:
        deleted += delete_autoscaler_workers(
            outputs.project, outputs.zone, outputs.cluster_name, "tpu", credentials
        )
    print(f"deleted {len(deleted)} worker(s) of Ray's autoscaler")


def delete_autoscaler_workers(
    project: str, zone: str, cluster_name: str, kind: str = "compute",
    credentials: str | None = None,
) -> list[str]:
    """The cluster's Ray workers (instances, or TPU nodes) of Ray's autoscaler's own kind that
    no group owns, deleted; the slices Pulumi keeps are `unmanaged` and stay."""
    what = "TPU node(s)" if kind == "tpu" else "worker(s)"
    with api_errors(f"deleting the autoscaler's {what}"):
        api = nodes_api(project, zone, kind, credentials)
        workers = api.list_nodes({CLUSTER_NAME: cluster_name, NODE_KIND: KIND_WORKER})
        names = [node.name for node in workers if GROUP_LABEL not in node.labels]
        if names:  # the API waits for each deletion: say what it is waiting for
            print(f"deleting {len(names)} {what} of Ray's autoscaler: {', '.join(names)}",
                  flush=True)
            api.delete(names)
    return names
