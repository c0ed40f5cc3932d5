"""`invoke up --restart-only/--no-restart` reach every node watcher through the program: the
request rides on the head's `ray-bootstrap-version` and on each worker group's (updated in
place), never on the autoscaler's copy of a worker node_config (in the head's bootstrap config:
a new launch hash would make Ray replace the autoscaler's own workers)."""

from __future__ import annotations

import pytest

from bootstrap.node_metadata import BOOTSTRAP_CONFIG_KEY, VERSION_KEY
from bootstrap.startup_script import script_version
from infra.metadata import REAPPLY_ENV
from tests.support.program_runs import run_inline, stack_yaml


def _worker_items(run) -> dict[str, str]:
    body = run.named("minimal-ray_worker_small").inputs["body"]
    return {item["key"]: item["value"] for item in body["metadata"]["items"]}


def test_version_key_names_the_script_version_on_every_node(monkeypatch):
    monkeypatch.delenv(REAPPLY_ENV, raising=False)
    run = run_inline(stack_yaml("minimal"))
    (head,) = run.of_type("gcp:compute/instance:Instance")
    metadata = head.inputs["metadata"]
    assert metadata[VERSION_KEY] == script_version(metadata["startup-script"])
    worker = _worker_items(run)
    assert worker[VERSION_KEY] == script_version(worker["startup-script"])


@pytest.mark.parametrize("request_", ["restart-only 2026-12-03T10:00:00Z",
                                      "no-restart 2026-12-03T10:00:00Z"])
def test_a_request_reaches_the_head_and_worker_groups_but_not_the_autoscaler_config(
    monkeypatch, request_: str
):
    monkeypatch.delenv(REAPPLY_ENV, raising=False)
    before = run_inline(stack_yaml("minimal"))
    monkeypatch.setenv(REAPPLY_ENV, request_)
    after = run_inline(stack_yaml("minimal"))
    (head,) = after.of_type("gcp:compute/instance:Instance")
    (old_head,) = before.of_type("gcp:compute/instance:Instance")
    version = script_version(head.inputs["metadata"]["startup-script"])
    assert head.inputs["metadata"][VERSION_KEY] == f"{version} {request_}"
    worker = _worker_items(after)
    assert worker[VERSION_KEY] == f"{script_version(worker['startup-script'])} {request_}"
    assert {**worker, VERSION_KEY: ""} == {**_worker_items(before), VERSION_KEY: ""}
    assert head.inputs["metadata"][BOOTSTRAP_CONFIG_KEY] == \
        old_head.inputs["metadata"][BOOTSTRAP_CONFIG_KEY]
    labels = [run.named("minimal-ray_worker_small").inputs["body"]["labels"]
              for run in (before, after)]
    assert labels[0] == labels[1]  # the launch hash Ray's autoscaler computes: unchanged
