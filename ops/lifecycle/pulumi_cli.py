"""The Pulumi Automation API behind `invoke up/preview/down/refresh/scale`.

The Automation API drives the pulumi CLI as a subprocess: the engine `invoke engine` installed
for the pinned version, else `pulumi` on PATH (ops.engine), with the program inline
(`ops.stack.select_stack`). Without a CLI every entry point says how to get one
(`ops.stack.require_cli`). A stack that names a policy-pack config runs the pack
(`policy/analyzer`, which the engine starts itself) in its previews and ups.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal, TextIO

from infra.stack_config import (
    CONFIG_KEY,
    POLICY_KEY,
    PROJECT_ROOT,
    STACKS_DIR,
    resolve_cluster_path,
)
from ops.errors import OpsError, missing_role
from ops.lifecycle.cluster_yaml import stack_from_yaml
from ops.lifecycle.events import EventPrinter
from ops.lifecycle.reapply import export_request, reapply_request
from ops.stack import (
    Stack,
    StackOutputs,
    cluster_from_settings,
    require_cli,
    select_stack,
    stack_for_cluster_yaml,
    stack_settings,
)

if TYPE_CHECKING:
    from infra.config import ClusterConfig

Operation = Literal["up", "preview", "destroy", "refresh"]
POLICY_PACK = PROJECT_ROOT / "policy" / "analyzer"
"""The pack as an executable analyzer plugin: the engine starts it directly (no Python
language host needed) and reads PulumiPolicy.yaml beside it."""


def choose(stack: str | None, cluster_yaml: str | None, operation: Operation) -> Stack:
    """The stack --stack names (its file checked first) and the CLI check; or, with
    --config, the stack the cluster YAML deploys as, made first by `up` and `preview`
    (ops/lifecycle/cluster_yaml.py)."""
    if cluster_yaml:
        if operation == "up" and not stack:
            _refuse_yaml_over_cap(cluster_yaml)
        return stack_from_yaml(stack, cluster_yaml, create=operation in ("up", "preview"))
    chosen = Stack.choose(stack, require_file=True)
    require_cli()
    return chosen


def operate(stack: str | None, operation: Operation, cluster_yaml: str | None = None) -> None:
    """`invoke preview/refresh/down`: the stack chosen (`choose`), then the operation."""
    run_operation(choose(stack, cluster_yaml, operation), operation)


def up(stack: str | None, restart_only: bool, no_restart: bool,
       cluster_yaml: str | None = None) -> None:
    """`invoke up`: the re-apply request for the node watchers, then the up; with OS Login,
    then the cluster's key out of your OS Login profile (ops.remote.os_login)."""
    export_request(reapply_request(restart_only, no_restart))
    chosen = choose(stack, cluster_yaml, "up")
    run_operation(chosen, "up")
    clean_os_login(deployed_os_login(chosen), own_key=False)


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
    stack: str | Stack, operation: Operation, out: TextIO = sys.stdout, **options: Any
) -> None:
    """Run one lifecycle operation on a stack, streaming engine events as progress lines;
    `options` go to the Automation API call (e.g. destroy's `target`). `up` is refused before
    anything when the pinned nodes alone exceed the spend cap; else it refreshes first and
    replaces TPU slices GCP reclaimed (see ops/lifecycle/preempted.py). `up` and `preview`
    run the policy pack when the stack file names its config (`policy_options`); an `up` then
    previews with it first (`_mandatory_violations`), and what that preview could not judge
    is judged on the offline plan (`_judge_offline`)."""
    from ops.lifecycle.preempted import up_replacing_reclaimed

    chosen = Stack.of(stack)
    name = chosen.name
    if operation == "up":
        _refuse_over_cap(name, chosen.settings, chosen.cluster, chosen.worker_counts)
        from ops.lifecycle.apis import quota_apis
        from ops.lifecycle.network_check import network_warnings, render_warnings
        from ops.lifecycle.up_quota import check_tpu_quota_before_up

        check_tpu_quota_before_up(chosen.cluster, chosen.worker_counts, out)
        found = network_warnings(chosen.cluster, quota_apis(chosen.cluster, None, None))
        if found:
            print(render_warnings(found), file=out, flush=True)
    policy: dict[str, list[str]] = {}
    if operation in ("up", "preview") and (STACKS_DIR / f"Pulumi.{name}.yaml").exists():
        policy = policy_options(chosen.settings)
        options = {**policy, **options}
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
    with _one_line_failure(operation, name), printer.ticking():
        if operation == "up" and policy:
            with _mandatory_violations(printer, name, "before the up: nothing was created or "
                                                     "changed"):
                automation_stack.preview(on_event=printer.policies_only, **policy)
            if any(level == "not run" for level, _, _, _ in printer.violations):
                _judge_offline(name, out)
        with _mandatory_violations(printer, name, "the policy pack's messages are above"):
            actions[operation](on_event=printer, **options)


def _refuse_over_cap(name: str, settings: dict[str, str], cluster: ClusterConfig,
                     counts: dict[str, int]) -> None:
    """A cluster whose pinned nodes alone cost more an hour than its spend cap is refused
    before the engine runs, with the line `invoke plan` and `invoke diff` refuse it with."""
    from ops.review.guardrails import refuse_over_cap
    from ops.review.spend_cap import cap_findings, cap_projection, config_source

    findings = cap_findings(cap_projection(cluster, counts),
                            config_source(settings, name, PROJECT_ROOT))
    refuse_over_cap(name, findings, "before the up: nothing was created or changed")


def _refuse_yaml_over_cap(cluster_yaml: str) -> None:
    """`invoke up -c`: the cap judged before the stack is made (its stack file's worker counts
    when it has one, as `invoke plan -c` reads them)."""
    found = stack_for_cluster_yaml(cluster_yaml)
    settings = stack_settings(found.name) if found.exists else {CONFIG_KEY: found.setting}
    _refuse_over_cap(found.name, settings, *cluster_from_settings(settings))


def _judge_offline(name: str, out: TextIO) -> None:
    """The rules the engine's preview could not run (a new stack's node labels and pinned
    WorkerGroup bodies wait on values made during the up; the engine would judge them only
    as it creates each, after the ones before it exist), judged on the offline plan, which
    knows every input: a mandatory violation stops the up before anything is created."""
    from ops.review.guardrails import mandatory_policies, table_lines
    from ops.review.plan import collect_plan, plan_stack_isolated

    findings = collect_plan(plan_stack_isolated(name), name)["policy"]
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
    automation_stack = select_stack(chosen.name)
    with _one_line_failure("preview", chosen.name):
        automation_stack.preview(diff=True, color="never",
                                 on_output=lambda line: print(line, file=out, flush=True))


_RAISED = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Denied|Forbidden|NotFound)\w*: ")


@contextlib.contextmanager
def _one_line_failure(operation: str, name: str) -> Iterator[None]:
    """The engine's diagnostics were already streamed: its failure ends in one line."""
    from pulumi import automation as auto

    try:
        yield
    except auto.CommandError as exc:
        text = str(exc)
        lines = [line.strip() for line in text.splitlines() if "error:" in line]
        reason = lines[-1] if lines else "see the messages above"
        if "Traceback (most recent call last)" in reason:
            # A dynamic provider's exception: the engine shows its traceback, whose last line
            # (`module.Error: message`) says what failed.
            raised = [line.strip() for line in text.rsplit(reason, 1)[-1].splitlines()
                      if _RAISED.match(line.strip())]
            reason = raised[-1] if raised else "a resource provider failed (see above)"
        raise OpsError(f"pulumi {operation} of stack {name!r} failed: {reason}"
                       f"{missing_role(text)}") from None


