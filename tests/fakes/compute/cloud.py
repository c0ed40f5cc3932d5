"""The fake's state: instances, TPU nodes and long-running operations of one pretend cloud.

Operations finish `Faults.operation_s` after they start; their effects (an instance becoming
RUNNING, disappearing, stopping) are applied lazily by `settle()`, so no background thread runs.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import itertools
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from tests.fakes.compute import time_limits
from tests.fakes.compute.catalogue import Catalogue
from tests.fakes.compute.errors import COMPUTE, ApiError
from tests.fakes.compute.faults import Faults
from tests.fakes.compute.reservations import Reservations, check_flex_start

# GCE's label rules: keys start with a lowercase letter; keys and values are at most 63
# lowercase letters, digits, `-` and `_` (values may be empty); at most 64 labels.
_LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
_MAX_LABELS = 64


def label_fingerprint(labels: dict[str, str]) -> str:
    """A base64 hash of the labels, as GCE's `labelFingerprint` (format: byte)."""
    digest = hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).digest()[:8]
    return base64.b64encode(digest).decode("ascii")


def check_labels(labels: Any, field: str) -> dict[str, str]:
    """GCE refuses a label that breaks its rules with 400 invalid, naming the field."""
    if not isinstance(labels, dict) or len(labels) > _MAX_LABELS:
        raise ApiError(400, f"Invalid value for field '{field}': at most {_MAX_LABELS} labels")
    for key, value in labels.items():
        if not _LABEL_KEY.fullmatch(str(key)) or not isinstance(value, str) \
                or not _LABEL_VALUE.fullmatch(value):
            raise ApiError(400, f"Invalid value for field '{field}.{key}': '{value}'. "
                           "Label keys and values must be lowercase letters, digits, - or _.")
    return dict(labels)
_EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)
# GCE's metadata rules: keys [a-zA-Z0-9-_]{1,128}; all keys and values under 512 KB.
_METADATA_KEY = re.compile(r"[a-zA-Z0-9_-]{1,128}")
_METADATA_BYTES = 512 * 1024


def check_metadata(metadata: Any, field: str, serial: int) -> dict[str, Any]:
    """An instance's `metadata` as GCE keeps it: its items and a fingerprint that changes with
    every write (`serial`); 400 for what GCE refuses."""
    metadata = metadata or {}
    items = metadata.get("items") or [] if isinstance(metadata, dict) else None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ApiError(400, f"Invalid value for field '{field}.items'")
    for item in items:
        if not _METADATA_KEY.fullmatch(str(item.get("key", ""))):
            raise ApiError(400, f"Invalid value for field '{field}.items.key': "
                           f"'{item.get('key')}'. Must match [a-zA-Z0-9-_]{{1,128}}.")
    size = sum(len(str(i["key"]).encode()) + len(str(i.get("value", "")).encode()) for i in items)
    if size > _METADATA_BYTES:
        raise ApiError(400, f"Invalid value for field '{field}': metadata is {size} bytes, "
                       f"more than {_METADATA_BYTES}")
    digest = hashlib.sha256(json.dumps([serial, items]).encode()).digest()[:8]
    kept: dict[str, Any] = {"kind": "compute#metadata",
                            "fingerprint": base64.b64encode(digest).decode("ascii")}
    if items:
        kept["items"] = [{"key": i["key"], "value": i.get("value", "")} for i in items]
    return kept


def one_scheduling(scheduling: Any) -> dict[str, Any]:
    """The instance's one Scheduling object from an insert's `scheduling`.

    The documented form is one object (https://cloud.google.com/compute/docs/reference/rest/
    v1/instances). Ray's GCP YAMLs write a list of one-key maps (`- preemptible: true`;
    ray-project/ray#46248, an open docs bug rated low severity, not a failure), and Ray's
    launcher sends it as it is: its own defaults.yaml does so for every default worker. GCE
    takes it, its entries together as the one object: clusters made from such YAMLs ran
    (ray-project/ray#9368: a head with `scheduling: [{onHostMaintenance: TERMINATE}]` and GPU
    workers). An entry that is no map is refused as a JSON parse error (Google's parse-error
    shape; the exact wording for this case was not found, so it is ours).
    """
    if not isinstance(scheduling, list):
        return scheduling or {}
    merged: dict[str, Any] = {}
    for entry in scheduling:
        if not isinstance(entry, dict):
            raise ApiError(400, "Invalid JSON payload received. Unknown name \"scheduling\" at "
                                f"'resource': scheduling entry {entry!r} is not an object.")
        merged.update(entry)
    return merged


