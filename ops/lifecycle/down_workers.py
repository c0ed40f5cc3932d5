"""`invoke down --workers-only [--keep-min-workers]`, as `ray down` names them.

--workers-only destroys only the stack's workers: its WorkerGroup resources and the TPU slices
it keeps (targeted `pulumi destroy`, which deletes their instances and slices), then, as `ray
down --workers-only` does, the workers Ray's autoscaler launched itself (instances, and TPU
nodes on a TPU cluster); the head and the rest stay, and the next `up` brings the workers back.
--keep-min-workers instead scales every worker type to its `min_workers` (the counts are
written to the stack file, as `invoke scale` does) and runs `up`.

Each form first says what it deletes (the cluster, its project and zones, how many nodes and
resources, from the stack's outputs and state) and asks, as `ray down` does (ops.confirm);
`-y` skips the question."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.dynamic_types import LEGACY_TYPE, WORKER_GROUP_TYPE
from infra.workers.naming import GROUP_LABEL
from model.config import load_cluster_config
from model.labels import CLUSTER_NAME, KIND_WORKER, NODE_KIND
from model.stack_config import cluster_path_for_stack
from ops.cloud.cloud_api import nodes_api
from ops.confirm import confirm
from ops.errors import OpsError
from ops.lifecycle.preempted import SLICE_KINDS
from ops.lifecycle.pulumi_cli import choose, clean_os_login, deployed_os_login, run_operation
from ops.lifecycle.scale import ScaleError, set_worker_count
from ops.stacks.cloud_nodes import api_errors
from ops.stacks.stack import Stack, cluster_credentials, require_cli, select_stack, stack_file_path


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
         cluster_yaml: str | None = None, yes: bool = False) -> None:
    """`invoke down`: the whole cluster (pulumi destroy; with OS Login then your login key and
    the cluster's out of your OS Login profile), or only its workers; the stack named by
    --stack, or (--config) the one the cluster YAML deploys as, or the project folder's only
    one; asked first unless `yes`."""
    if keep_min and not workers_only:
        raise OpsError("--keep-min-workers only goes with --workers-only (without it `down` "
                       "deletes the whole cluster): add --workers-only")
    chosen = choose(stack, cluster_yaml, "destroy")
    deployment = select_stack(chosen.name).export_stack().deployment or {}
    confirm(what_is_deleted(chosen, deployment, workers_only, keep_min), yes)
    if not workers_only:
        login = deployed_os_login(chosen)  # read before the outputs are gone
        run_operation(chosen, "destroy")
        clean_os_login(login, own_key=True)
    else:
        down_workers(chosen, keep_min, deployment)


def what_is_deleted(stack: Stack, deployment: dict[str, Any], workers_only: bool,
                    keep_min: bool) -> str:
    """One line: what `down` (or its --workers-only forms) deletes, from the stack's outputs
    and its state's resources."""
    try:
        outputs = stack.outputs
    except OpsError:  # never deployed, or deleted already: the state alone says
        outputs = None
    resources = [resource for resource in deployment.get("resources") or []
                 if not str(resource.get("type", "")).startswith("pulumi:")]
    if workers_only:
        resources = [resource for resource in resources
                     if resource.get("urn") in set(worker_urns(deployment))]
    nodes = [] if outputs is None else (outputs.workers if workers_only else list(outputs.nodes))
    zones = sorted({node.zone for node in nodes if node.zone}
                   | ({outputs.zone} if outputs is not None and outputs.zone else set()))
    where = "" if outputs is None else (
        f"cluster {outputs.cluster_name!r} in project {outputs.project or '?'}, "
        f"zone{'s' if len(zones) > 1 else ''} {', '.join(zones) or '?'}: ")
    if keep_min:
        return (f"stack {stack.name!r}: {where}the workers above each type's min_workers will "
                f"be deleted (of {len(nodes)} worker node(s) now)")
    what = "its workers" if workers_only else "the cluster"
    return (f"stack {stack.name!r}: {where}{what} will be deleted: {len(nodes)} node(s), "
            f"{len(resources)} resource(s) in its state"
            + (", and the workers Ray's autoscaler launched" if workers_only else ""))


def down_workers(stack: Stack, keep_min: bool, deployment: dict[str, Any]) -> None:
    require_cli()
    if keep_min:
        counts = keep_min_workers(stack.name)
        print("worker counts set to min_workers: "
              + ", ".join(f"{name}={count}" for name, count in counts.items()), flush=True)
        run_operation(stack, "up")
        return
    outputs = stack.outputs
    has_tpu = stack.cluster.has_tpu
    urns = worker_urns(deployment)
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
