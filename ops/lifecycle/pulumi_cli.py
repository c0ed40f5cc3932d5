"""The Pulumi Automation API behind `invoke up/preview/down/refresh/scale`.

The Automation API drives the pulumi CLI as a subprocess: the engine `invoke engine` installed
for the pinned version, else `pulumi` on PATH (ops.engine), with the program inline
(`ops.stacks.stack.select_stack`). Without a CLI every entry point says how to get one
(`ops.stacks.stack.require_cli`). A stack that names a policy-pack config runs the pack
(`policy/analyzer`, which the engine starts itself) in its previews and ups.
"""

from __future__ import annotations

import contextlib
import re
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any, Literal, TextIO

from model.stack_config import POLICY_KEY, PROJECT_ROOT, resolve_cluster_path
from ops.cloud.orphans import report_orphans
from ops.errors import OpsError, environment_fix, missing_role
from ops.lifecycle.adopt_orphans import adopt_wanted
from ops.lifecycle.cluster_yaml import stack_from_yaml
from ops.lifecycle.events import EventPrinter
from ops.lifecycle.lock_wait import queue_behind_lock
from ops.lifecycle.locks import locked_error, locks_in
from ops.lifecycle.pending import settle
from ops.lifecycle.reapply import export_request, reapply_request
from ops.review.plan import Plan, check_before_create
from ops.stacks.stack import (
    Stack,
    StackOutputs,
    require_cli,
    stack_file_path,
    stack_for_cluster_yaml,
)
from ops.stacks.torn_read import reading_again

Operation = Literal["up", "preview", "destroy", "refresh"]
POLICY_PACK = PROJECT_ROOT / "policy" / "analyzer"
"""The pack as an executable analyzer plugin: the engine starts it directly (no Python
language host needed) and reads PulumiPolicy.yaml beside it."""


def choose(stack: str | None, cluster_yaml: str | None, operation: Operation) -> Stack:
    """The stack --stack names (its file checked first; `up` and `preview` create the stack
    when its file has none yet) and the CLI check; or, with --config, the stack the cluster
    YAML deploys as, made first by `up` and `preview` (ops/lifecycle/cluster_yaml.py) once the
    YAML passed every check `invoke plan` makes."""
    if cluster_yaml:
        if operation == "preview" and not stack:
            found = stack_for_cluster_yaml(cluster_yaml)
            if not found.exists:  # the preview would write its stack file
                require_cli()
                check_before_create(None, cluster_yaml, refuse_cap=False)
        return stack_from_yaml(stack, cluster_yaml, create=operation in ("up", "preview"))
    chosen = Stack.choose(stack, require_file=True)
    require_cli()
    if operation in ("up", "preview"):  # a stack file with no stack yet: made, as `-c` makes it
        chosen.automation(create=True)
    return chosen


def operate(stack: str | None, operation: Operation, cluster_yaml: str | None = None) -> None:
    """`invoke preview/refresh/down`: the stack chosen (`choose`), then the operation."""
    run_operation(choose(stack, cluster_yaml, operation), operation)


def up(stack: str | None, restart_only: bool, no_restart: bool,
       cluster_yaml: str | None = None) -> None:
    """`invoke up`: the re-apply request for the node watchers, then the up. With a cluster
    YAML, every check `invoke plan -c` makes comes before its stack file is written or its
    stack created (`check_before_create`); `run_operation` makes them for a stack it is given.
    With OS Login, the cluster's key then leaves your OS Login profile (ops.remote.os_login).
    It ends with the head's address, whether Ray is up on it and what to type next
    (ops/lifecycle/up_summary.py)."""
    from ops.lifecycle.up_summary import print_summary

    export_request(reapply_request(restart_only, no_restart))
    checked = None
    if cluster_yaml:
        if stack:
            stack_from_yaml(stack, cluster_yaml, create=False)  # refuses both, one line
        require_cli()
        checked = check_before_create(None, cluster_yaml)
    else:  # before `choose`, which may create the stack of a tracked stack file
        checked = check_before_create(Stack.choose(stack, require_file=True).name)
    chosen = choose(stack, cluster_yaml, "up")
    run_operation(chosen, "up", checked=checked)
    try:
        outputs = chosen.outputs
    except OpsError as exc:
        print(f"the up is done, but its outputs could not be read: {exc}", flush=True)
        return
    if chosen.cluster.provider.os_login is not None:
        clean_os_login(outputs, own_key=False)
    print_summary(outputs)


