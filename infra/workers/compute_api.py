"""Compute Engine workers: one `bulkInsert` for many instances, operations waited on together.

`bulkInsert` takes InstanceProperties, which lack a few Instance fields (e.g. `hostname`); a
body using those falls back to one `insert` per instance, issued in parallel.

`google.cloud.compute_v1` is imported inside the calls (see clients.py for why).
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from google.api_core import exceptions as api_exceptions

from infra.workers.clients import ApiClients
from infra.workers.nodes import Node, Phase, WorkerGroupError
from infra.workers.parallel import act_on_all, run_all, short_error, wait_all
from infra.workers.retry import OperationTimeout, RetryPolicy, call_with_retry

if TYPE_CHECKING:
    from google.cloud import compute_v1

_LIVE = {"PROVISIONING", "STAGING", "RUNNING", "REPAIRING"}
_STOPPED = {"STOPPING", "STOPPED", "TERMINATED", "SUSPENDING", "SUSPENDED"}
# zoneOperations.wait returns after at most ~2 minutes even if the operation still runs.
_WAIT_CALL_S = 130.0


@functools.cache
def _bulk_fields() -> frozenset[str]:
    """The body fields `bulkInsert`'s InstanceProperties can carry."""
    from google.cloud import compute_v1

    return frozenset(f.json_name for f in compute_v1.InstanceProperties.pb().DESCRIPTOR.fields)


def label_filter(labels: dict[str, str]) -> str:
    return " AND ".join(f'(labels.{key} = "{value}")' for key, value in sorted(labels.items()))


def _phase(status: str) -> Phase:
    if status in _LIVE:
        return "live"
    return "stopped" if status in _STOPPED else "dead"


def _node(instance: compute_v1.Instance) -> Node:
    interface = instance.network_interfaces[0] if instance.network_interfaces else None
    access = interface.access_configs[0] if interface and interface.access_configs else None
    return Node(
        name=instance.name,
        status=instance.status,
        phase=_phase(instance.status),
        created=instance.creation_timestamp,
        labels=dict(instance.labels),
        internal_ip=(interface.network_i_p or None) if interface else None,
        external_ip=(access.nat_i_p or None) if access else None,
    )


def _operation_error(operation: compute_v1.Operation) -> str | None:
    if not operation.error or not operation.error.errors:
        return None
    return "; ".join(f"{e.code}: {e.message}" for e in operation.error.errors)


def _bare(url: str) -> str:
    return url.rsplit("/", 1)[-1]


def instance_properties(body: dict[str, Any]) -> dict[str, Any]:
    """An insert body as `bulkInsert`'s InstanceProperties: like an instance template, they
    name the machine, accelerator and disk types bare (`n1-standard-2`), not by zonal URL."""
    properties = dict(body)
    properties["machineType"] = _bare(str(body.get("machineType", "")))
    properties["guestAccelerators"] = [
        {**accelerator, "acceleratorType": _bare(accelerator["acceleratorType"])}
        for accelerator in body.get("guestAccelerators") or []
    ]
    disks = []
    for disk in body.get("disks") or []:
        params = disk.get("initializeParams")
        if params and params.get("diskType"):
            disk = {**disk, "initializeParams": {**params, "diskType": _bare(params["diskType"])}}
        disks.append(disk)
    properties["disks"] = disks
    return properties


