"""The seam between the provider and a cloud API: Ray's create / terminate / list-by-labels.

`ComputeNodes` implements all of it for the WorkerGroup provider; `TpuNodes` only lists and
deletes (TPU slices are `tpu.V2Vm` resources), which is what the sweeper needs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Phase = Literal["live", "stopped", "dead"]
Want = Callable[[Mapping[str, str]], dict[str, str]]
"""What a node's metadata items (or labels) should become, given what they are now."""


@dataclass(frozen=True)
class Node:
    """One instance or TPU VM as listed by the API."""

    name: str
    status: str
    phase: Phase
    created: str
    labels: dict[str, str] = field(default_factory=dict)
    internal_ip: str | None = None
    external_ip: str | None = None
    zone: str | None = None
    """Where an instance is (a group fails over to other zones of its region)."""
    market: str = ""
    """An instance's scheduling: `spot` (spot or preemptible) or `on-demand`; empty for TPUs."""
    metadata: dict[str, str] = field(default_factory=dict)
    """An instance's metadata items, key -> value (empty for TPU VMs)."""
    metadata_fingerprint: str = ""
    label_fingerprint: str = ""
    """What setMetadata / setLabels must quote: the API refuses a stale one (HTTP 412)."""

    def output(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "internal_ip": self.internal_ip,
            "external_ip": self.external_ip,
            "status": self.status,
            "zone": self.zone,
            "market": self.market,
        }


class WorkerGroupError(RuntimeError):
    """A call that did not fully happen; `created` names the nodes that exist because of it."""

    def __init__(self, message: str, created: Sequence[str] = ()) -> None:
        self.created = list(created)
        self.reason = message
        """The message without the list of what was created."""
        if self.created:
            message += (
                f"; created and kept: {', '.join(self.created)} (labelled with the group, "
                "so the next `pulumi up` adopts them and `pulumi destroy` removes them)"
            )
        super().__init__(message)


class NoCapacity(WorkerGroupError):
    """Every zone the group may use refused the rest of the nodes for capacity (or a per-zone
    quota): `created` are the ones some zone took."""


class NodeLister(Protocol):
    """What the sweeper needs from a cloud API. Every call waits for its operations."""

    def list_nodes(self, labels: dict[str, str]) -> list[Node]:
        """Nodes carrying all of these labels, oldest first."""
        ...

    def delete(self, names: Sequence[str]) -> None: ...


class NodeApi(NodeLister, Protocol):
    """What a worker group needs from a cloud API, besides listing and deleting."""

    def create(self, names: Sequence[str], body: dict[str, Any]) -> None:
        """Create nodes with these names from one body; raise WorkerGroupError if some fail."""
        ...

    def stop(self, names: Sequence[str]) -> None: ...

    def start(self, names: Sequence[str]) -> None: ...

    def set_metadata(self, nodes: Sequence[Node], want: Want) -> None:
        """Give every node the metadata `want` makes of its own, in place (a running node's
        watcher acts on it); nodes already there are left alone."""
        ...

    def set_labels(self, nodes: Sequence[Node], want: Want) -> None:
        """The same for the nodes' labels."""
        ...
