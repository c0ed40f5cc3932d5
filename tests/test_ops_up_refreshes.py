"""`invoke up` refreshes before it updates, so preempted or deleted workers come back in one
command: the refresh lowers a group's count in the state and the up makes the nodes again."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

from ops.lifecycle import pulumi_cli


class RecordingStack:
    """The Automation API stack calls `invoke up` makes, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, operation: str) -> Any:  # refresh, preview, destroy
        return lambda **kwargs: self.calls.append((operation, kwargs))

    def export_stack(self) -> SimpleNamespace:
        return SimpleNamespace(deployment={"resources": []})  # no TPU slice to ask about

    def up(self, **kwargs: Any) -> None:
        self.calls.append(("up", kwargs))


def test_up_refreshes_first_so_lost_workers_are_recreated(monkeypatch):
    stack = RecordingStack()
    monkeypatch.setattr(pulumi_cli, "select_stack", lambda name: stack)

    pulumi_cli.run_operation("full", "up", out=io.StringIO())

    assert [operation for operation, _ in stack.calls] == ["refresh", "up"]
    assert all(callable(kwargs["on_event"]) for _, kwargs in stack.calls)
