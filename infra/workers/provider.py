"""The WorkerGroup dynamic provider: "N workers of node type T" reconciled against the cloud.

create and update are the same reconcile: list the group's nodes by label, plan, act, list
again. Because our nodes carry the group label, a half-failed call leaves nothing Pulumi cannot
find again. The provider object holds no state or secrets (it is pickled into the stack);
credentials come with each call's properties.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi.dynamic import (
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
    UpdateResult,
)

# Deadlines stays importable from here: providers pickled into existing stacks name it
# `infra.workers.provider.Deadlines`.
from infra.workers.apis import Deadlines, compute_nodes, keyed_diff
from infra.workers.naming import (
    GROUP_LABEL,
    IDENTITY_KEYS,
    group_id,
    is_autoscaler_worker,
    new_node_name,
    node_type_labels,
    owned_worker_labels,
    resource_id,
)
from infra.workers.nodes import Node, NodeApi
from infra.workers.plan import plan_scale
from infra.workers.retry import RetryPolicy

# Inputs that change in place; the IDENTITY_KEYS replace the group instead.
IN_PLACE_KEYS = ("count", "cache_stopped_nodes", "credentials", "api_endpoint")


class WorkerGroupProvider(ResourceProvider):
    """CRUD of a worker group. Tests construct it with short deadlines and fast retries."""

    def __init__(
        self, retry: RetryPolicy | None = None, deadlines: Deadlines | None = None
    ) -> None:
        self.retry = retry or RetryPolicy()
        self.deadlines = deadlines or Deadlines()

    # ------------------------------------------------------------------ CRUD

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(resource_id(props), self._reconcile(props))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """A count change updates in place; an identity change replaces, new nodes first."""
        return keyed_diff(olds, news, IDENTITY_KEYS, IN_PLACE_KEYS)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(self._reconcile(news))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: what is really there; lost nodes lower `count`, so the next up replaces them."""
        return ReadResult(id_, self._outputs(props, *self._observe(self._api(props), props)))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Every node of the group, whatever Pulumi recorded; the autoscaler's stay."""
        api = self._api(props)
        ours, _ = self._observe(api, props)
        api.delete([n.name for n in reversed(ours)])

    # ------------------------------------------------------------------ internals

    def _reconcile(self, props: dict[str, Any]) -> dict[str, Any]:
        api = self._api(props)
        ours, _ = self._observe(api, props)
        plan = plan_scale(ours, int(props["count"]), bool(props.get("cache_stopped_nodes")))
        if plan.start:
            api.start(plan.start)
        if plan.create:
            names = [new_node_name(props["name_prefix"]) for _ in range(plan.create)]
            body = dict(props["body"])
            body["labels"] = {**(body.get("labels") or {}), **self._labels(props)}
            api.create(names, body)
        if plan.stop:
            api.stop(plan.stop)
        if plan.delete:
            api.delete(plan.delete)
        return self._outputs(props, *self._observe(api, props))

    def _observe(self, api: NodeApi, props: Mapping[str, Any]) -> tuple[list[Node], list[Node]]:
        """(our nodes, the autoscaler's nodes) of this type, from one list call, oldest first.

        Nodes with another group's label (the old group during a replacement) are neither.
        """
        gid = self._group(props)
        workers = api.list_nodes(node_type_labels(props["cluster_name"], props["node_type"]))
        ours = [n for n in workers if n.labels.get(GROUP_LABEL) == gid]
        foreign = [n for n in workers if is_autoscaler_worker(n.labels) and n.phase != "dead"]
        return ours, foreign

    def _api(self, props: Mapping[str, Any]) -> NodeApi:
        return compute_nodes(props, self.retry, self.deadlines)

    @staticmethod
    def _group(props: Mapping[str, Any]) -> str:
        return props.get("group_id") or group_id(props)

    def _labels(self, props: Mapping[str, Any]) -> dict[str, str]:
        """Ray's labels of a node Pulumi keeps plus our group label, on every node we create."""
        return owned_worker_labels(props["cluster_name"], props["node_type"], self._group(props))

    def _outputs(
        self, props: Mapping[str, Any], ours: list[Node], foreign: list[Node]
    ) -> dict[str, Any]:
        live = [n for n in ours if n.phase == "live"]
        return {
            **{k: props.get(k) for k in (*IDENTITY_KEYS, *IN_PLACE_KEYS)},
            "count": len(live),
            "group_id": self._group(props),
            "instance_names": [n.name for n in live],
            "stopped_instance_names": [n.name for n in ours if n.phase == "stopped"],
            "instances": [n.output() for n in ours],
            "autoscaler_instance_names": [n.name for n in foreign],
        }
