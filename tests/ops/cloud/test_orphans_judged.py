"""Which of a cluster's cloud resources are orphans, judged against an exported state
(ops/cloud/orphans.py `StateKnows`, `judge`): the state's own names and its worker groups'
nodes are known, the autoscaler's workers are the head's while the state has the head, a
killed run's pending creates are adopted by `up`, the rest is an orphan with the command that
deletes it."""

from __future__ import annotations

from ops.cloud.orphans import CloudResource, StateKnows, judge

STACK = "c"
HEAD = CloudResource("instance", "ray-c-head", "z", "compute", "projects/p/zones/z/instances/"
                     "ray-c-head", {"ray-cluster-name": "c", "ray-node-type": "head"})


def node(name: str, kind: str = "unmanaged", group: str | None = None,
         node_type: str = "small") -> CloudResource:
    labels = {"ray-cluster-name": "c", "ray-node-type": kind, "ray-user-node-type": node_type,
              **({"ray-gcp-group": group} if group else {})}
    return CloudResource("instance", name, "z", "compute", f"projects/p/zones/z/instances/{name}",
                         labels)


def state(*resources: dict, pending: tuple[dict, ...] = ()) -> dict:
    return {"resources": list(resources),
            "pending_operations": [{"type": "creating", "resource": r} for r in pending]}


HEAD_STATE = {"urn": "u1", "type": "gcp:compute/instance:Instance",
              "id": "projects/p/zones/z/instances/ray-c-head", "outputs": {"name": "ray-c-head"}}
GROUP_STATE = {"urn": "u2", "type": "pulumi-python:dynamic/ray-gcp:WorkerGroup",
               "id": "projects/p/zones/z/workerGroups/g1",
               "outputs": {"group_id": "g1", "instance_names": ["w1"], "node_type": "small"}}


def names(orphans: list) -> list[str]:
    return [orphan.resource.name for orphan in orphans]


def test_what_the_state_knows_is_no_orphan_and_the_rest_is_with_its_delete_command() -> None:
    found = [HEAD, node("w1", group="g1"), node("w2", group="g1"), node("by-hand")]
    orphans = judge(STACK, found, StateKnows.of(state(HEAD_STATE, GROUP_STATE)))
    assert names(orphans) == ["by-hand"]  # w2 carries the group's label: its read takes it
    assert orphans[0].line() == (
        "orphan: instance by-hand in z: no state of the stack knows it (a run killed before "
        "its create was recorded, a lost state, or made by hand); `invoke orphans -s c "
        "--delete` deletes it (it asks first)")


def test_the_autoscalers_workers_are_the_heads_unless_the_state_has_no_head() -> None:
    launched = node("auto1", kind="worker")
    assert judge(STACK, [HEAD, launched], StateKnows.of(state(HEAD_STATE))) == []
    orphans = judge(STACK, [launched], StateKnows.of(state()))
    assert names(orphans) == ["auto1"] and "the state has no head" in orphans[0].why


def test_a_killed_runs_pending_creates_are_adopted_by_up() -> None:
    pending_group = {"urn": "u3", "type": "pulumi-python:dynamic/ray-gcp:WorkerGroup",
                     "inputs": {"node_type": "small", "body": "<encrypted>"}}
    pending_head = {"urn": "u1", "type": "gcp:compute/instance:Instance",
                    "inputs": {"name": "ray-c-head"}}
    orphans = judge(STACK, [HEAD, node("w9", group="g7")],
                    StateKnows.of(state(pending=(pending_group, pending_head))))
    assert names(orphans) == ["ray-c-head", "w9"]
    assert all(o.command == "`invoke up -s c` adopts it" for o in orphans)


def test_a_worker_group_adopted_but_not_read_back_takes_its_types_nodes() -> None:
    adopted = {"urn": "u2", "type": "pulumi-python:dynamic/ray-gcp:WorkerGroup",
               "id": "projects/p/zones/z/workerGroups/gX",
               "outputs": {"node_type": "small", "body": "<encrypted>"}}
    found = [HEAD, node("w1", group="g1"), node("other", group="g2", node_type="big")]
    assert names(judge(STACK, found, StateKnows.of(state(HEAD_STATE, adopted)))) == ["other"]
