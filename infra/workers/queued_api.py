"""TPU slices requested through the TPU v2 queued-resources API (google-cloud-tpu's `tpu_v2`).

A queued resource is a request GCP fills when it has the capacity: it waits in state
WAITING_FOR_RESOURCES, goes PROVISIONING, and is ACTIVE once its node exists. The node is the
full TPU v2 Node body we send for any slice (metadata with the startup script, labels,
accelerator, runtime, network, service account, scheduling), so a queued slice boots and joins
Ray like any other. FAILED requests stay until deleted; SUSPENDED ones (GCP reclaimed the spot
node) are no longer eligible for allocation. Deleting with `force` deletes the node first.

`google.cloud.tpu_v2` is imported inside the calls (see clients.py for why).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.api_core import exceptions as api_exceptions

from infra.workers.nodes import Node, Phase
from infra.workers.retry import call_with_retry, poll_until
from infra.workers.tpu_api import TpuZone, listed_node

if TYPE_CHECKING:
    from google.cloud import tpu_v2

ACTIVE = "ACTIVE"
# A request in these states will never become ACTIVE: a new one must be queued.
DEAD = frozenset({"FAILED", "SUSPENDING", "SUSPENDED"})
DELETING = "DELETING"


@dataclass(frozen=True)
class QueuedRequest:
    """One queued resource as the API reports it."""

    name: str
    """Its id: the node it asks for has the same name."""
    state: str
    reason: str = ""
    """Why it FAILED (the API's error), or who suspended it."""
    labels: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    """What its node spec asks for: the node's labels and metadata."""
    created: str = ""


def request_body(
    parent: str, name: str, node: dict[str, Any], valid_until_minutes: int | None
) -> dict[str, Any]:
    """The QueuedResource JSON for one slice. Spot is the request's tier (the API's `spot`),
    not a node scheduling field; preemptible and reserved stay on the node."""
    node = dict(node)
    if node.get("acceleratorConfig"):
        # The API's enum (V4, V5P, ...); the YAML may say v4, as pulumi-gcp's V2Vm accepts.
        config = node["acceleratorConfig"]
        node["acceleratorConfig"] = {**config, "type": str(config["type"]).upper()}
    scheduling = dict(node.pop("schedulingConfig", None) or {})
    spot = bool(scheduling.pop("spot", False))
    if any(scheduling.values()):
        node["schedulingConfig"] = scheduling
    body: dict[str, Any] = {
        "tpu": {"nodeSpec": [{"parent": parent, "nodeId": name, "node": node}]},
    }
    if spot:
        body["spot"] = {}
    if valid_until_minutes:
        body["queueingPolicy"] = {"validUntilDuration": f"{int(valid_until_minutes) * 60}s"}
    return body


TPU_MARKETS = ("reservation", "any-reservation", "spot", "on-demand")
"""The rungs a TPU slice's ladder may name (the v2 API has no flex-start tier)."""


def rung_request(parent: str, name: str, node: dict[str, Any],
                 valid_until_minutes: int | None, rung: Mapping[str, Any],
                 reservation: str | None = None) -> dict[str, Any]:
    """The QueuedResource JSON for one slice on one rung of its ladder
    (https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.queuedResources):
    `spot` asks for the Spot tier; `reservation` names the reservation the slice is made in
    (`reservationName`, `projects/P/locations/ZONE/reservations/R`) and, like
    `any-reservation`, marks the node `schedulingConfig.reserved`; `on-demand` neither. The
    node is labelled with the rung (`ray-capacity`)."""
    market = rung["market"]
    scheduling = {k: v for k, v in (node.get("schedulingConfig") or {}).items()
                  if k not in ("spot", "preemptible", "reserved")}
    if market in ("reservation", "any-reservation"):
        scheduling["reserved"] = True
    labels = {**(node.get("labels") or {}), "ray-capacity": market}
    node = {**node, "schedulingConfig": {**scheduling, "spot": market == "spot"},
            "labels": labels}
    body = request_body(parent, name, node, valid_until_minutes)
    if reservation:
        project, reservation_id = _reservation_parts(parent, reservation)
        zone = parent.rsplit("/", 1)[-1]
        body["reservationName"] = (
            f"projects/{project}/locations/{zone}/reservations/{reservation_id}")
    return body


def _reservation_parts(parent: str, reference: str) -> tuple[str, str]:
    """`projects/P/reservations/R` -> (P, R); `R` -> (the parent's project, R)."""
    if reference.startswith("projects/"):
        parts = reference.split("/")
        return parts[1], parts[-1]
    return parent.split("/")[1], reference


def as_request(resource: tpu_v2.QueuedResource) -> QueuedRequest:
    from google.cloud import tpu_v2

    status = resource.state
    state = tpu_v2.QueuedResourceState.State(status.state).name
    reason = ""
    if "failed_data" in status:
        reason = status.failed_data.error.message
    elif state in DEAD:
        initiator = tpu_v2.QueuedResourceState.StateInitiator(status.state_initiator).name
        reason = {"SERVICE": "by GCP", "USER": "by a user"}.get(initiator, "")
    specs = resource.tpu.node_spec
    node = specs[0].node if specs else None
    return QueuedRequest(
        name=resource.name.rsplit("/", 1)[-1],
        state=state,
        reason=reason,
        labels=dict(node.labels) if node else {},
        metadata=dict(node.metadata) if node else {},
        created=resource.create_time.isoformat() if resource.create_time else "",
    )


def _phase(state: str) -> Phase:
    return "dead" if state in DEAD or state == DELETING else "live"


class QueuedSliceTimeout(TimeoutError):
    """The request was not ACTIVE within the wait; `request` is what it was last."""

    def __init__(self, request: QueuedRequest | None) -> None:
        self.request = request
        super().__init__(request.state if request else "gone")


class QueuedSlices(TpuZone):
    """The queued resources of one zone, and the nodes they made."""

    def get(self, name: str) -> QueuedRequest | None:
        """The request, or None when there is none of that name."""
        try:
            resource = call_with_retry(
                lambda: self._clients.tpu.get_queued_resource(
                    name=f"{self.parent}/queuedResources/{name}", retry=None
                ),
                self._retry,
            )
        except api_exceptions.NotFound:
            return None
        return as_request(resource)

    def create(self, name: str, body: dict[str, Any]) -> None:
        """Queue the request and wait for the create operation (not for capacity)."""
        from google.cloud import tpu_v2

        request = tpu_v2.CreateQueuedResourceRequest(
            parent=self.parent,
            queued_resource_id=name,
            queued_resource=tpu_v2.QueuedResource.from_json(json.dumps(body)),
        )
        future = call_with_retry(
            lambda: self._clients.tpu.create_queued_resource(request=request, retry=None),
            self._retry,
        )
        error = self._wait(future.operation.name)
        if error:
            raise RuntimeError(f"GCP refused the queued request for TPU slice {name}: {error}")

    def wait_active(self, name: str, wait_s: float) -> QueuedRequest | None:
        """Poll until the request is ACTIVE; a DEAD one is returned at once, and None when it
        was withdrawn meanwhile. Raises QueuedSliceTimeout when it is still on its way after
        `wait_s`."""
        latest: dict[str, QueuedRequest | None] = {}

        def settled() -> bool:
            latest["request"] = found = self.get(name)
            return found is None or found.state == ACTIVE or found.state in DEAD

        try:
            poll_until(
                settled, wait_s, f"queued request {name}", interval_s=self._interval_s, cap_s=30
            )
        except TimeoutError:
            raise QueuedSliceTimeout(latest.get("request")) from None
        return latest["request"]

    def wait_gone(self, name: str) -> None:
        """A request being deleted (by an earlier `down`, or GCP): until it has left."""
        poll_until(
            lambda: self.get(name) is None,
            self._deadline_s,
            f"deleting queued request {name}",
            interval_s=self._interval_s,
        )

    def node(self, name: str) -> Node | None:
        """The TPU node the request made, or None."""
        try:
            found = call_with_retry(
                lambda: self._clients.tpu.get_node(name=f"{self.parent}/nodes/{name}", retry=None),
                self._retry,
            )
        except api_exceptions.NotFound:
            return None
        return listed_node(found)

    def update_node(self, name: str, metadata: dict[str, str], labels: dict[str, str]) -> None:
        """Change the slice's node's metadata and labels in place (`nodes.patch`): its node
        watcher then re-applies a new startup script, as on any TPU slice."""
        from google.cloud import tpu_v2
        from google.protobuf import field_mask_pb2

        request = tpu_v2.UpdateNodeRequest(
            node=tpu_v2.Node(name=f"{self.parent}/nodes/{name}", metadata=metadata, labels=labels),
            update_mask=field_mask_pb2.FieldMask(paths=["metadata", "labels"]),
        )
        future = call_with_retry(
            lambda: self._clients.tpu.update_node(request=request, retry=None), self._retry
        )
        error = self._wait(future.operation.name)
        if error:
            raise RuntimeError(f"could not update TPU slice {name}'s metadata: {error}")

    # The sweeper's NodeLister: requests by their node's labels, deleted with their nodes.

    def list_nodes(self, labels: dict[str, str]) -> list[Node]:
        listed = call_with_retry(
            lambda: list(self._clients.tpu.list_queued_resources(parent=self.parent, retry=None)),
            self._retry,
        )
        found = [as_request(resource) for resource in listed]
        return sorted(
            (
                Node(
                    name=r.name,
                    status=r.state,
                    phase=_phase(r.state),
                    created=r.created,
                    labels=r.labels,
                )
                for r in found
                if r.state != DELETING and all(r.labels.get(k) == v for k, v in labels.items())
            ),
            key=lambda n: (n.created, n.name),
        )

    def delete(self, names: Sequence[str]) -> None:
        """Each request with `force`: its node is deleted first, then the request."""
        self._delete_each("TPU queued requests", "queuedResources", names, {"force": True})