def _is_spot(body: dict[str, Any]) -> bool:
    """A spot or preemptible insert, refusing the scheduling GCE refuses: a preemptible
    STANDARD instance, or a termination action on an on-demand one without a run limit."""
    scheduling = body.get("scheduling") or {}
    model = scheduling.get("provisioningModel")
    if model == "STANDARD" and scheduling.get("preemptible"):
        raise ApiError(400, "Invalid value for field 'resource.scheduling.preemptible': 'true'. "
                            "Preemptible is not supported with provisioning model STANDARD.")
    if (model in (None, "STANDARD") and scheduling.get("instanceTerminationAction")
            and not (scheduling.get("maxRunDuration") or scheduling.get("terminationTime"))):
        raise ApiError(400, "Invalid value for field 'resource.scheduling."
                            "instanceTerminationAction': it needs a SPOT provisioning model "
                            "or a maxRunDuration or terminationTime.")
    return model == "SPOT" or scheduling.get("preemptible") is True


@dataclass
class Operation:
    name: str
    kind: str  # "compute" or "tpu"
    scope: str  # "projects/p/zones/z" or "projects/p/locations/z"
    operation_type: str
    target: str
    done_at: float
    effects: list[Callable[[], None]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    done: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    error_status: tuple[int, str] = (403, "FORBIDDEN")
    pending_until: float = 0.0
    """Until then the operation is PENDING (queued), then RUNNING until `done_at`."""

    def compute_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(abs(hash(self.name)) % 10**18),
            "name": self.name,
            "zone": f"{COMPUTE}/{self.scope.rsplit('/', 2)[0]}/zones/{self.scope.rsplit('/')[-1]}",
            "operationType": self.operation_type,
            "targetLink": self.target,
            "status": "DONE" if self.done else (
                "PENDING" if time.monotonic() < self.pending_until else "RUNNING"),
            "progress": 100 if self.done else 0,
            "selfLink": f"{COMPUTE}/{self.scope}/operations/{self.name}",
        }
        if self.done and self.error:
            body["error"] = self.error
            body["httpErrorStatusCode"], body["httpErrorMessage"] = self.error_status
        body.update(self.metadata)
        return body

    def tpu_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"name": f"{self.scope}/operations/{self.name}", "done": self.done}
        if self.done and self.error:
            body["error"] = self.error
        return body


