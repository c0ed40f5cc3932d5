"""The Pulumi Automation API behind `invoke up/preview/down/refresh`, and `pulumi up` for `scale`.

The Automation API drives the pulumi CLI as a subprocess; without the CLI it raises
FileNotFoundError deep inside, so every entry point checks first (`ops.stack.require_cli`) and
says how to install it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import Any, Literal, TextIO

from infra.stack_config import POLICY_KEY, PROJECT_ROOT, STACKS_DIR, resolve_cluster_path
from ops.errors import OpsError
from ops.lifecycle.events import EventPrinter
from ops.lifecycle.reapply import export_request, reapply_request
from ops.stack import Stack, require_cli, select_stack

Operation = Literal["up", "preview", "destroy", "refresh"]
POLICY_PACK = PROJECT_ROOT / "policy"


def operate(stack: str | None, operation: Operation) -> None:
    """`invoke preview/refresh/down`: the stack --stack names (its file checked first), the
    CLI check, then the operation."""
    chosen = Stack.choose(stack, require_file=True)
    require_cli()
    run_operation(chosen, operation)


def up(stack: str | None, restart_only: bool, no_restart: bool) -> None:
    """`invoke up`: the re-apply request for the node watchers, then the up."""
    export_request(reapply_request(restart_only, no_restart))
    operate(stack, "up")


def policy_options(settings: dict[str, str]) -> dict[str, list[str]]:
    """The Automation API's `--policy-pack policy --policy-pack-config <file>` when the stack
    file names a pack config (`ray-gcp:policyConfig`); nothing otherwise."""
    path = settings.get(POLICY_KEY)
    if not path:
        return {}
    return {"policy_packs": [str(POLICY_PACK)],
            "policy_pack_configs": [str(resolve_cluster_path(path))]}


def run_operation(
    stack: str | Stack, operation: Operation, out: TextIO = sys.stdout, **options: Any
) -> None:
    """Run one lifecycle operation on a stack, streaming engine events as progress lines;
    `options` go to the Automation API call (e.g. destroy's `target`). `up` refreshes first
    and replaces TPU slices GCP reclaimed (see ops/lifecycle/preempted.py). `up` and `preview`
    run the policy pack when the stack file names its config (`policy_options`)."""
    from pulumi import automation as auto

    from ops.lifecycle.preempted import up_replacing_reclaimed

    chosen = Stack.of(stack)
    name = chosen.name
    if operation == "up":
        from ops.lifecycle.up_quota import check_tpu_quota_before_up

        check_tpu_quota_before_up(chosen.cluster, chosen.worker_counts, out)
    if operation in ("up", "preview") and (STACKS_DIR / f"Pulumi.{name}.yaml").exists():
        options = {**policy_options(chosen.settings), **options}
    automation_stack = select_stack(name)
    printer = EventPrinter(out)
    print(f"{operation} stack {name!r}", file=out, flush=True)
    actions = {
        "up": lambda on_event, **up_options: up_replacing_reclaimed(
            automation_stack, on_event, out, up_options=up_options),
        "preview": automation_stack.preview,
        "destroy": automation_stack.destroy,
        "refresh": automation_stack.refresh,
    }
    try:
        with printer.ticking():
            actions[operation](on_event=printer, **options)
    except auto.CommandError as exc:
        # The engine's diagnostics were already streamed; keep the exit message to one line.
        lines = [line.strip() for line in str(exc).splitlines() if "error:" in line]
        reason = lines[-1] if lines else "see the messages above"
        raise OpsError(f"pulumi {operation} of stack {name!r} failed: {reason}") from None


def confirmed_up(stack: Stack) -> None:
    """`pulumi up` on the user's terminal: it shows the change and asks before applying it."""
    require_cli()
    pulumi = shutil.which("pulumi") or "pulumi"
    result = subprocess.run([pulumi, "up", "--stack", stack.name], cwd=PROJECT_ROOT,
                            check=False)
    if result.returncode != 0:
        raise OpsError(f"pulumi up of stack {stack.name!r} exited with {result.returncode}: "
                       "see the messages above")
