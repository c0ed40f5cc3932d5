"""The ClusterSweeper provider: `pulumi destroy` leaves no node of the stack's cluster, tracked
or not, and no other stack's.

Pulumi's destroy deletes what its state records. Two kinds of node are not in it: workers Ray's
autoscaler launched from the head (no `ray-gcp-group` label), and nodes a WorkerGroup create
left when it raised (Pulumi records nothing for a failed create). Both carry
`ray-cluster-name=<cluster>`, as does every node `up` makes.

The program creates the sweeper first and makes the head and every worker group depend on it,
so destroy deletes it last. Its `delete` lists every instance of the region (and TPU node, when
the cluster has TPU types) labelled with the cluster, whatever its `ray-node-type`, deletes them
all at once with the usual retries and operation waits, and lists again: a node that is still
there is named in the error. `update` only records the inputs: no API call.

One stack owns one cluster. Everything a stack creates carries its identity (`ray-gcp-stack`,
the sweeper's `stack`), and the sweep deletes only nodes carrying it. The sweeper's `create`,
which runs before any other resource of the stack is made (they all depend on it), is the
claim: it lists the cluster's nodes where the sweep would look, and refuses, in one line naming
both stacks, when any carries another stack's identity (or none: a stack deployed before nodes
carried it). A refused create leaves nothing in the state, so that stack's destroy sweeps
nothing. A sweeper recorded before the label existed (no `stack` in its state) was made by
such a stack: updated, it also sweeps its cluster's nodes that carry no identity (the
autoscaler's, launched before the upgrade); never updated, it sweeps as it always did. A
stack that adopted a `ray up` cluster (`adopted`) sweeps them too: its head goes on running
`ray up`'s autoscaler, whose new workers carry no stack's label.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi.dynamic import CreateResult, DiffResult, UpdateResult

from infra.workers.apis import ApiProvider, Deadlines, Kind, keyed_diff, node_api, queued_slices
from infra.workers.nodes import Node, NodeLister, WorkerGroupError
from infra.workers.parallel import run_all, short_error
from infra.workers.retry import RetryPolicy
from model.labels import CLUSTER_NAME, STACK

# Which cluster is swept: a change replaces the sweeper, and deleting the old one (at the end of
# that `up`) sweeps what is left of the old cluster, whose head and groups are replaced too.
SWEEPER_IDENTITY_KEYS = ("project", "zone", "cluster_name")
# How it talks to the cloud: updated in place, never a reason to sweep.
SWEEPER_IN_PLACE_KEYS = ("has_tpu", "credentials", "api_endpoint", "stack", "adopted")
# Set when the sweeper was recorded before stacks labelled their nodes (see the docstring).
SWEEPS_UNLABELLED = "sweeps_unlabelled"

_WHAT = {"compute": "instance", "tpu": "TPU node"}


class ClusterClaimError(RuntimeError):
    """The cluster name is another stack's in this project: the stack creates nothing."""


class ClusterSweepError(RuntimeError):
    """Nodes of the cluster that the sweep could not delete; `remaining` names them."""

    def __init__(self, message: str, remaining: list[str]) -> None:
        self.remaining = list(remaining)
        super().__init__(message)


def sweeper_id(props: Mapping[str, Any]) -> str:
    return (
        f"projects/{props['project']}/zones/{props['zone']}/clusterSweepers/{props['cluster_name']}"
    )


def _inputs(props: Mapping[str, Any], sweeps_unlabelled: bool = False) -> dict[str, Any]:
    inputs = {key: props.get(key) for key in (*SWEEPER_IDENTITY_KEYS, *SWEEPER_IN_PLACE_KEYS)}
    return {**inputs, SWEEPS_UNLABELLED: sweeps_unlabelled}