def deployed_os_login(chosen: Stack) -> StackOutputs | None:
    """The deployed stack's outputs when its cluster logs in through OS Login; None when it
    does not, or nothing is deployed."""
    if chosen.cluster.provider.os_login is None:
        return None
    try:
        return chosen.outputs
    except OpsError:
        return None


def clean_os_login(outputs: StackOutputs | None, own_key: bool) -> None:
    """The cluster's key (and with `own_key`, your login key) out of your OS Login profile."""
    if outputs is not None:
        from ops.remote.os_login import clean_profile

        clean_profile(outputs, sys.stdout, own_key)


def policy_options(settings: dict[str, str]) -> dict[str, list[str]]:
    """The Automation API's `--policy-pack policy/analyzer --policy-pack-config <file>` when
    the stack file names a pack config (`ray-gcp:policyConfig`); nothing otherwise."""
    path = settings.get(POLICY_KEY)
    if not path:
        return {}
    return {"policy_packs": [str(POLICY_PACK)],
            "policy_pack_configs": [str(resolve_cluster_path(path))]}


def run_operation(
    stack: str | Stack, operation: Operation, out: TextIO = sys.stdout,
    checked: Plan | None = None, **options: Any
) -> None:
    """Run one lifecycle operation on a stack, streaming engine events as progress lines;
    `options` go to the Automation API call (e.g. destroy's `target`). `up` first makes every
    check `invoke plan` makes (`check_before_create`, unless the caller did: `checked` is that
    plan), the spend cap included, before the engine runs; then one engine run refreshes and
    updates, replacing TPU slices GCP reclaimed (see ops/lifecycle/preempted.py). `up` and `preview`
    run the policy pack when the stack file names its config (`policy_options`); an `up` then
    previews with it first (`_mandatory_violations`), and what that preview could not judge
    is judged on the offline plan (`_judge_offline`)."""
    from ops.lifecycle.preempted import up_replacing_reclaimed

    chosen = Stack.of(stack)
    name = chosen.name
    if operation == "up":
        checked = checked or check_before_create(name)
        from ops.lifecycle.apis import quota_apis
        from ops.lifecycle.network_check import network_warnings, render_warnings
        from ops.lifecycle.up_quota import check_tpu_quota_before_up

        check_tpu_quota_before_up(chosen.cluster, chosen.worker_counts, out)
        found = network_warnings(chosen.cluster, quota_apis(chosen.cluster, None, None))
        if found:
            print(render_warnings(found), file=out, flush=True)
    policy: dict[str, list[str]] = {}
    if operation in ("up", "preview") and stack_file_path(name).is_file():
        policy = policy_options(chosen.settings)
        options = {**policy, **options}
    automation_stack = chosen.automation()
    printer = EventPrinter(out)
    print(f"{operation} stack {name!r}", file=out, flush=True)
    state: dict[str, Any] = {}

    def up(on_event: EventPrinter, **up_options: Any) -> None:
        done = up_replacing_reclaimed(automation_stack, on_event, out, up_options=up_options,
                                      deployment=state.get("deployment"))
        chosen.keep_outputs(done.outputs)  # what the up returned: not read back by the CLI

    actions = {
        "up": up,
        "preview": automation_stack.preview,
        "destroy": automation_stack.destroy,
        "refresh": automation_stack.refresh,
    }

    def attempt() -> None:
        with graceful_interrupt(out), _one_line_failure(operation, name), printer.ticking():
            if operation == "preview":
                deployment = automation_stack.export_stack().deployment
                report_orphans(name, chosen.cluster, deployment, out)
            else:
                settled = settle(automation_stack, out)
                state["deployment"] = settled.deployment
                if settled.found and operation == "destroy":
                    automation_stack.refresh(on_event=printer)  # what was adopted, read back
                if operation == "up":
                    orphans = report_orphans(name, chosen.cluster, settled.deployment, out)
                    if adopt_wanted(automation_stack, orphans, out):
                        state.pop("deployment")  # the state has changed: the up reads it anew
            if operation == "up" and policy:
                with _mandatory_violations(printer, name, "before the up: nothing was created "
                                                         "or changed"):
                    automation_stack.preview(on_event=printer.policies_only, **policy)
                if any(level == "not run" for level, _, _, _ in printer.violations):
                    _judge_offline(name, checked["policy"], out)
            with _mandatory_violations(printer, name, "the policy pack's messages are above"):
                actions[operation](on_event=printer, **options)

    def again() -> None:  # a read of the state that met another run writing it
        reading_again(attempt, out)

    if operation == "preview":  # it takes no lock
        again()
    else:
        queue_behind_lock(name, operation, again, out)


