"""A single-VM Ray (the head's type is the only node type) plans like any other cluster."""

from __future__ import annotations

from tests.support.program_runs import run_stack


def test_head_only_cluster_plans_a_head_and_no_worker_group():
    run = run_stack("head-only")
    (head,) = run.of_type("gcp:compute/instance:Instance")
    assert run.of_type("pulumi-python:dynamic/ray-gcp:WorkerGroup") == []
    assert run.outputs["node_names"] == {"ray_head_default": [head.inputs["name"]]}
    assert [n["kind"] for n in run.outputs["nodes"]] == ["head"]