class ComputeNodes:
    """Workers of one zone as GCE instances."""

    def __init__(
        self,
        project: str,
        zone: str,
        clients: ApiClients,
        retry: RetryPolicy,
        operation_deadline_s: float,
    ) -> None:
        self.project, self.zone = project, zone
        self._clients, self._retry = clients, retry
        self._deadline_s = operation_deadline_s

    def list_nodes(self, labels: dict[str, str]) -> list[Node]:
        from google.cloud import compute_v1

        request = compute_v1.ListInstancesRequest(
            project=self.project, zone=self.zone, filter=label_filter(labels)
        )
        instances = call_with_retry(
            lambda: list(self._clients.instances.list(request=request, retry=None)), self._retry
        )
        nodes = [_node(i) for i in instances]
        return sorted(nodes, key=lambda n: (n.created, n.name))

    # ------------------------------------------------------------------ create

    def create(self, names: Sequence[str], body: dict[str, Any]) -> None:
        if not names:
            return
        if set(body) <= _bulk_fields():
            operations, failures = [self._bulk_insert(names, body)], {}
        else:
            started, failures = run_all(list(names), lambda n: self._insert(n, body))
            operations = list(started.values())
        errors = [f"{name}: {short_error(exc)}" for name, exc in failures.items()]
        errors += wait_all(operations, self._wait)
        if errors:
            existing = {n.name for n in self._get_existing(names)}
            created = [n for n in names if n in existing]
            raise WorkerGroupError(
                f"created {len(created)} of {len(names)} instances in "
                f"{self.zone}: {'; '.join(errors)}",
                created,
            )

    def _bulk_insert(self, names: Sequence[str], body: dict[str, Any]) -> str:
        from google.cloud import compute_v1

        properties = instance_properties(body)
        resource = compute_v1.BulkInsertInstanceResource(
            count=len(names),
            min_count=1,
            per_instance_properties={name: {} for name in names},
            instance_properties=compute_v1.InstanceProperties.from_json(json.dumps(properties)),
        )
        request = compute_v1.BulkInsertInstanceRequest(
            project=self.project,
            zone=self.zone,
            request_id=str(uuid.uuid4()),
            bulk_insert_instance_resource_resource=resource,
        )
        operation = call_with_retry(
            lambda: self._clients.instances.bulk_insert_unary(request=request, retry=None),
            self._retry,
        )
        return operation.name

    def _insert(self, name: str, body: dict[str, Any]) -> str:
        from google.cloud import compute_v1

        instance = compute_v1.Instance.from_json(json.dumps({**body, "name": name}))
        request = compute_v1.InsertInstanceRequest(
            project=self.project,
            zone=self.zone,
            request_id=str(uuid.uuid4()),
            instance_resource=instance,
        )
        operation = call_with_retry(
            lambda: self._clients.instances.insert_unary(request=request, retry=None), self._retry
        )
        return operation.name

    def _get_existing(self, names: Sequence[str]) -> list[Node]:
        found, _ = run_all(list(names), self._get)
        return [node for node in found.values() if node is not None]

    def _get(self, name: str) -> Node | None:
        try:
            instance = call_with_retry(
                lambda: self._clients.instances.get(
                    project=self.project, zone=self.zone, instance=name, retry=None
                ),
                self._retry,
            )
        except api_exceptions.NotFound:
            return None
        return _node(instance)

    # ------------------------------------------------------------ delete/stop/start

    def delete(self, names: Sequence[str]) -> None:
        self._each("delete", names, self._clients_call("delete_unary"))

    def stop(self, names: Sequence[str]) -> None:
        self._each("stop", names, self._clients_call("stop_unary"))

    def start(self, names: Sequence[str]) -> None:
        self._each("start", names, self._clients_call("start_unary"))

    def _clients_call(self, method: str):  # noqa: ANN202 - a small closure factory
        def call(name: str) -> str | None:
            try:
                operation = call_with_retry(
                    lambda: getattr(self._clients.instances, method)(
                        project=self.project, zone=self.zone, instance=name, retry=None
                    ),
                    self._retry,
                )
            except api_exceptions.NotFound:
                return None  # already gone: deleting twice is not an error
            return operation.name

        return call

    def _each(self, verb: str, names: Sequence[str], call: Callable[[str], str | None]) -> None:
        act_on_all(verb, f"instances in {self.zone}", names, call, self._wait)

    # ------------------------------------------------------------------ operations

    def _wait(self, operation_name: str) -> str | None:
        from google.cloud import compute_v1

        give_up_at = time.monotonic() + self._deadline_s
        while True:
            remaining = give_up_at - time.monotonic()
            if remaining <= 0:
                raise OperationTimeout(
                    f"operation {operation_name} did not finish within {self._deadline_s:.0f} s"
                )
            call_timeout = min(remaining, _WAIT_CALL_S) + 5
            operation = call_with_retry(
                lambda t=call_timeout: self._clients.zone_operations.wait(
                    project=self.project,
                    zone=self.zone,
                    operation=operation_name,
                    retry=None,
                    timeout=t,
                ),
                self._retry,
            )
            if operation.status == compute_v1.Operation.Status.DONE:
                return _operation_error(operation)

