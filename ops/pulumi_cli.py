"""The Pulumi Automation API behind `invoke up/preview/down/refresh`, and its missing-CLI message.

The Automation API drives the pulumi CLI as a subprocess: the engine `invoke engine` installed
for the pinned version, else `pulumi` on PATH (ops/engine.py). The program runs inline, in this
process (the SDK hosts the language runtime and hands the CLI its address), so no Python
language host is needed; Pulumi.yaml still gives the project, its stack config folder and the
virtualenv the engine runs dynamic providers in.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, TextIO

from ops.engine import has_cli, missing_cli, pulumi_command, runtime_env
from ops.errors import OpsError
from ops.paths import PROJECT_ROOT

if TYPE_CHECKING:
    from pulumi.automation import LocalWorkspaceOptions, Stack
    from pulumi.automation.events import EngineEvent

Operation = Literal["up", "preview", "destroy", "refresh"]

PROJECT_NAME = "ray-gcp"  # Pulumi.yaml's `name`


def require_cli() -> None:
    if not has_cli():
        raise missing_cli()


def selected_stack_name() -> str:
    """What `pulumi stack --show-name` says: the stack selected for this project."""
    if not has_cli():
        from infra.stack_config import stack_names

        raise OpsError("no stack given: pass --stack/-s NAME or set PULUMI_STACK (stacks here: "
                       f"{', '.join(stack_names()) or 'none'})")
    from pulumi import automation as auto

    try:
        summary = auto.LocalWorkspace(work_dir=str(PROJECT_ROOT),
                                      pulumi_command=pulumi_command()).stack()
    except auto.CommandError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if "error:" in line]
        reason = lines[-1].split("error:", 1)[1].strip() if lines else "it failed"
        raise OpsError(f"no stack given, and pulumi cannot say which is selected ({reason}): "
                       "pass --stack/-s NAME or set PULUMI_STACK") from None
    if summary is None:
        raise OpsError(
            "no stack given and none selected: pass --stack/-s NAME, set PULUMI_STACK or run "
            "`pulumi stack select`"
        )
    return summary.name


def _workspace_options() -> LocalWorkspaceOptions:
    """The project folder (its Pulumi.yaml), the CLI to drive, and Pulumi.yaml's runtime
    options for the dynamic-provider plugin (ops.engine.runtime_env)."""
    from pulumi import automation as auto

    return auto.LocalWorkspaceOptions(work_dir=str(PROJECT_ROOT), pulumi_command=pulumi_command(),
                                      env_vars=runtime_env())


def _program() -> None:
    from infra.program import run_program

    run_program()


def select_stack(name: str) -> Stack:
    require_cli()
    from pulumi import automation as auto

    try:
        return auto.select_stack(stack_name=name, project_name=PROJECT_NAME, program=_program,
                                 opts=_workspace_options())
    except auto.StackNotFoundError:
        raise OpsError(
            f"no such stack {name!r}: see `pulumi stack ls`, or create it with "
            f"`pulumi stack init {name}`"
        ) from None


def stack_outputs(name: str) -> dict[str, Any]:
    """Plain output values; secrets (the SSH key) are unwrapped in memory only."""
    return {key: output.value for key, output in select_stack(name).outputs().items()}


class EventPrinter:
    """Engine events -> one line per resource step, so long `up`s show progress as they go;
    while `ticking`, a line every interval names the steps still running and for how long (a
    TPU slice, or a queued one waiting for capacity, can take many minutes without an event)."""

    def __init__(self, out: TextIO = sys.stdout, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.out = out
        self.failed = 0
        self.clock = clock
        self.running: dict[str, float] = {}
        """Steps begun and not yet done or failed: resource name -> when they began."""
        self._lock = threading.Lock()

    def __call__(self, event: EngineEvent) -> None:
        self._track(event)
        line = self.render(event)
        if line:
            with self._lock:
                print(line, file=self.out, flush=True)

    def _track(self, event: EngineEvent) -> None:
        with self._lock:
            if event.resource_pre_event is not None:
                meta = event.resource_pre_event.metadata
                if meta.op.value != "same":
                    self.running[_urn_name(meta.urn)] = self.clock()
            elif event.res_outputs_event is not None:
                self.running.pop(_urn_name(event.res_outputs_event.metadata.urn), None)
            elif event.res_op_failed_event is not None:
                self.running.pop(_urn_name(event.res_op_failed_event.metadata.urn), None)

    def still_running(self) -> str | None:
        """`  running  a (4m05s), b (30s)`, longest first; None when no step is running."""
        with self._lock:
            now = self.clock()
            steps = sorted(self.running.items(), key=lambda item: item[1])
        if not steps:
            return None
        return "  running  " + ", ".join(
            f"{name} ({_elapsed(now - began)})" for name, began in steps
        )

    @contextlib.contextmanager
    def ticking(self, interval_s: float = 30.0) -> Iterator[None]:
        """Print `still_running` every `interval_s` while the body runs."""
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(interval_s):
                line = self.still_running()
                if line:
                    with self._lock:
                        print(line, file=self.out, flush=True)

        ticker = threading.Thread(target=tick, name="pulumi-progress", daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()

    def render(self, event: EngineEvent) -> str | None:
        if event.resource_pre_event is not None:
            meta = event.resource_pre_event.metadata
            if meta.op.value == "same":
                return None
            line = f"  {meta.op.value:<8} {_urn_name(meta.urn)} ({meta.type})..."
            effect = step_effect(meta.type, meta.op.value, meta.detailed_diff, meta.diffs,
                                 meta.old, meta.new)
            return f"{line} {effect}" if effect else line
        if event.res_outputs_event is not None:
            meta = event.res_outputs_event.metadata
            if meta.op.value == "same":
                return None
            return f"  done     {_urn_name(meta.urn)}"
        if event.res_op_failed_event is not None:
            self.failed += 1
            return f"  FAILED   {_urn_name(event.res_op_failed_event.metadata.urn)}"
        if event.diagnostic_event is not None:
            diag = event.diagnostic_event
            if diag.severity in ("error", "warning") and not diag.ephemeral:
                return f"  {diag.severity}: {diag.message.strip()}"
            return None
        if event.summary_event is not None:
            summary = event.summary_event
            changes = ", ".join(
                f"{count} {getattr(op, 'value', op)}"
                for op, count in summary.resource_changes.items()
            )
            return f"summary: {changes or 'no changes'} in {summary.duration_seconds}s"
        return None


def step_effect(type_: str, op: str, detailed_diff: dict[str, Any] | None,
                diffs: list[str] | None, old: Any = None, new: Any = None) -> str | None:
    """What a step does to a running node (ops.plan_effects), for nodes Pulumi updates or
    replaces itself; paths from the engine's detailed diff (`metadata.startup-script`). For
    a worker group (`old`/`new`: the step's states), from its old and new bodies."""
    from infra.dynamic_types import WORKER_GROUP_TYPE
    from ops.plan_diff import INSTANCE_TYPE, TPU_VM_TYPE
    from ops.plan_effects import NEW_NODE_NOTE, effect_of_paths

    if type_ == WORKER_GROUP_TYPE:
        return _worker_group_step_effect(op, old, new)
    if type_ not in (INSTANCE_TYPE, TPU_VM_TYPE):
        return None
    if op in ("replace", "create-replacement"):
        return f"({NEW_NODE_NOTE})"
    if op != "update":
        return None
    effect = effect_of_paths(list(detailed_diff or {}) or list(diffs or []))
    return f"({effect})" if effect else None


def _worker_group_step_effect(op: str, old: Any, new: Any) -> str | None:
    """Only a WorkerGroup's state has a `group_id` (the sweeper's has not)."""
    from ops.plan_effects import NEW_WORKERS_NOTE, worker_group_effect

    if old is None or "group_id" not in (old.outputs or {}):
        return None
    if op in ("replace", "create-replacement"):
        return f"({NEW_WORKERS_NOTE})"
    if op != "update" or new is None:
        return None
    effect = worker_group_effect((old.inputs or {}).get("body"), (new.inputs or {}).get("body"))
    return f"({effect})" if effect else None


def _urn_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _elapsed(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def run_operation(
    name: str, operation: Operation, out: TextIO = sys.stdout, **options: Any
) -> None:
    """Run one lifecycle operation on a stack, streaming engine events as progress lines;
    `options` go to the Automation API call (e.g. destroy's `target`). `up` refreshes first
    and replaces TPU slices GCP reclaimed (see ops/preempted.py)."""

    from ops.preempted import up_replacing_reclaimed

    if operation == "up":
        from ops.plan import cluster_from_settings, stack_settings
        from ops.up_quota import check_tpu_quota_before_up

        check_tpu_quota_before_up(*cluster_from_settings(stack_settings(name)), out)
    stack = select_stack(name)
    printer = EventPrinter(out)
    print(f"{operation} stack {name!r}", file=out, flush=True)
    actions = {
        "up": lambda on_event: up_replacing_reclaimed(stack, on_event, out),
        "preview": stack.preview,
        "destroy": stack.destroy,
        "refresh": stack.refresh,
    }
    with _one_line_failure(operation, name), printer.ticking():
        actions[operation](on_event=printer, **options)


def preview_diff(name: str, out: TextIO = sys.stdout) -> None:
    """`pulumi preview --diff` of a stack, the engine's own text uncoloured (the PR workflow
    posts it), run as `invoke preview` runs (the pinned engine, the program inline)."""
    stack = select_stack(name)
    with _one_line_failure("preview", name):
        stack.preview(diff=True, color="never",
                      on_output=lambda line: print(line, file=out, flush=True))


@contextlib.contextmanager
def _one_line_failure(operation: str, name: str) -> Iterator[None]:
    """The engine's diagnostics were already streamed: its failure ends in one line."""
    from pulumi import automation as auto

    try:
        yield
    except auto.CommandError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if "error:" in line]
        reason = lines[-1] if lines else "see the messages above"
        raise OpsError(f"pulumi {operation} of stack {name!r} failed: {reason}") from None
