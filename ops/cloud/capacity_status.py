"""`invoke status`'s capacity lines: what is waiting for capacity and which nodes end soon.

Waiting, per node: a flex-start instance still PENDING (Dynamic Workload Scheduler looks for
its capacity: the compute v1 Instance status enum), and each TPU slice's queued request that
is not ACTIVE (QueuedResourceState.State of the TPU v2 API: CREATING, ACCEPTED,
WAITING_FOR_RESOURCES, PROVISIONING, FAILED, SUSPENDING, SUSPENDED...), with its rung (the
`ray-capacity` label the ladder puts on the node), its zone, since when it was asked for
(the instance's creationTimestamp, the request's createTime: the APIs record no time of the
state itself) and, for a FAILED or SUSPENDED one, GCP's reason.

Ending: each running node with a time limit (every flex-start VM) and when GCE ends it
(`resourceStatus.scheduling.terminationTimestamp`), with the time left.

The cluster's instances are listed in every zone (one aggregated list), the autoscaler's too,
so a rung in another zone shows; the queued requests in the stack's zone (TPU slices stay
there). `capacity_view` gives the same as data for `invoke status --json`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from ops.cloud.cloud_api import StackApi
from ops.cloud.preemptions import ago
from ops.errors import OpsError
from ops.stacks.cloud_nodes import api_errors

READING = "reading what waits for capacity"  # what failed, when the APIs did not answer
QUEUED_DONE = ("ACTIVE", "DELETING")


@dataclass(frozen=True)
class Waiting:
    name: str
    node_type: str
    rung: str
    zone: str
    state: str
    since: str  # ISO time it was asked for
    reason: str = ""


@dataclass(frozen=True)
class Ending:
    name: str
    node_type: str
    zone: str
    ends: str  # ISO time GCE ends it


@dataclass(frozen=True)
class CapacityView:
    waiting: list[Waiting]
    ending: list[Ending]

    def as_dict(self) -> dict[str, Any]:
        return {"waiting": [asdict(w) for w in self.waiting],
                "ending": [asdict(e) for e in self.ending]}


def _instances(api: StackApi) -> tuple[list[Waiting], list[Ending]]:
    from bootstrap.head_provider.capacity import CAPACITY_LABEL
    from infra.workers.compute_api import aggregated_instances, label_filter
    from infra.workers.retry import INTERACTIVE
    from model.labels import CLUSTER_NAME, USER_NODE_TYPE

    outputs = api.outputs
    waiting, ending = [], []
    for zone, instance in aggregated_instances(
            api.clients, outputs.project, label_filter({CLUSTER_NAME: outputs.cluster_name}),
            INTERACTIVE):
        labels, status = instance.get("labels") or {}, instance.get("status", "")
        node_type = labels.get(USER_NODE_TYPE, "")
        if status == "PENDING":
            waiting.append(Waiting(
                instance["name"], node_type, labels.get(CAPACITY_LABEL, "flex-start"),
                zone, "PENDING", instance.get("creationTimestamp", ""),
                "waiting for Dynamic Workload Scheduler's capacity"))
        scheduling = (instance.get("resourceStatus") or {}).get("scheduling") or {}
        end = scheduling.get("terminationTimestamp")
        if end and status == "RUNNING":
            ending.append(Ending(instance["name"], node_type, zone, end))
    return waiting, ending


def _queued(api: StackApi) -> list[Waiting]:
    from google.cloud import tpu_v2

    from bootstrap.head_provider.capacity import CAPACITY_LABEL
    from infra.workers.queued_api import as_request
    from model.labels import CLUSTER_NAME, USER_NODE_TYPE

    outputs = api.outputs
    waiting = []
    for resource in api.clients.tpu.list_queued_resources(
            parent=f"projects/{outputs.project}/locations/{outputs.zone}", retry=None):
        request = as_request(resource)
        if request.labels.get(CLUSTER_NAME) != outputs.cluster_name \
                or request.state in QUEUED_DONE:
            continue
        rung = request.labels.get(CAPACITY_LABEL) or _tier(resource, tpu_v2)
        waiting.append(Waiting(request.name, request.labels.get(USER_NODE_TYPE, ""), rung,
                               outputs.zone, request.state, request.created, request.reason))
    return waiting


def _tier(resource: Any, tpu_v2: Any) -> str:
    """A request made without a ladder: its tier, as the API holds it."""
    if tpu_v2.QueuedResource.pb(resource).HasField("spot"):
        return "spot"
    return "reservation" if resource.reservation_name else "on-demand"


def capacity_view(api: StackApi) -> CapacityView:
    """What waits for capacity and what ends, sorted by name; OpsError (one line) when the
    APIs cannot be asked."""
    outputs = api.outputs
    with api_errors(READING):
        waiting, ending = _instances(api)
        if any(node.api == "tpu" for node in outputs.nodes):
            waiting += _queued(api)
    return CapacityView(sorted(waiting, key=lambda w: w.name),
                        sorted(ending, key=lambda e: e.name))


def capacity_lines(api: StackApi, now: datetime | None = None) -> list[str]:
    """The lines under `invoke status`'s nodes table (none when nothing waits or ends)."""
    from bootstrap.head_provider.spend import parse_time
    from bootstrap.head_provider.time_limit import left

    if not api.outputs.project:
        return []
    try:
        view = capacity_view(api)
    except OpsError as exc:
        return [str(exc)]
    now = now or datetime.now(timezone.utc)
    lines = []
    if view.waiting:
        lines.append("waiting for capacity:")
    for wait in view.waiting:
        asked = parse_time(wait.since)
        since = f"asked {asked.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC ({ago(asked, now)})" \
            if asked else "asked at an unknown time"
        why = f": {wait.reason}" if wait.reason else ""
        lines.append(f"  {wait.name} ({wait.node_type or 'no type'}) on the {wait.rung} rung in "
                     f"{wait.zone}: {wait.state}, {since}{why}")
    if view.ending:
        lines.append("nodes with an end (GCE stops or deletes each then: flex-start's "
                     "max_run_duration):")
    for end in view.ending:
        at = parse_time(end.ends)
        if at is None:
            continue
        lines.append(f"  {end.name} ({end.node_type or 'no type'}, {end.zone}): ends "
                     f"{at.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC, {left(at, now)}")
    return lines


def status_json(stack: str | None) -> str:
    """`invoke status --json`: the nodes (the stack's and the autoscaler's) and what waits for
    capacity or ends, as JSON, from the stack's outputs and the APIs (no SSH, no `ray
    status`)."""
    import json

    from ops.cloud.autoscaled import autoscaled_rows
    from ops.stacks.stack import load_outputs

    api = StackApi(load_outputs(stack))
    autoscaled, problems = autoscaled_rows(api)
    try:
        capacity: dict[str, Any] = capacity_view(api).as_dict()
    except OpsError as exc:
        capacity, problems = {}, [*problems, str(exc)]
    nodes = [{**asdict(node), "api": node.api} for node in (*api.outputs.nodes, *autoscaled)]
    return json.dumps({"stack": api.outputs.stack, "nodes": nodes, "capacity": capacity,
                       "problems": problems}, indent=2, sort_keys=True)
