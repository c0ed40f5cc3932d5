"""Compute Engine workers: one `bulkInsert` for many instances, operations waited on together.

`bulkInsert` takes InstanceProperties, which lack a few Instance fields (e.g. `hostname`); a
body using those falls back to one `insert` per instance, issued in parallel.

A group lives in a region: its nodes are listed across the region's zones (one aggregated
list), created in the group's zone first and, when that zone is out of capacity, in the next
zone that offers the types (zones.py), after a quota pre-flight (quota.py).

Compute is called over REST (compute_rest.py): instances and operations are the API's JSON.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from google.api_core import exceptions as api_exceptions

from bootstrap.head_provider.ladder import FLEX_START, MARKETS, is_capacity_refusal
from infra.workers.capacity import CAPACITY_LABEL, market_of
from infra.workers.clients import ApiClients
from infra.workers.nodes import NoCapacity, Node, Phase, Want, WorkerGroupError
from infra.workers.parallel import run_all, short_error, start_and_wait, wait_all
from infra.workers.quota import QuotaReader, body_needs, quota_rows, refuse_if_short
from infra.workers.retry import (
    OperationTimeout,
    RetryPolicy,
    call_with_retry,
    poll_until,
)
from infra.workers.zones import (
    FallbackZones,
    ZoneFinder,
    ZoneRefused,
    body_in_zone,
    describe_skipped,
    refused_for_capacity,
    region_of,
)

# PENDING: a flex-start instance waiting for Dynamic Workload Scheduler's capacity (the
# Instance status enum of the compute v1 discovery document): it is the group's node already.
_LIVE = {"PENDING", "PROVISIONING", "STAGING", "RUNNING", "REPAIRING"}
PENDING = "PENDING"
_STOPPED = {"STOPPING", "STOPPED", "TERMINATED", "SUSPENDING", "SUSPENDED"}
# zoneOperations.wait returns after at most ~2 minutes even if the operation still runs.
_WAIT_CALL_S = 130.0
# setMetadata/setLabels answered 412 (someone else changed the node meanwhile) this often in a
# row for one node: give up on it rather than race forever.
_FINGERPRINT_TRIES = 5


BULK_FIELDS = frozenset({
    "advancedMachineFeatures", "canIpForward", "confidentialInstanceConfig", "description",
    "disks", "guestAccelerators", "keyRevocationActionType", "labels", "localSsdEncryptionMode",
    "machineType", "metadata", "minCpuPlatform", "networkInterfaces",
    "networkPerformanceConfig", "privateIpv6GoogleAccess", "reservationAffinity",
    "resourceManagerTags", "resourcePolicies", "scheduling", "serviceAccounts",
    "shieldedInstanceConfig", "tags", "workloadIdentityConfig",
})
"""The body fields `bulkInsert`'s InstanceProperties can carry: the properties of the compute
v1 discovery document's InstanceProperties schema (tests/infra/test_compute_rest_methods.py
compares them)."""


def label_filter(labels: dict[str, str]) -> str:
    return " AND ".join(f'(labels.{key} = "{value}")' for key, value in sorted(labels.items()))


def _phase(status: str) -> Phase:
    if status in _LIVE:
        return "live"
    return "stopped" if status in _STOPPED else "dead"


def addresses(instance: dict[str, Any]) -> tuple[str | None, str | None]:
    """(internal, external) address of an instance's first interface, None where it has
    none (`networkInterfaces[0].networkIP`, its `accessConfigs[0].natIP`)."""
    interface = (instance.get("networkInterfaces") or [{}])[0]
    access = (interface.get("accessConfigs") or [{}])[0]
    return interface.get("networkIP") or None, access.get("natIP") or None


def _node(instance: dict[str, Any]) -> Node:
    metadata = instance.get("metadata") or {}
    internal_ip, external_ip = addresses(instance)
    status = instance.get("status", "")
    return Node(
        name=instance["name"],
        status=status,
        phase=_phase(status),
        created=instance.get("creationTimestamp", ""),
        labels=dict(instance.get("labels") or {}),
        internal_ip=internal_ip,
        external_ip=external_ip,
        zone=_bare(instance.get("zone", "")) or None,
        metadata={item["key"]: item.get("value", "") for item in metadata.get("items") or []},
        metadata_fingerprint=metadata.get("fingerprint", ""),
        label_fingerprint=instance.get("labelFingerprint", ""),
        market=instance_market(instance),
    )


def instance_market(instance: dict[str, Any]) -> str:
    """What an instance is: the ladder rung its label names (reservation, any-reservation,
    spot, flex-start, on-demand), else by its own scheduling: `flex-start`, `spot` (spot or
    preemptible) or `on-demand`."""
    label = (instance.get("labels") or {}).get(CAPACITY_LABEL, "")
    if label in MARKETS:
        return label
    scheduling = instance.get("scheduling") or {}
    if scheduling.get("provisioningModel") == "FLEX_START":
        return FLEX_START
    return market_of(scheduling)


def _metadata_state(node: Node) -> tuple[dict[str, str], str]:
    return dict(node.metadata), node.metadata_fingerprint


def _label_state(node: Node) -> tuple[dict[str, str], str]:
    return dict(node.labels), node.label_fingerprint


def _operation_error(operation: dict[str, Any]) -> str | None:
    errors = (operation.get("error") or {}).get("errors") or []
    if not errors:
        return None
    return "; ".join(f"{e.get('code', '')}: {e.get('message', '')}" for e in errors)


def _bare(url: str) -> str:
    return url.rsplit("/", 1)[-1]


def aggregated_instances(
    clients: ApiClients, project: str, filter_: str, retry: RetryPolicy
) -> list[tuple[str, dict[str, Any]]]:
    """(zone, instance) of every instance of the project the filter takes: one aggregated
    list, page by page (500 instances a page), each page retried on its own. A zone with
    none is a scope with a `warning` and no `instances`."""
    return [
        (_bare(scope), instance)
        for page in clients.compute.pages("instances.aggregatedList", retry, project=project,
                                          filter=filter_)
        for scope, scoped in (page.get("items") or {}).items()
        for instance in scoped.get("instances") or []
    ]


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
    """Workers of one region as GCE instances; `zone` is where they go first."""

    def __init__(
        self,
        project: str,
        zone: str,
        clients: ApiClients,
        retry: RetryPolicy,
        operation_deadline_s: float,
        fallback_zones: FallbackZones = None,
    ) -> None:
        self.project, self.zone, self.region = project, zone, region_of(zone)
        self._clients, self._retry = clients, retry
        self._deadline_s = operation_deadline_s
        self._zones = ZoneFinder(project, zone, fallback_zones, clients, retry)
        self._quota = QuotaReader(project, clients, retry)
        self._zone_of: dict[str, str] = {}
        """Where each node listed or created by this object lives, for delete/stop/start."""
        self._bulk_created: dict[str, int] = {}
        """bulkInsert operation -> how many instances it created, as its metadata says."""

    def list_nodes(self, labels: dict[str, str]) -> list[Node]:
        """Nodes with these labels in every zone of the region: one aggregated list."""
        nodes = [
            _node(instance)
            for zone, instance in aggregated_instances(
                self._clients, self.project, label_filter(labels), self._retry)
            if region_of(zone) == self.region
        ]
        self._zone_of.update({n.name: n.zone or self.zone for n in nodes})
        return sorted(nodes, key=lambda n: (n.created, n.name))

    # ------------------------------------------------------------------ create

    def create(self, names: Sequence[str], body: dict[str, Any]) -> None:
        """After the quota pre-flight, in the group's zone, then zone after zone for what a
        zone refuses for capacity; what was created stays, labelled, whatever happens."""
        if not names:
            return
        self.check_quota(len(names), body)
        remaining, created, refusals = list(names), [], []
        queue, looked_further = [self.zone], False
        with ThreadPoolExecutor(max_workers=1) as pool:
            # Looked up while the first zone tries: a stockout then costs no extra round trip.
            fallbacks = pool.submit(self._zones.fallbacks, body)
            while remaining and queue:
                zone = queue.pop(0)
                made, errors = self._create_in_zone(zone, remaining, body_in_zone(body, zone))
                created += made
                remaining = [n for n in remaining if n not in made]
                if errors and not all(is_capacity_refusal(e) for e in errors):
                    raise WorkerGroupError(
                        f"created {len(created)} of {len(names)} instances in "
                        f"{zone}: {'; '.join(errors)}",
                        created,
                    )
                if errors:
                    refusals.append(f"{zone}: {errors[0]}")
                if remaining and not looked_further:
                    queue, looked_further = fallbacks.result(), True
        if remaining:
            raise NoCapacity(
                self._no_capacity(len(names), len(created), refusals, body), created
            )

    def await_started(self, names: Sequence[str], timeout_s: float) -> list[str]:
        """Flex-start instances just created: wait, at most `timeout_s`, until none is PENDING.
        The names that started; those still PENDING are deleted (given up: never made twice),
        and those gone (their request failed) are left out."""
        found: dict[str, Node] = {}

        def settled() -> bool:
            by_zone: dict[str, list[str]] = {}
            for name in names:
                by_zone.setdefault(self._zone_of.get(name, self.zone), []).append(name)
            found.clear()
            for zone, in_zone in by_zone.items():
                found.update({n.name: n for n in self._get_existing(zone, in_zone)})
            return all(node.status != PENDING for node in found.values())

        try:
            poll_until(settled, timeout_s, "flex-start instances", interval_s=0.05, cap_s=5.0)
        except OperationTimeout:
            self.delete([name for name, node in found.items() if node.status == PENDING])
        return [name for name in names if name in found and found[name].status != PENDING]

    def check_quota(self, count: int, body: dict[str, Any]) -> None:
        """Refuse, before any insert, what the region's quotas cannot hold."""
        machine_type = str(body.get("machineType"))
        with ThreadPoolExecutor(max_workers=2) as pool:
            reading = pool.submit(self._quota.region_quotas, self.region)
            cpus = pool.submit(self._quota.guest_cpus, self.zone, machine_type)
            try:
                quotas = reading.result()
                rows = quota_rows(body_needs(body, count, cpus.result(), quotas), quotas)
            except api_exceptions.NotFound as missing:
                raise WorkerGroupError(
                    f"{short_error(missing)}: check the machine type "
                    f"({machine_type.rsplit('/', 1)[-1]}) against `gcloud compute machine-types "
                    f"list --zones {self.zone}`, and the region and zone in the provider section"
                ) from None
        refuse_if_short(rows, self.project, self.region, f"{count} new instance(s)")

    def _no_capacity(
        self, wanted: int, created: int, refusals: list[str], body: dict[str, Any]
    ) -> str:
        tried = "; ".join(refusals)
        if self._zones.fallback is False:
            hint = "zone failover is off (provider.fallback_zones: false): allow other zones"
        else:
            hint = "allow more zones in provider.fallback_zones"
        return (
            f"created {created} of {wanted} instances: no zone of region {self.region} had "
            f"capacity ({tried}{describe_skipped(self._zones.skipped, body)}). Try again "
            f"later, {hint}, or pick another machine or accelerator type"
        )

    def _create_in_zone(
        self, zone: str, names: Sequence[str], body: dict[str, Any]
    ) -> tuple[list[str], list[str]]:
        """(names created in the zone, errors): every operation waited on."""
        if set(body) <= BULK_FIELDS:
            try:
                operations, failures = [self._bulk_insert(zone, names, body)], {}
            except ZoneRefused as refused:
                return [], [str(refused)]
        else:
            started, failures = run_all(list(names), lambda n: self._insert(zone, n, body))
            operations = list(started.values())
        errors = [f"{name}: {short_error(exc)}" for name, exc in failures.items()]
        errors += wait_all(operations, lambda operation: self._wait(zone, operation))
        if not errors:
            made = list(names)
        elif operations and self._bulk_created.get(operations[0]) == 0 and not failures:
            made = []  # the bulkInsert says it created none: nothing to look for
        else:
            existing = {n.name for n in self._get_existing(zone, names)}
            made = [n for n in names if n in existing]
        self._zone_of.update({name: zone for name in made})
        return made, errors

    def _bulk_insert(self, zone: str, names: Sequence[str], body: dict[str, Any]) -> str:
        resource = {
            "count": len(names),
            "minCount": 1,
            "perInstanceProperties": {name: {} for name in names},
            "instanceProperties": instance_properties(body),
        }
        return self._submit("instances.bulkInsert", zone, resource)

    def _insert(self, zone: str, name: str, body: dict[str, Any]) -> str:
        return self._submit("instances.insert", zone, {**body, "name": name})

    def _submit(self, method: str, zone: str, body: dict[str, Any]) -> str:
        """Send an insert (retrying what GCE says is transient, refusing a capacity error as
        one) under one request id, the same on every retry; the name of its operation."""
        request_id = str(uuid.uuid4())
        call = functools.partial(self._clients.compute.call, method, body,
                                 project=self.project, zone=zone, requestId=request_id)
        return call_with_retry(refused_for_capacity(call), self._retry)["name"]

    def _get_existing(self, zone: str, names: Sequence[str]) -> list[Node]:
        found, _ = run_all(list(names), lambda name: self._get(zone, name))
        return [node for node in found.values() if node is not None]

    def _get(self, zone: str, name: str) -> Node | None:
        try:
            instance = call_with_retry(
                lambda: self._clients.compute.call(
                    "instances.get", project=self.project, zone=zone, instance=name),
                self._retry,
            )
        except api_exceptions.NotFound:
            return None
        return _node(instance)

    # ------------------------------------------------------------ delete/stop/start

    def delete(self, names: Sequence[str]) -> None:
        self._each("delete", names, lambda zone: self._call_in(zone, "instances.delete"))

    def stop(self, names: Sequence[str]) -> None:
        self._each("stop", names, lambda zone: self._call_in(zone, "instances.stop"))

    def start(self, names: Sequence[str]) -> None:
        self._each("start", names, lambda zone: self._call_in(zone, "instances.start"))

    # ------------------------------------------------------------ in place

    def set_metadata(self, nodes: Sequence[Node], want: Want) -> None:
        """setMetadata on every node (live or stopped, in whichever zone) whose items are not
        what `want` makes of them, all at once; each operation waited on."""
        self._converge("update the metadata of", nodes, want, _metadata_state,
                       self._write_metadata)

    def set_labels(self, nodes: Sequence[Node], want: Want) -> None:
        """setLabels likewise."""
        self._converge("relabel", nodes, want, _label_state, self._write_labels)

    def _converge(
        self,
        verb: str,
        nodes: Sequence[Node],
        want: Want,
        state: Callable[[Node], tuple[dict[str, str], str]],
        write: Callable[[str, str, dict[str, str], str], str],
    ) -> None:
        """Write what `want` says, quoting the fingerprint last seen; on a 412 (the node was
        changed since it was listed) read it again and recompute from what is there now."""
        listed = {node.name: node for node in nodes}
        self._zone_of.update({n.name: n.zone or self.zone for n in nodes})

        def call_in(zone: str) -> Callable[[str], str | None]:
            def call(name: str) -> str | None:
                values, fingerprint = state(listed[name])
                for _ in range(_FINGERPRINT_TRIES):
                    desired = want(values)
                    if desired == values:
                        return None
                    try:
                        return call_with_retry(
                            functools.partial(write, zone, name, desired, fingerprint),
                            self._retry,
                        )
                    except api_exceptions.NotFound:
                        return None  # deleted since it was listed: nothing to update
                    except api_exceptions.PreconditionFailed:
                        fresh = self._get(zone, name)
                        if fresh is None:
                            return None
                        values, fingerprint = state(fresh)
                raise WorkerGroupError(
                    f"{name} was changed by another writer {_FINGERPRINT_TRIES} times in a row "
                    "(HTTP 412 conditionNotMet): run `pulumi up` again"
                )

            return call

        self._each(verb, list(listed), call_in)

    def _write_metadata(
        self, zone: str, name: str, items: dict[str, str], fingerprint: str
    ) -> str:
        resource = {"fingerprint": fingerprint,
                    "items": [{"key": key, "value": value} for key, value in items.items()]}
        return self._clients.compute.call(
            "instances.setMetadata", resource, project=self.project, zone=zone, instance=name,
        )["name"]

    def _write_labels(self, zone: str, name: str, labels: dict[str, str], fingerprint: str) -> str:
        resource = {"labelFingerprint": fingerprint, "labels": labels}
        return self._clients.compute.call(
            "instances.setLabels", resource, project=self.project, zone=zone, instance=name,
        )["name"]

    # ------------------------------------------------------------ delete/stop/start (calls)

    def _call_in(self, zone: str, method: str) -> Callable[[str], str | None]:
        def call(name: str) -> str | None:
            try:
                operation = call_with_retry(
                    lambda: self._clients.compute.call(
                        method, project=self.project, zone=zone, instance=name),
                    self._retry,
                )
            except api_exceptions.NotFound:
                return None  # already gone: deleting twice is not an error
            return operation["name"]

        return call

    def _each(
        self,
        verb: str,
        names: Sequence[str],
        call_in: Callable[[str], Callable[[str], str | None]],
    ) -> None:
        """The call `call_in(zone)` makes, on every node, zone by zone (each node where it was
        listed or created)."""
        by_zone: dict[str, list[str]] = {}
        for name in names:
            by_zone.setdefault(self._zone_of.get(name, self.zone), []).append(name)
        zones = list(by_zone)
        results, failures = run_all(
            zones,
            lambda zone: start_and_wait(
                by_zone[zone],
                call_in(zone),
                lambda operation: self._wait(zone, operation),
            ),
        )
        errors = [f"{zone}: {short_error(exc)}" for zone, exc in failures.items()]
        errors += [error for zone in zones for error in results.get(zone, [])]
        if errors:
            raise WorkerGroupError(
                f"could not {verb} {len(errors)} of {len(names)} instances in "
                f"{', '.join(zones)}: {'; '.join(errors)}"
            )

    # ------------------------------------------------------------------ operations

    def _wait(self, zone: str, operation_name: str) -> str | None:
        give_up_at = time.monotonic() + self._deadline_s
        while True:
            remaining = give_up_at - time.monotonic()
            if remaining <= 0:
                raise OperationTimeout(
                    f"operation {operation_name} did not finish within {self._deadline_s:.0f} s"
                )
            call_timeout = min(remaining, _WAIT_CALL_S) + 5
            operation = call_with_retry(
                lambda t=call_timeout: self._clients.compute.call(
                    "zoneOperations.wait", timeout=t,
                    project=self.project, zone=zone, operation=operation_name,
                ),
                self._retry,
            )
            if operation.get("status") == "DONE":
                if "instancesBulkInsertOperationMetadata" in operation:
                    statuses = operation["instancesBulkInsertOperationMetadata"]
                    self._bulk_created[operation_name] = sum(
                        int(status.get("createdVmCount") or 0)
                        for status in (statuses.get("perLocationStatus") or {}).values()
                    )
                return _operation_error(operation)
