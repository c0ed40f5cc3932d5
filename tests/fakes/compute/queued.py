"""TPU v2 queued resources in the fake: requests that wait for capacity, then make their node.

A request moves as the real API documents (`QueuedResourceState.State`): the create operation
leaves it WAITING_FOR_RESOURCES; after `Faults.queued_wait_polls` reads (get or list; None:
never) it is PROVISIONING and its node is created from the spec, labels and metadata as sent;
once the node is READY the request is ACTIVE. `Faults.queued_failure` makes it FAILED instead.
GCP reclaiming a spot slice (`reclaim`) deletes the node and SUSPENDS the request. A delete
without `force` is refused while the request still has a node, as the API refuses it.

Tiers and reservations (https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.queuedResources,
https://cloud.google.com/tpu/docs/queued-resources): a request is Spot (`spot`), in a
reservation (`reservationName`, `projects/P/locations/ZONE/reservations/R`: one that does not
exist is refused at create; a full one FAILS the request when it would be provisioned; the
node then consumes it until deleted), or on-demand. `Faults.queued_tier_failure` fails the
requests of one tier ("spot", "reservation", "any-reservation", "on-demand") with a message.

Any reservation: a node spec with `schedulingConfig.reserved: true` and no `reservationName`
("Whether the node is created under a reservation", the v2 discovery document's
SchedulingConfig) is made in a reservation of its zone that matches its accelerator type (the
fake's TPU reservations name the accelerator type as their machine type), the project's own or
one shared with it, that does not require a specific affinity, as GCE's ANY_RESERVATION picks
one (https://cloud.google.com/compute/docs/instances/reservations-consume); with none free the
request FAILS when it would be provisioned. `spot` and `guaranteed` are one union field (the
request's tier, https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.queuedResources):
both at once is refused at create, and so is a Spot request whose node asks for a reservation
(Spot capacity is not reserved capacity: "You can't consume a reservation to create ... Spot
VMs", https://cloud.google.com/compute/docs/instances/reservations-consume#limitations).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tests.fakes.compute.cloud import ApiError, Operation, check_labels

if TYPE_CHECKING:
    from tests.fakes.compute.cloud import FakeCloud

# States in which the API deletes a request without `force` (DeleteQueuedResourceRequest).
_DELETABLE = {"ACCEPTED", "WAITING_FOR_RESOURCES", "FAILED", "SUSPENDED"}


class QueuedResources:
    """Every queued resource of the fake, keyed by (project, zone) then id; uses the cloud's
    lock, operations and TPU nodes."""

    def __init__(self, cloud: FakeCloud) -> None:
        self.cloud = cloud
        self.requests: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self._reads: dict[str, int] = {}
        self._held: dict[str, tuple[Any, dict[str, dict[str, Any]]]] = {}
        """node path -> (the reservation it consumes, its location's nodes)."""

    def location(self, project: str, zone: str) -> dict[str, dict[str, Any]]:
        return self.requests.setdefault((project, zone), {})

    def create(self, project: str, zone: str, request_id: str, body: dict[str, Any]
               ) -> Operation:
        scope = f"projects/{project}/locations/{zone}"
        specs = (body.get("tpu") or {}).get("nodeSpec") or []
        if len(specs) != 1 or not specs[0].get("nodeId") or not specs[0].get("node"):
            raise ApiError(400, "tpu.nodeSpec must hold one node with a nodeId")
        spec = specs[0]
        if spec.get("parent") != scope:
            raise ApiError(400, f"tpu.nodeSpec[0].parent must be {scope}")
        node = spec["node"]
        if not node.get("runtimeVersion") or not (
                node.get("acceleratorType") or node.get("acceleratorConfig")):
            raise ApiError(400, "tpu.nodeSpec[0].node needs runtimeVersion and an accelerator")
        check_labels(node.get("labels") or {}, "tpu.nodeSpec[0].node.labels")
        if "spot" in body and "guaranteed" in body:
            raise ApiError(400, "tier: only one of spot and guaranteed may be set")
        if "spot" in body and (node.get("schedulingConfig") or {}).get("reserved"):
            raise ApiError(400, "tpu.nodeSpec[0].node.schedulingConfig.reserved: a Spot "
                                "request cannot be made in a reservation")
        with self.cloud.lock:
            if body.get("reservationName"):
                self._reservation(body["reservationName"], zone)
            requests = self.location(project, zone)
            if request_id in requests:
                raise ApiError(409, f"queued resource {request_id} already exists",
                               "alreadyExists")
            name = f"{scope}/queuedResources/{request_id}"
            request = copy.deepcopy(body)
            request.update({"name": name, "createTime": self.cloud._timestamp(),
                            "state": {"state": "CREATING"}})
            requests[request_id] = request
            operation = self.cloud._operation("tpu", scope, "create", name)
            operation.effects.append(lambda: self._set(request, "WAITING_FOR_RESOURCES"))
            return operation

    def get(self, project: str, zone: str, request_id: str) -> dict[str, Any]:
        with self.cloud.lock:
            request = self.location(project, zone).get(request_id)
            if request is None:
                raise ApiError(404, f"queued resource {request_id} not found", "notFound")
            self._advance(project, zone, request)
            return copy.deepcopy(request)

    def list(self, project: str, zone: str) -> list[dict[str, Any]]:
        with self.cloud.lock:
            requests = list(self.location(project, zone).values())
            for request in requests:
                self._advance(project, zone, request)
            return copy.deepcopy(requests)

    def delete(self, project: str, zone: str, request_id: str, force: bool) -> Operation:
        self.release_gone()
        with self.cloud.lock:
            self.get(project, zone, request_id)
            requests = self.location(project, zone)
            request = requests[request_id]
            node_id = _node_id(request)
            nodes = self.cloud.location_nodes(project, zone)
            state = request["state"]["state"]
            if not force and node_id in nodes and state not in _DELETABLE:
                raise ApiError(400, f"queued resource {request_id} is {state} and has node "
                               f"{node_id}: delete the node first or pass force",
                               "failedPrecondition")
            scope = f"projects/{project}/locations/{zone}"
            operation = self.cloud._operation("tpu", scope, "delete", request["name"])
            self._set(request, "DELETING")
            if node_id in nodes:
                nodes[node_id]["state"] = "DELETING"
                operation.effects.append(lambda: nodes.pop(node_id, None))
            operation.effects.append(lambda: requests.pop(request_id, None))
            return operation

    def reclaim(self, project: str, zone: str, request_id: str) -> None:
        """GCP takes a spot slice back: its node is deleted, the request SUSPENDED by the
        service, no longer eligible for allocation."""
        with self.cloud.lock:
            request = self.location(project, zone)[request_id]
            self.cloud.location_nodes(project, zone).pop(_node_id(request), None)
            self._set(request, "SUSPENDED")
            request["state"]["stateInitiator"] = "SERVICE"

    def release_gone(self) -> None:
        """Reservations held by nodes that no longer exist are free again."""
        with self.cloud.lock:
            self.cloud.settle()
            for node_path, (reservation, nodes) in list(self._held.items()):
                if node_path.rsplit("/", 1)[-1] not in nodes:
                    reservation.consumers.discard(node_path)
                    del self._held[node_path]

    def _reservation(self, path: str, zone: str) -> Any:
        parts = path.split("/")
        if len(parts) != 6 or parts[0] != "projects" or parts[2] != "locations" \
                or parts[4] != "reservations" or parts[3] != zone:
            raise ApiError(400, f"reservationName {path!r} must be projects/PROJECT/locations/"
                                f"{zone}/reservations/NAME")
        try:
            return self.cloud.reservations.get(parts[1], zone, parts[5])
        except ApiError:
            raise ApiError(400, f"reservation {path} not found") from None

    def _any_reservation(self, project: str, zone: str, request: dict[str, Any]) -> Any:
        """The first reservation of the zone (the project's, then those shared with it) that
        a reserved node of the request's accelerator type may consume, or None."""
        book = self.cloud.reservations
        return next((r for r in book.in_zone(project, zone) + book.shared_into(project, zone)
                     if not r.specific_required and r.free > 0
                     and r.machine_type == _accelerator(request)), None)

    # ------------------------------------------------------------------ internals

    def _advance(self, project: str, zone: str, request: dict[str, Any]) -> None:
        """One read of the request: it moves on as capacity (the faults) allows."""
        state = request["state"]["state"]
        faults = self.cloud.faults
        if state == "WAITING_FOR_RESOURCES":
            reads = self._reads.get(request["name"], 0)
            self._reads[request["name"]] = reads + 1
            if faults.queued_wait_polls is None or reads < faults.queued_wait_polls:
                return
            failure = faults.queued_failure or faults.queued_tier_failure.get(_tier(request))
            reservation = None
            if not failure and request.get("reservationName"):
                reservation = self._reservation(request["reservationName"], zone)
                if reservation.free == 0:
                    failure = (f"Reservation {request['reservationName']} does not have enough "
                               "resources available to fulfill the request.")
            elif not failure and _tier(request) == "any-reservation":
                reservation = self._any_reservation(project, zone, request)
                if reservation is None:
                    failure = (f"No reservation in {zone} with room for "
                               f"{_accelerator(request)} matches the request.")
            if failure:
                self._set(request, "FAILED")
                request["state"]["failedData"] = {"error": {"code": 8, "message": failure}}
                return
            self._provision(project, zone, request)
            if reservation is not None:
                node_path = f"{project}/{zone}/{_node_id(request)}"
                reservation.consumers.add(node_path)
                nodes = self.cloud.location_nodes(project, zone)
                self._held[node_path] = (reservation, nodes)
        elif state == "PROVISIONING":
            node = self.cloud.location_nodes(project, zone).get(_node_id(request))
            if node is not None and node.get("state") == "READY":
                self._set(request, "ACTIVE")

    def _provision(self, project: str, zone: str, request: dict[str, Any]) -> None:
        spec = request["tpu"]["nodeSpec"][0]
        node = copy.deepcopy(spec["node"])
        node["queuedResource"] = request["name"]
        operation = self.cloud.create_node(project, zone, spec["nodeId"], node)
        if operation.error:
            self._set(request, "FAILED")
            request["state"]["failedData"] = {"error": operation.error}
            return
        self._set(request, "PROVISIONING")

    @staticmethod
    def _set(request: dict[str, Any], state: str) -> None:
        request["state"] = {"state": state}


def _tier(request: dict[str, Any]) -> str:
    if "spot" in request:
        return "spot"
    if request.get("reservationName"):
        return "reservation"
    node = request["tpu"]["nodeSpec"][0]["node"]
    return "any-reservation" if (node.get("schedulingConfig") or {}).get("reserved") \
        else "on-demand"


def _accelerator(request: dict[str, Any]) -> str:
    node = request["tpu"]["nodeSpec"][0]["node"]
    return str(node.get("acceleratorType") or (node.get("acceleratorConfig") or {}).get("type"))


def _node_id(request: dict[str, Any]) -> str:
    return request["tpu"]["nodeSpec"][0]["nodeId"]