def _judge_offline(name: str, findings: list[dict[str, str]], out: TextIO) -> None:
    """The rules the engine's preview could not run (a new stack's node labels and pinned
    WorkerGroup bodies wait on values made during the up; the engine would judge them only
    as it creates each, after the ones before it exist), judged on the offline plan the up
    was checked with, which knows every input: a mandatory violation stops the up before
    anything is created."""
    from ops.review.guardrails import mandatory_policies, table_lines

    broken = mandatory_policies(findings)
    if broken:
        print("the offline plan judges what the preview could not:", file=out)
        print("\n".join(table_lines(findings)), file=out, flush=True)
        raise OpsError(f"stack {name!r} breaks mandatory policies: {', '.join(broken)} (in "
                       "the offline plan, before the up: nothing was created or changed)")


@contextlib.contextmanager
def _mandatory_violations(printer: EventPrinter, name: str, note: str) -> Iterator[None]:
    """An engine failure with mandatory policy violations printed becomes one line naming the
    policies. An `up` with a pack previews with it first (`note` says so): a mandatory
    violation stops it before anything is created, where the up itself judges each resource
    only when it registers it (after the ones before it exist) and the stack-wide policies
    at its end."""
    from pulumi import automation as auto

    try:
        yield
    except auto.CommandError:
        broken = sorted({rule for level, rule, _, _ in printer.violations
                         if level == "mandatory"})
        if not broken:
            raise
        raise OpsError(f"stack {name!r} breaks mandatory policies: {', '.join(broken)} "
                       f"({note})") from None


def preview_diff(stack: str | None, cluster_yaml: str | None = None,
                 out: TextIO = sys.stdout) -> None:
    """`invoke preview --diff`: the engine's own `pulumi preview --diff` text, uncoloured (the
    PR workflow posts it), run as `invoke preview` runs (the pinned engine, the program
    inline)."""
    chosen = choose(stack, cluster_yaml, "preview")
    automation_stack = chosen.automation()
    with _one_line_failure("preview", chosen.name):
        automation_stack.preview(diff=True, color="never",
                                 on_output=lambda line: print(line, file=out, flush=True))


class Interrupted(OpsError):
    """Ctrl-C during an engine run, which the engine ended gracefully."""


@contextlib.contextmanager
def graceful_interrupt(out: TextIO) -> Iterator[None]:
    """Ctrl-C reaches the engine too (the terminal signals the whole foreground group): it
    stops starting steps, finishes the calls in flight, records them and releases the
    stack's lock. So the first SIGINT here only says so and lets the engine end (its run then
    fails: one line saying how to resume); a second stops at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    interrupted: list[bool] = []

    def on_sigint(_signum: int, _frame: object) -> None:
        if interrupted:
            raise KeyboardInterrupt
        interrupted.append(True)
        print("interrupted: the engine finishes the calls in flight and records them "
              "(Ctrl-C again stops at once)", file=out, flush=True)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    except OpsError as exc:
        if interrupted:
            raise Interrupted("interrupted: the engine finished the calls in flight and "
                              "recorded them; run the same command again to resume",
                              exit_code=130) from None
        raise exc
    finally:
        signal.signal(signal.SIGINT, previous)


_ENGINE_AFTERMATH = re.compile(r"error: (Resource monitor has terminated, shutting down|"
                               r"(update|preview|destroy|refresh) failed)\s*$")
"""What the engine says after a resource's own error ended the run: never the reason."""
_RAISED = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Denied|Forbidden|NotFound)\w*: ")


@contextlib.contextmanager
def _one_line_failure(operation: str, name: str) -> Iterator[None]:
    """The engine's diagnostics were already streamed: its failure ends in one line."""
    from pulumi import automation as auto

    try:
        yield
    except auto.CommandError as exc:
        text = str(exc)
        locks = locks_in(text)
        if locks is not None:
            raise locked_error(name, operation, locks) from None
        lines = [line.strip() for line in text.splitlines() if "error:" in line]
        causes = [line for line in lines if not _ENGINE_AFTERMATH.search(line)]
        reason = (causes or lines or ["see the messages above"])[-1]
        if "Traceback (most recent call last)" in reason:
            # A dynamic provider's exception: the engine shows its traceback, whose last line
            # (`module.Error: message`) says what failed.
            raised = [line.strip() for line in text.rsplit(reason, 1)[-1].splitlines()
                      if _RAISED.match(line.strip())]
            reason = raised[-1] if raised else "a resource provider failed (see above)"
        reason = environment_fix(text) or reason
        raise OpsError(f"pulumi {operation} of stack {name!r} failed: {reason}"
                       f"{missing_role(text)}") from None


