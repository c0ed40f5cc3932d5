"""One engine operation on one stack, in its own interpreter: the program runs inline through
the Automation API (the pulumi language host for Python is not built here), so each run gets
a fresh pulumi runtime, as `pulumi up` would give it.

    python -m tests.support.engine_driver WORKSPACE STACK OPERATION [PROGRAM]

PROGRAM (default infra/__main__.py) is the program file to run. WORKSPACE is an
EngineWorkspace folder (tests/support/engine_stack.py): its project folder, and an `env.json` the
caller wrote (and for `import`, the deployment in `import.json`). Prints one JSON object:
the steps the engine reported (URN, op, changed and replaced keys, the provider's detailed diff
and the progress line `invoke up/preview` prints for the step) and the summary.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from typing import Any

from pulumi import automation as auto
from pulumi.automation.events import EngineEvent

from ops.engine import pinned_command, pinned_version
from ops.lifecycle.events import EventPrinter

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PROGRAM = PROJECT_ROOT / "infra" / "__main__.py"
PROJECT_NAME = "ray-gcp"


def open_stack(workspace: Path, stack: str, program_file: Path = PROGRAM) -> auto.Stack:
    settings = json.loads((workspace / "env.json").read_text())
    options = auto.LocalWorkspaceOptions(
        work_dir=str(workspace / "project"),
        pulumi_home=settings["PULUMI_HOME"],
        env_vars=settings,
        pulumi_command=pinned_command(Path(settings["ENGINE_ROOT"]), pinned_version()),
        secrets_provider=settings.get("RAY_GCP_SECRETS_PROVIDER"),
    )
    def program() -> None:
        """The program's own entry point, as the engine would run `main: infra/`."""
        runpy.run_path(str(program_file), run_name="__main__")

    return auto.create_or_select_stack(stack_name=stack, project_name=PROJECT_NAME,
                                       program=program, opts=options)


def main(argv: list[str]) -> int:
    workspace, stack_name, operation = Path(argv[0]), argv[1], argv[2]
    stack = open_stack(workspace, stack_name, Path(argv[3]) if len(argv) > 3 else PROGRAM)
    steps: list[dict[str, Any]] = []
    printer = EventPrinter()

    def on_event(event: EngineEvent) -> None:
        pre = event.resource_pre_event
        if pre is not None:
            meta = pre.metadata
            steps.append({"urn": meta.urn, "op": str(meta.op.value), "type": meta.type,
                          "diffs": list(meta.diffs or []),
                          "keys": list(meta.keys or []),
                          "detailed_diff": {path: diff.diff_kind.value for path, diff
                                            in (meta.detailed_diff or {}).items()},
                          "line": printer.render(event)})

    answer: dict[str, Any] = {"steps": steps}
    if operation == "preview":
        result = stack.preview(on_event=on_event, diff=True)
        answer["summary"] = {getattr(k, "value", k): v for k, v in result.change_summary.items()}
    elif operation == "up":
        result = stack.up(on_event=on_event)
        answer["summary"] = result.summary.resource_changes
        answer["outputs"] = {k: (None if v.secret else v.value) for k, v in result.outputs.items()}
    elif operation == "refresh":
        result = stack.refresh(on_event=on_event)
        answer["summary"] = result.summary.resource_changes
    elif operation == "destroy":
        result = stack.destroy(on_event=on_event)
        answer["summary"] = result.summary.resource_changes
    elif operation == "import":
        deployment = json.loads((workspace / "import.json").read_text())
        stack.import_stack(auto.Deployment(version=3, deployment=deployment))
    else:
        raise SystemExit(f"unknown operation {operation!r}")
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