def owned_by(props: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a node of the cluster is this sweeper's stack's to delete."""
    stack = props.get("stack")
    if stack is None:  # recorded before the label existed, never updated since
        return True
    if STACK not in labels:
        # An adopted cluster's head runs `ray up`'s autoscaler until Ray restarts on it: the
        # workers it launches carry no stack's label (the claim refused any other stack's).
        return bool(props.get(SWEEPS_UNLABELLED) or props.get("adopted"))
    return labels[STACK] == stack


def _claim_message(props: Mapping[str, Any], others: list[tuple[str, Node]]) -> str:
    """One line: whose the cluster is, which nodes say so, this stack, and the way out."""
    owners = sorted({node.labels.get(STACK, "") for _, node in others})
    named = ", ".join(
        f"stack {owner}" if owner else "a stack deployed before nodes carried ray-gcp-stack"
        for owner in owners
    )
    shown = ", ".join(f"{node.name} ({what})" for what, node in others[:3])
    more = f" and {len(others) - 3} more" if len(others) > 3 else ""
    return (
        f"Ray cluster {props['cluster_name']!r} in project {props['project']} "
        f"({props['zone']}'s region) belongs to {named} (its nodes: {shown}{more}), not to "
        f"this stack {props.get('stack')}: set another cluster_name in the cluster YAML, or "
        "destroy the other stack first; nothing was created"
    )


class ClusterSweeperProvider(ApiProvider):
    """Holds no state or secrets (it is pickled into the stack): credentials come per call.

    `passes` bounds how often the sweep lists and deletes before it checks what is left; a
    second pass catches nodes whose delete failed for good the first time or that appeared
    meanwhile (an insert still running when the head went away).
    """

    def __init__(
        self,
        retry: RetryPolicy | None = None,
        deadlines: Deadlines | None = None,
        passes: int = 2,
    ) -> None:
        super().__init__(retry, deadlines)
        self.passes = passes

    # ------------------------------------------------------------------ CRUD

    def create(self, props: dict[str, Any]) -> CreateResult:
        """The claim (see the module docstring): raises ClusterClaimError when another stack's
        nodes hold the cluster name, so the stack creates nothing."""
        adopted = set(props.get("adopted") or ())
        others = [
            (what, node) for what, node in self._cluster_nodes(props)
            if node.labels.get(STACK) != props.get("stack")
            # A node `ray up` made that this stack adopts carries no stack's label yet.
            and not (node.name in adopted and STACK not in node.labels)
        ]
        if others:
            raise ClusterClaimError(_claim_message(props, others))
        return CreateResult(sweeper_id(props), _inputs(props))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return keyed_diff(olds, news, SWEEPER_IDENTITY_KEYS, SWEEPER_IN_PLACE_KEYS)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        recorded_before_labels = olds.get("stack") is None
        return UpdateResult(
            _inputs(news, recorded_before_labels or bool(olds.get(SWEEPS_UNLABELLED)))
        )

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        self.sweep(props)

    def _cluster_nodes(self, props: Mapping[str, Any]) -> list[tuple[str, Node]]:
        """Every node labelled with the cluster where the sweep looks, with what it is."""
        labels = {CLUSTER_NAME: str(props["cluster_name"])}
        listers: list[tuple[str, NodeLister]] = [
            (_WHAT["compute"], node_api("compute", props, self.retry, self.deadlines))
        ]
        if props.get("has_tpu"):
            listers += [
                ("TPU queued request", queued_slices(props, self.retry, self.deadlines)),
                (_WHAT["tpu"], node_api("tpu", props, self.retry, self.deadlines)),
            ]
        return [(what, node) for what, api in listers for node in api.list_nodes(labels)]

    # ------------------------------------------------------------------ the sweep

    def sweep(self, props: Mapping[str, Any]) -> list[str]:
        """Delete every node labelled with the cluster and owned by the stack (`owned_by`);
        the names of those that were deleted.

        Instances and TPU nodes are swept at the same time. Raises ClusterSweepError, naming
        each node still there (or the kind that could not be listed), if any is left.
        """
        kinds: list[Kind] = ["compute", "tpu"] if props.get("has_tpu") else ["compute"]
        labels = {CLUSTER_NAME: str(props["cluster_name"])}
        results, failures = run_all(kinds, lambda kind: self._sweep_api(kind, props, labels))
        deleted: list[str] = []
        remaining: list[str] = []
        problems: list[str] = []
        for kind in kinds:
            if kind in failures:
                problems.append(f"{_WHAT[kind]}s: {short_error(failures[kind])}")
                continue
            gone, left, errors = results[kind]
            deleted += gone
            remaining += left
            if left:
                problems += errors
        if remaining or failures:
            parts = [f"still there: {', '.join(remaining)}"] if remaining else []
            raise ClusterSweepError(
                f"could not delete every node of Ray cluster {props['cluster_name']!r} in "
                f"{props['zone']} (and its region's other zones) of project {props['project']}; "
                + "; ".join(parts + problems)
                + ". What is left keeps running (and billing): delete it by hand or run "
                "`pulumi destroy` again.",
                remaining,
            )
        return deleted

    def _sweep_api(
        self, kind: Kind, props: Mapping[str, Any], labels: dict[str, str]
    ) -> tuple[list[str], list[str], list[str]]:
        """(deleted, still there with what each is, delete errors) for one API. TPU queued
        requests go before TPU nodes: deleting one (with force) deletes its node, and a
        request left behind would make its node again once GCP has the capacity."""
        swept = []
        if kind == "tpu":
            queued = queued_slices(props, self.retry, self.deadlines)
            swept.append((self._sweep_kind(queued, labels, props), "TPU queued request"))
        nodes = node_api(kind, props, self.retry, self.deadlines)
        swept.append((self._sweep_kind(nodes, labels, props), _WHAT[kind]))
        return (
            [name for (gone, _, _), _ in swept for name in gone],
            [f"{name} ({what})" for (_, left, _), what in swept for name in left],
            [error for (_, _, errors), _ in swept for error in errors],
        )

    def _sweep_kind(
        self, api: NodeLister, labels: dict[str, str], props: Mapping[str, Any]
    ) -> tuple[list[str], list[str], list[str]]:
        """(deleted, still there, delete errors) for one API, the stack's own nodes only."""

        def owned() -> list[str]:
            return [node.name for node in api.list_nodes(labels) if owned_by(props, node.labels)]

        attempted: list[str] = []
        errors: list[str] = []
        for _ in range(self.passes):
            names = owned()
            if not names:
                return attempted, [], errors
            attempted += [name for name in names if name not in attempted]
            try:
                api.delete(names)
            except WorkerGroupError as exc:
                errors.append(str(exc))
        left = owned()
        return [name for name in attempted if name not in left], left, errors

