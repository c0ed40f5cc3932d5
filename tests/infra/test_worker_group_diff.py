"""What `pulumi preview` is told: a count, script or label change updates in place, a change
to the machines replaces."""

from __future__ import annotations

from pulumi.runtime.rpc import UNKNOWN

from bootstrap.node_metadata import HEAD_ADDRESS_KEY as BOOTSTRAP_HEAD_ADDRESS_KEY
from infra.workers import WorkerGroupProvider
from infra.workers.naming import HEAD_ADDRESS_KEY, group_id
from infra.workers.nodes import Node
from infra.workers.plan import plan_scale
from tests.fakes.compute.helpers import compute_body, group_props


def test_count_change_is_an_in_place_update():
    diff = WorkerGroupProvider().diff("id", group_props(None, 3), group_props(None, 5))

    assert diff.changes is True
    assert diff.replaces == []


def test_machine_change_replaces_the_group_new_workers_first():
    olds = group_props(None, 3)
    news = group_props(None, 3, body=compute_body(machine_type="n2-standard-4"))

    diff = WorkerGroupProvider().diff("id", olds, news)

    assert diff.replaces == ["body"]
    assert diff.delete_before_replace is False


def test_script_and_label_changes_update_the_same_workers_in_place():
    olds = group_props(None, 3)
    for body in (compute_body(script="echo v2", version="v2"),
                 compute_body(launch_config="changed")):
        diff = WorkerGroupProvider().diff("id", olds, group_props(None, 3, body=body))

        assert diff.changes is True
        assert diff.replaces == []


def test_a_new_head_to_join_replaces_the_group():
    """The node watcher follows the script's version, not the head address: workers of a new
    head are new workers, booted to join it."""
    olds, news = compute_body(), compute_body()
    olds["metadata"]["items"].append({"key": HEAD_ADDRESS_KEY, "value": "ray-c-head-1-compute"})
    news["metadata"]["items"].append({"key": HEAD_ADDRESS_KEY, "value": "ray-c-head-2-compute"})

    diff = WorkerGroupProvider().diff(
        "id", group_props(None, 3, body=olds), group_props(None, 3, body=news))

    assert diff.replaces == ["body"]
    assert HEAD_ADDRESS_KEY == BOOTSTRAP_HEAD_ADDRESS_KEY


def test_a_body_not_known_at_preview_is_said_to_replace():
    diff = WorkerGroupProvider().diff(
        "id", group_props(None, 3), group_props(None, 3, body=UNKNOWN))

    assert diff.replaces == ["body"]


def test_unchanged_inputs_are_no_change():
    diff = WorkerGroupProvider().diff("id", group_props(None, 3), group_props(None, 3))

    assert diff.changes is False


def test_new_machines_are_a_new_group_a_new_script_is_the_same_group():
    assert group_id(group_props(None, 3)) == group_id(group_props(None, 7))
    assert group_id(group_props(None, 3)) != group_id(
        group_props(None, 3, body=compute_body(machine_type="n2-standard-4")))
    assert group_id(group_props(None, 3)) == group_id(
        group_props(None, 3, body=compute_body(script="echo v2", launch_config="changed")))


def _node(name: str, phase: str = "live") -> Node:
    return Node(name=name, status="X", phase=phase, created=name)  # type: ignore[arg-type]


def test_plan_scales_down_newest_first_and_restarts_stopped_before_creating():
    ours = [_node("a"), _node("b"), _node("c")]
    assert plan_scale(ours, 1, cache_stopped_nodes=False).delete == ["c", "b"]
    assert plan_scale(ours, 1, cache_stopped_nodes=True).stop == ["c", "b"]

    cached = [_node("a"), _node("s1", "stopped"), _node("s2", "stopped")]
    plan = plan_scale(cached, 4, cache_stopped_nodes=True)
    assert sorted(plan.start) == ["s1", "s2"]
    assert plan.create == 1


def test_a_provider_pickled_when_deadlines_lived_in_provider_py_still_loads(monkeypatch):
    """Pulumi keeps each dynamic provider pickled (dill) in the stack; stacks made before
    Deadlines moved to infra/workers/apis.py name it `infra.workers.provider.Deadlines`."""
    import dill

    from infra.workers.apis import Deadlines

    monkeypatch.setattr(Deadlines, "__module__", "infra.workers.provider")
    blob = dill.dumps(WorkerGroupProvider(deadlines=Deadlines(compute_s=5.0)), recurse=True)
    monkeypatch.undo()

    assert b"infra.workers.provider" in blob and b"Deadlines" in blob
    assert dill.loads(blob).deadlines == Deadlines(compute_s=5.0)
