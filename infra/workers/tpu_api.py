"""TPU VMs through the TPU v2 API, listed by labels and deleted: what the sweeper does to a
cluster's TPU slices (and those Ray's autoscaler launched), and how `invoke up` finds
preempted ones. Pulumi creates the slices it keeps as `tpu.V2Vm` resources, or through queued
requests (queued_api.py).

`google.cloud.tpu_v2` is imported inside the calls (see clients.py for why).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from google.api_core import exceptions as api_exceptions

from infra.workers.clients import ApiClients
from infra.workers.nodes import Node, Phase
from infra.workers.parallel import act_on_all
from infra.workers.retry import RetryPolicy, call_with_retry, poll_until

if TYPE_CHECKING:
    from google.cloud import tpu_v2

_LIVE = {"CREATING", "READY", "RESTARTING", "REIMAGING", "REPAIRING", "STARTING"}
_STOPPED = {"STOPPING", "STOPPED"}
_GONE = {"DELETING"}


def _phase(state: str) -> Phase:
    if state in _LIVE:
        return "live"
    return "stopped" if state in _STOPPED else "dead"


def _state(node: tpu_v2.Node) -> str:
    from google.cloud import tpu_v2

    return tpu_v2.Node.State(node.state).name


def listed_node(node: tpu_v2.Node) -> Node:
    """A TPU VM as the seam's Node: name, state, host 0's addresses."""
    state = _state(node)
    endpoint = node.network_endpoints[0] if node.network_endpoints else None
    return Node(
        name=node.name.rsplit("/", 1)[-1],
        status=state,
        phase=_phase(state),
        created=node.create_time.isoformat() if node.create_time else "",
        labels=dict(node.labels),
        internal_ip=(endpoint.ip_address or None) if endpoint else None,
        external_ip=(endpoint.access_config.external_ip or None) if endpoint else None,
    )


class TpuZone:
    """One zone's TPU v2 API: the calls and waits its nodes and queued requests share."""

    def __init__(
        self,
        project: str,
        zone: str,
        clients: ApiClients,
        retry: RetryPolicy,
        operation_deadline_s: float,
        poll_interval_s: float = 2.0,
    ) -> None:
        self.parent = f"projects/{project}/locations/{zone}"
        self.zone = zone
        self._clients, self._retry = clients, retry
        self._deadline_s, self._interval_s = operation_deadline_s, poll_interval_s

    def _delete_each(
        self, what: str, collection: str, names: Sequence[str], extra: dict[str, Any]
    ) -> None:
        """Delete `collection/name` for each name at once and wait; one already gone is fine."""
        delete = (
            self._clients.tpu.delete_node
            if collection == "nodes"
            else self._clients.tpu.delete_queued_resource
        )

        def call(name: str) -> str | None:
            request = {"name": f"{self.parent}/{collection}/{name}", **extra}
            try:
                future = call_with_retry(lambda: delete(request=request, retry=None), self._retry)
            except api_exceptions.NotFound:
                return None
            return future.operation.name

        act_on_all("delete", f"{what} in {self.zone}", names, call, self._wait)

    def _wait(self, operation_name: str) -> str | None:
        return wait_operation(
            self._clients, self._retry, operation_name, self._deadline_s, self._interval_s
        )


class TpuNodes(TpuZone):
    """The TPU VMs of one zone (a pod slice is one node of many hosts)."""

    def list_nodes(self, labels: dict[str, str]) -> list[Node]:
        # ListNodes has no filter: select by labels here.
        listed = call_with_retry(
            lambda: list(self._clients.tpu.list_nodes(parent=self.parent, retry=None)), self._retry
        )
        nodes = [
            listed_node(n)
            for n in listed
            if all(n.labels.get(k) == v for k, v in labels.items()) and _state(n) not in _GONE
        ]
        return sorted(nodes, key=lambda n: (n.created, n.name))

    def delete(self, names: Sequence[str]) -> None:
        self._delete_each("TPU nodes", "nodes", names, {})


def wait_operation(
    clients: ApiClients,
    retry: RetryPolicy,
    operation_name: str,
    deadline_s: float,
    interval_s: float,
) -> str | None:
    """Poll a TPU long-running operation until done; its error message, if it failed."""
    latest: dict[str, Any] = {}

    def done() -> bool:
        operation = call_with_retry(
            lambda: clients.tpu.get_operation(request={"name": operation_name}, retry=None),
            retry,
        )
        latest["op"] = operation
        return operation.done

    poll_until(done, deadline_s, f"TPU operation {operation_name}", interval_s=interval_s)
    operation = latest["op"]
    return operation.error.message if operation.HasField("error") else None
