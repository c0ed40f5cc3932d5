"""The node APIs, built per call from a resource's properties.

Shared by the WorkerGroup and ClusterSweeper providers: credentials and endpoint come from the
call's (secret) inputs, the retry policy and deadlines from the provider.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pulumi.dynamic import DiffResult, ResourceProvider

from infra.workers.clients import ApiClients, build_credentials
from infra.workers.compute_api import ComputeNodes
from infra.workers.nodes import NodeLister
from infra.workers.queued_api import QueuedSlices
from infra.workers.retry import RetryPolicy
from infra.workers.tpu_api import TpuNodes, TpuZone

Kind = Literal["compute", "tpu"]
TpuZoneT = TypeVar("TpuZoneT", bound=TpuZone)


def keyed_diff(
    olds: Mapping[str, Any],
    news: Mapping[str, Any],
    replace_keys: Sequence[str],
    in_place_keys: Sequence[str],
) -> DiffResult:
    """A dynamic provider's diff by key: identity keys replace (new first), others update."""
    replaces = [k for k in replace_keys if olds.get(k) != news.get(k)]
    return replacing_diff(olds, news, replaces, in_place_keys)


def replacing_diff(
    olds: Mapping[str, Any],
    news: Mapping[str, Any],
    replaces: Sequence[str],
    in_place_keys: Sequence[str],
) -> DiffResult:
    """Replace (new first) for the changed keys `replaces`; else an in-place update when any
    of `in_place_keys` changed."""
    updates = any(olds.get(k) != news.get(k) for k in in_place_keys)
    return DiffResult(
        changes=bool(replaces or updates),
        replaces=list(replaces),
        stables=[],
        delete_before_replace=False,
    )


@dataclass(frozen=True)
class Deadlines:
    """How long one long-running operation may take (Ray: 60 s compute, 480 s TPU)."""

    compute_s: float = 600.0
    tpu_s: float = 1800.0
    tpu_poll_s: float = 5.0


class ApiProvider(ResourceProvider):
    """A dynamic provider over the node APIs. It holds only its retry policy and deadlines
    (it is pickled into the stack); credentials come with each call's properties. Tests
    construct it with short deadlines and fast retries."""

    def __init__(
        self, retry: RetryPolicy | None = None, deadlines: Deadlines | None = None
    ) -> None:
        self.retry = retry or RetryPolicy()
        self.deadlines = deadlines or Deadlines()


def node_api(
    kind: Kind, props: Mapping[str, Any], retry: RetryPolicy, deadlines: Deadlines
) -> NodeLister:
    """Instances (`compute`) or TPU VMs (`tpu`) of `props`' project and zone."""
    if kind == "tpu":
        return _tpu_zone(TpuNodes, props, retry, deadlines)
    return compute_nodes(props, retry, deadlines)


def queued_slices(
    props: Mapping[str, Any], retry: RetryPolicy, deadlines: Deadlines
) -> QueuedSlices:
    """The TPU queued requests of `props`' project and zone."""
    return _tpu_zone(QueuedSlices, props, retry, deadlines)


def _tpu_zone(
    api: type[TpuZoneT], props: Mapping[str, Any], retry: RetryPolicy, deadlines: Deadlines
) -> TpuZoneT:
    return api(
        props["project"], props["zone"], clients_for(props), retry,
        deadlines.tpu_s, deadlines.tpu_poll_s,
    )


def compute_nodes(
    props: Mapping[str, Any], retry: RetryPolicy, deadlines: Deadlines
) -> ComputeNodes:
    """The instances of `props`' project and zone: all a WorkerGroup keeps."""
    clients = clients_for(props)
    return ComputeNodes(
        props["project"],
        props["zone"],
        clients,
        retry,
        deadlines.compute_s,
        fallback_zones=props.get("fallback_zones"),
    )


def clients_for(props: Mapping[str, Any]) -> ApiClients:
    """The API clients for a resource's credentials and endpoint."""
    endpoint = props.get("api_endpoint") or None
    return ApiClients(build_credentials(props.get("credentials"), endpoint), endpoint)
