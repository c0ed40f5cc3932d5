"""`invoke up` refreshes and updates in one engine run, so preempted workers come back."""

from __future__ import annotations

import io
from typing import Any

from ops import pulumi_cli


class RecordingStack:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, operation: str) -> Any:
        return lambda **kwargs: self.calls.append((operation, kwargs))


def test_up_runs_with_refresh_so_lost_workers_are_recreated(monkeypatch):
    stack = RecordingStack()
    monkeypatch.setattr(pulumi_cli, "select_stack", lambda name: stack)

    pulumi_cli.run_operation("full", "up", out=io.StringIO())

    ((operation, kwargs),) = stack.calls
    assert operation == "up" and kwargs["refresh"] is True
    assert callable(kwargs["on_event"])
