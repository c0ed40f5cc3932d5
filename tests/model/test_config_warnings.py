"""Keys Ray drops from a cluster YAML are dropped here too, each with a one-line warning that
`pulumi up` and `invoke plan` show."""

from __future__ import annotations

import json

import pytest

from ops.review.plan_engine import run_program
from tests.support.program_runs import stack_yaml


def test_dropped_keys_are_warned_about_by_the_program(capsys: pytest.CaptureFixture[str]):
    raw = stack_yaml("head-only")
    raw.update(head_node={}, worker_nodes=None, min_workers=0)
    raw["provider"]["disable_node_updaters"] = True
    run = run_program({"ray-gcp:clusterConfig": json.dumps(raw)}, stack="warned")
    warned = [message.split(":")[0] for message in run.warnings]
    assert {"head_node", "worker_nodes", "min_workers",
            "provider.disable_node_updaters"} <= set(warned)
    assert len(warned) == len(set(warned))  # each once
    assert capsys.readouterr().err == ""  # the plan shows them: nothing else prints them
