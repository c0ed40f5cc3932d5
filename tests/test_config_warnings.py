"""Keys Ray drops from a cluster YAML are dropped here too, each with a one-line warning that
`pulumi up` and `invoke plan` show."""

from __future__ import annotations

import json
import logging

import pytest

from ops.review.plan_engine import run_program
from tests.program_runs import stack_yaml


def test_dropped_keys_are_warned_about_by_the_program(caplog: pytest.LogCaptureFixture):
    raw = stack_yaml("head-only")
    raw.update(head_node={}, worker_nodes=None, min_workers=0)
    raw["provider"]["disable_node_updaters"] = True
    with caplog.at_level(logging.WARNING):
        run_program({"ray-gcp:clusterConfig": json.dumps(raw)}, stack="warned")
    warned = {record.getMessage().split(":")[0] for record in caplog.records
              if record.levelno == logging.WARNING}
    assert {"head_node", "worker_nodes", "min_workers",
            "provider.disable_node_updaters"} <= warned
