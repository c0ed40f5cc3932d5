"""`invoke up` refreshes before it updates, so preempted or deleted workers come back in one
command: the refresh lowers a group's count in the state and the up makes the nodes again."""

from __future__ import annotations

import io

from ops.lifecycle import pulumi_cli
from tests.support.recording_stacks import RecordingStack


def test_up_refreshes_first_so_lost_workers_are_recreated(monkeypatch):
    stack = RecordingStack()
    monkeypatch.setattr(pulumi_cli, "select_stack", lambda name: stack)

    pulumi_cli.run_operation("full", "up", out=io.StringIO())

    assert [operation for operation, _ in stack.calls] == ["refresh", "up"]
    assert all(callable(kwargs["on_event"]) for _, kwargs in stack.calls)
