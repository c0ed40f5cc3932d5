"""What `pulumi preview` is told: a count change updates, a body change replaces."""

from __future__ import annotations

from infra.workers import WorkerGroupProvider
from infra.workers.naming import group_id
from infra.workers.nodes import Node
from infra.workers.plan import plan_scale
from tests.fake_compute.helpers import compute_body, group_props


def test_count_change_is_an_in_place_update():
    diff = WorkerGroupProvider().diff("id", group_props(None, 3), group_props(None, 5))

    assert diff.changes is True
    assert diff.replaces == []


def test_body_change_replaces_the_group_new_workers_first():
    olds = group_props(None, 3)
    news = group_props(None, 3, body=compute_body(launch_config="changed"))

    diff = WorkerGroupProvider().diff("id", olds, news)

    assert diff.replaces == ["body"]
    assert diff.delete_before_replace is False


def test_unchanged_inputs_are_no_change():
    diff = WorkerGroupProvider().diff("id", group_props(None, 3), group_props(None, 3))

    assert diff.changes is False


def test_a_new_body_is_a_new_group_so_old_and_new_workers_are_told_apart():
    assert group_id(group_props(None, 3)) == group_id(group_props(None, 7))
    assert group_id(group_props(None, 3)) != group_id(
        group_props(None, 3, body=compute_body(launch_config="changed")))


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
