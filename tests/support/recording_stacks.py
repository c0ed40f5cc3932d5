"""Stand-ins for the Automation API stack `invoke up` drives (ops.lifecycle), recording
the calls it makes in order."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


class RecordingStack:
    """The Automation API stack calls `invoke up` makes, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, operation: str) -> Any:  # refresh, preview, destroy
        return lambda **kwargs: self.calls.append((operation, kwargs))

    def export_stack(self) -> SimpleNamespace:
        return SimpleNamespace(deployment={"resources": []})  # no TPU slice to ask about

    def up(self, **kwargs: Any) -> SimpleNamespace:
        self.calls.append(("up", kwargs))
        return SimpleNamespace(outputs={})  # an UpResult with no outputs


class ExportedStateStack:
    """The Automation API calls `invoke up` makes, on a state exported from the program."""

    def __init__(self, deployment: dict[str, Any]) -> None:
        self.deployment = deployment
        self.calls: list[str] = []
        self.replaced: list[str] | None = None

    def export_stack(self) -> SimpleNamespace:
        self.calls.append("export")
        return SimpleNamespace(deployment=self.deployment)

    def get_all_config(self) -> dict[str, SimpleNamespace]:
        return {"ray-gcp:cluster": SimpleNamespace(value="stacks/clusters/tpu.yaml")}

    def up(self, *, on_event: Any, replace: list[str] | None, refresh: bool | None = None,
           run_program: bool | None = None) -> SimpleNamespace:
        """An up that refreshes each resource as the program registers it is `up --refresh`."""
        self.calls.append("up --refresh" if refresh and run_program else "up")
        self.replaced = replace
        return SimpleNamespace(outputs={})  # an UpResult with no outputs