class FakeCloud:
    """Everything the fake API knows, guarded by one lock; `changed` wakes `wait` callers."""

    def __init__(self, faults: Faults, pending_share: float = 0.0) -> None:
        self.faults = faults
        self.pending_share = pending_share
        """The first share of an operation's time it is PENDING (google_profile.py)."""
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.instances: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self.tpu_nodes: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self.operations: dict[str, Operation] = {}
        self._unsettled: list[Operation] = []  # not done yet: what settle() looks at
        self.request_ids: dict[str, Operation] = {}
        self.calls: Counter[str] = Counter()
        self.catalogue = Catalogue()
        self.reservations = Reservations()
        self.timers: list[tuple[float, Callable[[], None]]] = []
        """(when, effect): what happens later without an operation (a flex-start VM's wait)."""
        self._ids = itertools.count(1)
        self._created = itertools.count(1)

    # ------------------------------------------------------------------ time

    def settle(self) -> None:
        """Finish every operation whose time has come and apply what it does."""
        now = time.monotonic()
        with self.lock:
            finished = False
            due = [timer for timer in self.timers if timer[0] <= now]
            self.timers = [timer for timer in self.timers if timer[0] > now]
            for _, effect in due:
                effect()
            still = []
            for operation in self._unsettled:
                if not operation.done and operation.done_at <= now:
                    for effect in operation.effects:
                        effect()
                    operation.done = True
                    finished = True
                elif not operation.done:
                    still.append(operation)
            self._unsettled = still
            if finished:
                self.changed.notify_all()

    def release(self, op_type: str) -> None:
        """Every running operation of `op_type` finishes now: a test ends a hold it asked for
        (`Faults.slow_operations`) once it has seen what it held the operation for."""
        with self.changed:
            now = time.monotonic()
            for operation in self.operations.values():
                if not operation.done and operation.operation_type == op_type:
                    operation.done_at = min(operation.done_at, now)
            self.settle()
            self.changed.notify_all()

    def wait_for(self, operation: Operation, max_wait_s: float) -> None:
        """Block like `zoneOperations.wait`: until the operation is done or max_wait_s passes."""
        deadline = time.monotonic() + max_wait_s
        with self.changed:
            while True:
                self.settle()
                remaining = deadline - time.monotonic()
                if operation.done or remaining <= 0:
                    return
                self.changed.wait(min(remaining, max(operation.done_at - time.monotonic(), 0.001)))

    def _operation(self, kind: str, scope: str, op_type: str, target: str) -> Operation:
        name = f"operation-{next(self._ids):08d}"
        running_s = self.faults.slow_operations.get(op_type, self.faults.operation_s)
        now = time.monotonic()
        operation = Operation(name, kind, scope, op_type, target, now + running_s,
                              pending_until=now + running_s * self.pending_share)
        self.operations[name] = operation
        self._unsettled.append(operation)
        return operation

    def _timestamp(self) -> str:
        stamp = _EPOCH + timedelta(milliseconds=next(self._created))
        return stamp.isoformat(timespec="milliseconds")

    # ---------------------------------------------------------- compute instances

    def running_operations(self, project: str, op_type: str) -> int:
        """The project's operations of this type not DONE yet."""
        with self.lock:
            self.settle()
            return sum(1 for op in self._unsettled
                       if not op.done and op.operation_type == op_type
                       and op.scope.startswith(f"projects/{project}/"))

    def zone_instances(self, project: str, zone: str) -> dict[str, dict[str, Any]]:
        return self.instances.setdefault((project, zone), {})

    def insert_instances(self, project: str, zone: str, names: list[str],
                         body: dict[str, Any], op_type: str,
                         request_id: str | None) -> Operation:
        """Create instances now (PROVISIONING); RUNNING once the returned operation is done.

        Beyond `Faults.instance_quota` the rest are not created and the operation fails with
        QUOTA_EXCEEDED: a partial bulkInsert, as GCE reports one.
        """
        body = {**body, "scheduling": one_scheduling(body.get("scheduling"))} \
            if "scheduling" in body else body
        with self.lock:
            if request_id and request_id in self.request_ids:
                return self.request_ids[request_id]
            scope = f"projects/{project}/zones/{zone}"
            zone_instances = self.zone_instances(project, zone)
            for name in names:
                if name in zone_instances:
                    raise ApiError(409, f"The resource '{scope}/instances/{name}' already exists",
                                   "alreadyExists")
            flex = check_flex_start(body)
            reservation, reserved = self.reservations.to_consume(project, zone, body, len(names))
            room = len(names)
            if self.faults.instance_quota is not None:
                room = max(0, min(room, self.faults.instance_quota - len(zone_instances)))
            refusal, reserved, granted = None, min(reserved, room), 0
            if reservation is not None and reservation.specific_required:
                # Reserved capacity is held for its consumers: no stockout; the rest refused.
                if reserved < room:
                    refusal = ({"errors": [{"code": "INVALID_FIELD_VALUE",
                                            "message": f"Specified reservations "
                                                       f"[{reservation.path}] do not have "
                                                       "enough resources available to fulfill "
                                                       "the request."}]},
                               (400, "BAD REQUEST"))
                room = reserved
            elif flex:
                granted = min(room, self.faults.flex_capacity.get(zone, room))
                if zone in self.faults.flex_capacity:
                    self.faults.flex_capacity[zone] -= granted
            else:
                # ANY_RESERVATION: the first `reserved` consume it, the rest are plain.
                plain = room - reserved if reservation is not None else room
                plain, refusal = self._zone_room(project, zone, plain, len(zone_instances),
                                                 _is_spot(body))
                room = plain + (reserved if reservation is not None else 0)
            target = f"{COMPUTE}/{scope}/instances/{names[0]}" if names else ""
            operation = self._operation("compute", scope, op_type, target)
            for index, name in enumerate(names[:room]):
                zone_instances[name] = self._new_instance(scope, name, body)
                if flex:  # PENDING: waiting for DWS capacity; then it runs, or the request fails
                    zone_instances[name]["status"] = "PENDING"
                    effect = time_limits.run(self, zone_instances, name) \
                        if index < granted else self._remove(zone_instances, name)
                    self.timers.append((time.monotonic() + self.faults.flex_start_s, effect))
                    continue
                operation.effects.append(time_limits.run(self, zone_instances, name))
                if reservation is not None and index < reserved:
                    reservation.consumers.add(f"{project}/{zone}/{name}")
            if room < len(names):
                operation.error = {"errors": [{
                    "code": "QUOTA_EXCEEDED",
                    "message": f"Quota 'INSTANCES' exceeded. Limit: "
                               f"{self.faults.instance_quota}.0 in zone {zone}.",
                }]}
            if refusal is not None:
                operation.error, operation.error_status = refusal
                if room == 0 and self.faults.refused_operation_s is not None:
                    operation.done_at = time.monotonic() + self.faults.refused_operation_s
            if op_type == "bulkInsert":
                status = {f"zones/{zone}": {"createdVmCount": room,
                                            "failedToCreateVmCount": len(names) - room,
                                            "targetVmCount": len(names)}}
                operation.metadata = {
                    "instancesBulkInsertOperationMetadata": {"perLocationStatus": status}}
            if request_id:
                self.request_ids[request_id] = operation
            return operation

    def _zone_room(self, project: str, zone: str, room: int, held: int, spot: bool
                   ) -> tuple[int, tuple[dict[str, Any], tuple[int, str]] | None]:
        """Per-zone faults: how many of `room` the zone takes, and the operation error (in
        GCE's shape) for the rest: a stockout (`Faults.zone_capacity`, or for a spot body
        `Faults.spot_capacity` first) or a per-zone quota (`Faults.zone_quota`). With
        `Faults.stockout_at_call` a stocked-out zone answers 503."""
        pool = self.faults.zone_capacity
        if spot and zone in self.faults.spot_capacity:
            pool = self.faults.spot_capacity
        capacity = pool.get(zone)
        quota = self.faults.zone_quota.get(zone)
        code = self.faults.stockout_code
        detail = ("'(resource type:compute)'." if code.endswith("_WITH_DETAILS")
                  else "Try a different zone, or try again later.")
        message = (f"The zone 'projects/{project}/zones/{zone}' does not have enough resources "
                   f"available to fulfill the request.  {detail}")
        if capacity == 0 and self.faults.stockout_at_call:
            raise ApiError(503, f"{code}: {message}", "resourceExhausted")
        if capacity is not None and capacity < room:
            pool[zone] = 0
            error = {"code": code, "message": message,
                     "errorDetails": [{"help": {"links": [{
                         "description": "Troubleshooting documentation",
                         "url": "https://cloud.google.com/compute/docs/resource-error"}]}}]}
            return capacity, ({"errors": [error]}, (503, "SERVICE UNAVAILABLE"))
        if capacity is not None:
            pool[zone] = capacity - room
        if quota is not None and quota - held < room:
            error = {"code": "QUOTA_EXCEEDED",
                     "message": f"Quota 'INSTANCES' exceeded.  Limit: {quota}.0 in zone {zone}.",
                     "errorDetails": [{"quotaInfo": {
                         "metricName": "compute.googleapis.com/instances", "limit": quota,
                         "limitName": "INSTANCES-per-zone", "dimensions": {"zone": zone}}}]}
            return max(0, quota - held), ({"errors": [error]}, (403, "FORBIDDEN"))
        return room, None

    def _new_instance(self, scope: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        instance = copy.deepcopy(body)
        instance["labels"] = check_labels(instance.get("labels") or {}, "resource.labels")
        instance["labelFingerprint"] = label_fingerprint(instance["labels"])
        serial = next(self._ids)
        instance["metadata"] = check_metadata(instance.get("metadata"), "resource.metadata",
                                              serial)
        machine_type = str(instance.get("machineType", "n1-standard-1"))
        if not machine_type.startswith("zones/") and "/" not in machine_type:
            machine_type = f"{scope.split('/', 2)[2]}/machineTypes/{machine_type}"
        instance.update({
            "kind": "compute#instance", "id": str(10**12 + serial), "name": name,
            "machineType": f"{COMPUTE}/projects/{scope.split('/')[1]}/{machine_type}",
            "status": "PROVISIONING", "creationTimestamp": self._timestamp(),
            "zone": f"{COMPUTE}/{scope}", "selfLink": f"{COMPUTE}/{scope}/instances/{name}",
        })
        interfaces = instance.get("networkInterfaces") or [{"network": "global/networks/default"}]
        for index, interface in enumerate(interfaces):
            # An interface naming only its subnet is on that subnet's network: the instance
            # GCE returns names both ("network: URL of the VPC network resource for this
            # instance", https://cloud.google.com/compute/docs/reference/rest/v1/instances).
            subnet = str(interface.get("subnetwork") or "").split("/")
            if not interface.get("network") and "regions" in subnet[:-1]:
                found = self.catalogue.subnetwork_json(
                    scope.split("/")[1], subnet[subnet.index("regions") + 1], subnet[-1])
                if found is not None:
                    interface["network"] = found["network"]
            interface["networkIP"] = f"10.{index}.{serial // 250 % 250}.{serial % 250 + 2}"
            for access in interface.get("accessConfigs") or []:
                access["natIP"] = f"203.0.{serial // 250 % 250}.{serial % 250 + 2}"
        instance["networkInterfaces"] = interfaces
        return instance

    @staticmethod
    def _set_status(store: dict[str, dict[str, Any]], name: str, status: str,
                    key: str = "status") -> Callable[[], None]:
        def effect() -> None:
            if name in store:
                store[name][key] = status
        return effect

    @staticmethod
    def _remove(store: dict[str, dict[str, Any]], name: str) -> Callable[[], None]:
        return lambda: store.pop(name, None)

    def _release(self, instance: str) -> Callable[[], None]:
        """A deleted instance's reservation is free again."""
        def effect() -> None:
            for reservation in self.reservations.by_key.values():
                reservation.consumers.discard(instance)
        return effect

    def get_instance(self, project: str, zone: str, name: str) -> dict[str, Any]:
        with self.lock:
            instance = self.zone_instances(project, zone).get(name)
            if instance is None:
                raise ApiError(404, f"The resource 'projects/{project}/zones/{zone}/instances/"
                               f"{name}' was not found", "notFound")
            return copy.deepcopy(instance)

    def change_instance(self, project: str, zone: str, name: str, action: str) -> Operation:
        """delete, stop or start: the status moves now, the end state comes with the operation."""
        with self.lock:
            self.get_instance(project, zone, name)
            store = self.zone_instances(project, zone)
            scope = f"projects/{project}/zones/{zone}"
            operation = self._operation("compute", scope, action,
                                        f"{COMPUTE}/{scope}/instances/{name}")
            if action == "delete":
                store[name]["status"] = "STOPPING"
                operation.effects.append(self._remove(store, name))
                operation.effects.append(self._release(f"{project}/{zone}/{name}"))
            elif action == "stop":
                store[name]["status"] = "STOPPING"
                operation.effects.append(self._set_status(store, name, "TERMINATED"))
                operation.effects.append(time_limits.cleared(store, name))
            else:
                store[name]["status"] = "STAGING"
                operation.effects.append(time_limits.run(self, store, name))
            return operation

    def set_labels(self, project: str, zone: str, name: str, labels: Any,
                   fingerprint: str | None) -> Operation:
        """`instances.setLabels`: replaces the labels if the fingerprint is the current one
        (optimistic locking), else 412 as GCE answers a stale writer."""
        with self.lock:
            self.get_instance(project, zone, name)
            instance = self.zone_instances(project, zone)[name]
            if fingerprint != instance["labelFingerprint"]:
                raise ApiError(412, "Labels fingerprint either invalid or resource labels have "
                               "changed", "conditionNotMet")
            instance["labels"] = check_labels(labels or {}, "labels")
            instance["labelFingerprint"] = label_fingerprint(instance["labels"])
            scope = f"projects/{project}/zones/{zone}"
            return self._operation("compute", scope, "setLabels",
                                   f"{COMPUTE}/{scope}/instances/{name}")

    def set_metadata(self, project: str, zone: str, name: str, metadata: Any) -> Operation:
        """`instances.setMetadata`: replaces the items (and the fingerprint) if the body quotes
        the current fingerprint, else 412 conditionNotMet. `Faults.metadata_race` first has
        another writer change the instance's metadata."""
        with self.lock:
            self.get_instance(project, zone, name)
            instance = self.zone_instances(project, zone)[name]
            race = self.faults.take_metadata_race(name)
            if race:
                current = {i["key"]: i["value"] for i in instance["metadata"].get("items", [])}
                items = [{"key": k, "value": v} for k, v in {**current, **race}.items()]
                instance["metadata"] = check_metadata({"items": items}, "metadata",
                                                      next(self._ids))
            if (metadata or {}).get("fingerprint") != instance["metadata"]["fingerprint"]:
                raise ApiError(412, "Supplied fingerprint does not match current metadata "
                               "fingerprint.", "conditionNotMet")
            instance["metadata"] = check_metadata(metadata, "metadata", next(self._ids))
            scope = f"projects/{project}/zones/{zone}"
            return self._operation("compute", scope, "setMetadata",
                                   f"{COMPUTE}/{scope}/instances/{name}")

    def set_machine_type(self, project: str, zone: str, name: str, machine_type: str
                         ) -> Operation:
        """`instances.setMachineType`: only a stopped (TERMINATED) instance may change it."""
        with self.lock:
            self.get_instance(project, zone, name)
            instance = self.zone_instances(project, zone)[name]
            if instance["status"] != "TERMINATED":
                raise ApiError(400, f"The resource 'projects/{project}/zones/{zone}/instances/"
                               f"{name}' is not ready", "resourceNotReady")
            scope = f"projects/{project}/zones/{zone}"
            short = machine_type.rsplit("/", 1)[-1]
            instance["machineType"] = f"{COMPUTE}/{scope}/machineTypes/{short}"
            return self._operation("compute", scope, "setMachineType",
                                   f"{COMPUTE}/{scope}/instances/{name}")

    def preempt(self, project: str, zone: str, name: str, keep: bool = False,
                at: datetime | None = None) -> None:
        """The instance is gone at once, as a reclaimed preemptible VM the user never sees,
        or with `keep` stays TERMINATED (GCE's default for a preempted VM). Either way GCE
        records a done `compute.instances.preempted` operation on it, at `at` (default now)."""
        with self.lock:
            instances = self.zone_instances(project, zone)
            if name in instances:
                self._record_preemption(project, zone, name, at or datetime.now(timezone.utc))
            if keep and name in instances:
                instances[name]["status"] = "TERMINATED"
                instances[name]["lastStopTimestamp"] = (at or datetime.now(timezone.utc)
                                                        ).isoformat(timespec="milliseconds")
            else:
                instances.pop(name, None)
            self.tpu_nodes.setdefault((project, zone), {}).pop(name, None)

    def _record_preemption(self, project: str, zone: str, name: str, at: datetime) -> None:
        scope = f"projects/{project}/zones/{zone}"
        operation = self._operation("compute", scope, "compute.instances.preempted",
                                    f"{COMPUTE}/{scope}/instances/{name}")
        stamp = at.isoformat(timespec="milliseconds")
        operation.done, operation.done_at = True, time.monotonic()
        operation.metadata = {"insertTime": stamp, "startTime": stamp, "endTime": stamp,
                              "user": "system@google.com"}

    def zone_operations(self, project: str, zone: str) -> list[Operation]:
        scope = f"projects/{project}/zones/{zone}"
        with self.lock:
            return [op for op in self.operations.values()
                    if op.kind == "compute" and op.scope == scope]

    def add_foreign_instance(self, project: str, zone: str, name: str,
                             labels: dict[str, str],
                             metadata: dict[str, str] | None = None,
                             machine_type: str | None = None,
                             service_account: dict[str, Any] | None = None) -> None:
        """An instance someone else (Ray's autoscaler, pulumi-gcp) made, RUNNING already,
        running as `service_account` ({"email", "scopes"}) when given."""
        with self.lock:
            scope = f"projects/{project}/zones/{zone}"
            items = [{"key": k, "value": v} for k, v in (metadata or {}).items()]
            body: dict[str, Any] = {"labels": dict(labels), "metadata": {"items": items}}
            if machine_type:
                body["machineType"] = machine_type
            if service_account:
                body["serviceAccounts"] = [dict(service_account)]
            instance = self._new_instance(scope, name, body)
            instance["status"] = "RUNNING"
            self.zone_instances(project, zone)[name] = instance

    # ---------------------------------------------------------------- TPU nodes

    def location_nodes(self, project: str, location: str) -> dict[str, dict[str, Any]]:
        return self.tpu_nodes.setdefault((project, location), {})

    def create_node(self, project: str, location: str, node_id: str,
                    body: dict[str, Any]) -> Operation:
        with self.lock:
            scope = f"projects/{project}/locations/{location}"
            nodes = self.location_nodes(project, location)
            if node_id in nodes:
                raise ApiError(409, f"node {node_id} already exists", "alreadyExists")
            operation = self._operation("tpu", scope, "create", f"{scope}/nodes/{node_id}")
            if (self.faults.instance_quota is not None
                    and len(nodes) >= self.faults.instance_quota):
                operation.error = {"code": 8, "message": "Quota exceeded for TPU cores"}
                return operation
            serial = next(self._ids)
            node = copy.deepcopy(body)
            node.update({
                "name": f"{scope}/nodes/{node_id}", "state": "CREATING",
                "createTime": self._timestamp(),
                "networkEndpoints": [{
                    "ipAddress": f"10.8.{serial // 250 % 250}.{serial % 250}", "port": 8470,
                    "accessConfig": {"externalIp": f"198.51.100.{serial % 250}"}}],
            })
            nodes[node_id] = node
            operation.effects.append(self._set_status(nodes, node_id, "READY", "state"))
            return operation

    def get_node(self, project: str, location: str, node_id: str) -> dict[str, Any]:
        with self.lock:
            node = self.location_nodes(project, location).get(node_id)
            if node is None:
                raise ApiError(404, f"node {node_id} not found", "notFound")
            return copy.deepcopy(node)

    def preempt_node(self, project: str, location: str, node_id: str) -> None:
        """A spot or preemptible TPU VM that GCP reclaimed: it stays, in state PREEMPTED."""
        with self.lock:
            self.location_nodes(project, location)[node_id]["state"] = "PREEMPTED"

    def patch_node(self, project: str, location: str, node_id: str, body: dict[str, Any],
                   update_mask: str) -> Operation:
        """`nodes.patch`: only the fields the API lets change, named in the mask, change."""
        fields = [f for f in update_mask.split(",") if f]
        allowed = {"description", "tags", "labels", "metadata"}
        if not fields or not set(fields) <= allowed:
            raise ApiError(400, f"updateMask {update_mask!r}: only {sorted(allowed)} can change")
        with self.lock:
            self.get_node(project, location, node_id)
            node = self.location_nodes(project, location)[node_id]
            if "labels" in fields:
                check_labels(body.get("labels") or {}, "node.labels")
            for name in fields:
                node[name] = copy.deepcopy(body.get(name))
            scope = f"projects/{project}/locations/{location}"
            return self._operation("tpu", scope, "update", f"{scope}/nodes/{node_id}")

    def change_node(self, project: str, location: str, node_id: str, action: str) -> Operation:
        with self.lock:
            self.get_node(project, location, node_id)
            nodes = self.location_nodes(project, location)
            scope = f"projects/{project}/locations/{location}"
            operation = self._operation("tpu", scope, action, f"{scope}/nodes/{node_id}")
            if action == "delete":
                nodes[node_id]["state"] = "DELETING"
                operation.effects.append(self._remove(nodes, node_id))
            elif action == "stop":
                nodes[node_id]["state"] = "STOPPING"
                operation.effects.append(self._set_status(nodes, node_id, "STOPPED", "state"))
            else:
                nodes[node_id]["state"] = "STARTING"
                operation.effects.append(self._set_status(nodes, node_id, "READY", "state"))
            return operation

    def operation(self, name: str) -> Operation:
        with self.lock:
            found = self.operations.get(name.rsplit("/", 1)[-1])
            if found is None:
                raise ApiError(404, f"operation {name} not found", "notFound")
            return found
