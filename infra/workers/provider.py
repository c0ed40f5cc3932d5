"""The WorkerGroup dynamic provider: "N workers of node type T" reconciled against the cloud.

create and update are the same reconcile: list the group's nodes by label, bring their
metadata and labels up to date in place, plan, act, list again. Because our nodes carry the
group label, a half-failed call leaves nothing Pulumi cannot find again. The provider object
holds no state or secrets (it is pickled into the stack); credentials come with each call's
properties.

A new startup script (setup or start commands, docker settings, small file mounts) is a
metadata change: every node of the group, running or stopped and in whichever zone, gets it
through setMetadata and its node watcher re-applies it (bootstrap/node_reapply.sh). Only a
change to what the nodes are made of (machine type, disks, accelerators, scheduling, network,
service account) or to the head they join replaces the group with new nodes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pulumi.dynamic import (
    CreateResult,
    DiffResult,
    ReadResult,
    UpdateResult,
)

from bootstrap.head_provider.ladder import rank

# Deadlines stays importable from here: providers pickled into existing stacks name it
# `infra.workers.provider.Deadlines`.
from infra.workers.apis import (
    ApiProvider,
    Deadlines,  # noqa: F401 - see above
    compute_nodes,
    replacing_diff,
)
from infra.workers.capacity import ON_DEMAND, SPOT, returns_to_spot, with_market
from infra.workers.ladder import LadderWalk
from infra.workers.naming import (
    GROUP_LABEL,
    IDENTITY_KEYS,
    group_id,
    is_autoscaler_worker,
    metadata_items,
    new_node_name,
    node_type_labels,
    owned_worker_labels,
    replaced_keys,
    resource_id,
)
from infra.workers.nodes import NoCapacity, Node, NodeApi, Want
from infra.workers.plan import plan_scale
from model.labels import STACK

# Inputs that change in place; the IDENTITY_KEYS replace the group instead (the body only when
# its machine changes: naming.machine_of; its metadata and labels change in place).
IN_PLACE_KEYS = (
    "count", "cache_stopped_nodes", "credentials", "api_endpoint", "fallback_zones", "capacity",
    "adopt",
)


class WorkerGroupProvider(ApiProvider):
    """CRUD of a worker group. Tests construct it with short deadlines and fast retries."""

    # ------------------------------------------------------------------ CRUD

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(resource_id(props), self._reconcile(props))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """A count, metadata or label change updates in place; a change to the machines (or
        where and whose they are, or the head they join) replaces the group, new nodes
        first."""
        return replacing_diff(olds, news, replaced_keys(olds, news), (*IN_PLACE_KEYS, "body"))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """The same nodes, found by the group id they were created with (a group created
        before metadata left the id has an id hashed over its old body), brought up to date."""
        props = {**news, "group_id": olds.get("group_id") or group_id(news)}
        return UpdateResult(self._reconcile(props, _retired(olds.get("body"), news["body"])))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: what is really there; lost nodes lower `count`, so the next up replaces them."""
        return ReadResult(id_, self._outputs(props, *self._observe(self._api(props), props)))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Every node of the group, whatever Pulumi recorded; the autoscaler's stay."""
        api = self._api(props)
        ours, _ = self._observe(api, props)
        api.delete([n.name for n in reversed(ours)])

    # ------------------------------------------------------------------ internals

    def _reconcile(
        self, props: dict[str, Any], retired: tuple[Collection[str], Collection[str]] = ((), ())
    ) -> dict[str, Any]:
        """`retired`: the metadata and label keys the old body had and the new one has not."""
        api = self._api(props)
        self._take_over(api, props)
        ours, _ = self._observe(api, props)
        # Live nodes of the dearer rungs count as the newest: a scale-down removes on-demand
        # first, then flex-start, spot, and reserved nodes last.
        ours = sorted(ours, key=lambda n: rank(n.market) if n.phase == "live" else 0)
        plan = plan_scale(ours, int(props["count"]), bool(props.get("cache_stopped_nodes")))
        # Stopped nodes too: they boot into the current script when started.
        kept = [n for n in ours if n.phase != "dead" and n.name not in plan.delete]
        self._bring_up_to_date(api, props, kept, retired)
        if plan.start:
            api.start(plan.start)
        if plan.create:
            self._create(api, props, plan.create)
        if plan.stop:
            api.stop(plan.stop)
        if plan.delete:
            api.delete(plan.delete)
        if returns_to_spot(props.get("capacity"), props["body"]):
            staying = [n for n in kept if n.phase == "live" and n.name not in plan.stop]
            self._back_to_spot(api, props, staying)
        return self._outputs(props, *self._observe(api, props))

    def _create(self, api: NodeApi, props: Mapping[str, Any], count: int) -> None:
        """`count` new nodes from the body down the type's capacity ladder (ladder.py), each
        labelled with the market it got: one node per slot, on the first rung that takes it."""
        names = [new_node_name(props["name_prefix"]) for _ in range(count)]
        LadderWalk(props, self.retry, self.deadlines, api).create(
            names, self._labelled_body(props))

    def _back_to_spot(self, api: NodeApi, props: Mapping[str, Any], live: list[Node]) -> None:
        """`return_to_spot`: a spot node for each live on-demand one, as many as some zone
        takes; each on-demand node is deleted once its spot replacement exists. Any other
        failure leaves the spot nodes made: the next reconcile has more live nodes than its
        count and removes on-demand ones first."""
        on_demand = [n.name for n in live if n.market == ON_DEMAND]
        if not on_demand:
            return
        names = [new_node_name(props["name_prefix"]) for _ in on_demand]
        try:
            api.create(names, with_market(self._labelled_body(props), SPOT))
            made = len(names)
        except NoCapacity as refused:
            made = len(refused.created)
        if made:
            api.delete(list(reversed(on_demand))[:made])

    def _take_over(self, api: NodeApi, props: Mapping[str, Any]) -> None:
        """The running workers of a cluster `ray up` made (`adopt`, model/adoption.py): the
        `pinned` ones become the group's (its labels: the group's, unmanaged, the stack's),
        so it makes only what they leave missing; the `autoscaler` ones stay the autoscaler's
        and gain only the stack's label (its `down` sweeps them). Their launch hash stays
        Ray's: the adopted head goes on running `ray up`'s autoscaler, which terminates as
        outdated a worker whose hash differs from the one it computes (docs/coming-from-ray-
        up.md). Nodes already taken, gone, or of another type are left alone."""
        adopt = props.get("adopt") or {}
        if not (adopt.get("pinned") or adopt.get("autoscaler")):
            return
        workers = {n.name: n for n in api.list_nodes(
            node_type_labels(props["cluster_name"], props["node_type"])) if n.phase != "dead"}
        labels = self._labelled_body(props)["labels"]
        pinned = [workers[name] for name in adopt.get("pinned") or ()
                  if name in workers and GROUP_LABEL not in workers[name].labels]
        if pinned:
            api.set_labels(pinned, lambda current: {**current, **labels})
        autoscaler = [workers[name] for name in adopt.get("autoscaler") or ()
                      if name in workers and is_autoscaler_worker(workers[name].labels)]
        if autoscaler and STACK in labels:
            api.set_labels(autoscaler, lambda current: {**current, STACK: labels[STACK]})

    def _bring_up_to_date(
        self,
        api: NodeApi,
        props: Mapping[str, Any],
        nodes: list[Node],
        retired: tuple[Collection[str], Collection[str]],
    ) -> None:
        """setMetadata, then setLabels (one operation on an instance at a time), on every node
        not as the body says. Entries others added (an SSH key, autostop's labels) stay;
        those the body dropped go."""
        if not nodes:
            return
        body = props["body"]
        api.set_metadata(nodes, _want(metadata_items(body), retired[0]))
        api.set_labels(nodes, _want(self._labelled_body(props)["labels"], retired[1]))

    def _labelled_body(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """The body with the labels every node of the group carries."""
        body = dict(props["body"])
        body["labels"] = {**(body.get("labels") or {}), **self._labels(props)}
        return body

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


def _retired(
    old_body: Any, new_body: Mapping[str, Any]
) -> tuple[Collection[str], Collection[str]]:
    """The metadata and label keys the old body set and the new one does not."""
    if not isinstance(old_body, Mapping):
        return (), ()
    old_labels, new_labels = old_body.get("labels") or {}, new_body.get("labels") or {}
    return (
        set(metadata_items(old_body)) - set(metadata_items(new_body)),
        set(old_labels) - set(new_labels),
    )


def _want(desired: Mapping[str, str], retired: Collection[str]) -> Want:
    def want(current: Mapping[str, str]) -> dict[str, str]:
        return {**{k: v for k, v in current.items() if k not in retired}, **desired}

    return want
