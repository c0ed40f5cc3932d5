"""`invoke plan`: the stack's resources as a canonical, deterministic document.

Runs the real program offline (ops.review.plan_engine) and reduces what it records to what a
reviewer needs: Pulumi type token, a friendlier kind, logical name, parent and inputs with
secrets masked. Keys are sorted and resources ordered by (type, name), so the same stack
config always gives byte-identical JSON; `invoke diff` compares two of these documents.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from model.identities import NodeIdentity, check_identities
from model.plan import plan_cluster
from model.stack_config import (
    CONFIG_KEY,
    PROJECT_ROOT,
    STATE_DIR_ENV,
    check_stack,
)
from ops.errors import OpsError, is_user_error
from ops.paths import in_existing_folder
from ops.review.guardrails import pack_config, plan_findings, refuse_over_cap, table_lines
from ops.stacks.stack import (
    adoption_from_settings,
    cluster_from_settings,
    resolve_stack_name,
    stack_for_cluster_yaml,
    stack_settings,
)

if TYPE_CHECKING:
    from model.config import ClusterConfig

PLAN_FORMAT_VERSION = 1

Plan = dict[str, Any]


FORMATS = ("json", "table")


def plan_format(given: str | None, as_json: bool, output: str | None = None) -> str:
    """`invoke plan`'s format: the table for people unless --format json (or --json, or an
    output file named `*.json`) asks for the document tools read."""
    if as_json and given not in (None, "json"):
        raise OpsError(f"--json and --format {given} disagree: give one")
    if as_json:
        return "json"
    return given or ("json" if output and output.endswith(".json") else "table")


def resolve_plan_args(stack: str | None, output_format: str, root: str | None,
                      output: str | None, missing_ok: bool = False) -> tuple[str, Path]:
    """Check `invoke plan`/`diff` arguments before the slow plan: the stack (chosen as every
    task chooses it) and its file, the format, the root and where the output goes."""
    if output_format not in FORMATS:
        raise OpsError(f"unknown --format {output_format!r}: use {' or '.join(FORMATS)}")
    tree = Path(root).expanduser() if root else PROJECT_ROOT
    if root and not (tree / "stacks").is_dir():
        raise OpsError(f"--root {tree} has no stacks/ folder: pass a checkout of this project")
    if output:
        in_existing_folder(output, "--output")
    name = resolve_stack_name(stack)
    if not root and not missing_ok:
        stack_settings(name)  # this folder's own stack (`up -c` made it), or a tracked one
    elif not (missing_ok and not stack_file_path(name, tree).exists()):
        check_stack(name, tree / "stacks", tree)
    return name, tree


def stack_file_path(stack: str, root: Path) -> Path:
    return root / "stacks" / f"Pulumi.{stack}.yaml"


def write_output(text: str, output: str | None) -> None:
    if output:
        Path(output).expanduser().write_text(text)
    else:
        print(text, end="")


def resource_kind(type_token: str) -> str:
    """A short label beside the token: its type name (dynamic resources have their own,
    `pulumi-python:dynamic/ray-gcp:WorkerGroup`)."""
    return type_token.rsplit(":", 1)[-1]


def plan_stack(stack: str, root: Path = PROJECT_ROOT) -> Plan:
    """Plan `stack` in this process (`run_program` leaves pulumi's process-global runtime as
    it found it); `plan_stack_isolated` plans in an interpreter of its own, two at once."""
    return plan_settings(stack_settings(stack, root), stack, root)


def plan_settings(config: dict[str, str], stack: str, root: Path = PROJECT_ROOT) -> Plan:
    """Plan the stack settings `config` (as `stack_settings` gives them) as stack `stack`."""
    from ops.review.plan_engine import run_program

    run = run_program(config, stack=stack, preview=True)
    cluster_file = config.get(CONFIG_KEY, "")
    if cluster_file and Path(cluster_file).is_relative_to(root):
        cluster_file = str(Path(cluster_file).relative_to(root))
    resources = [
        {
            "type": r.type,
            "kind": resource_kind(r.type),
            "name": r.name,
            "parent": r.parent,
            "custom": r.custom,
            "inputs": r.inputs,
            # Earlier (type, name)s of a renamed resource: `invoke diff` matches them, as
            # Pulumi does.
            **({"aliases": r.aliases} if r.aliases else {}),
        }
        for r in sorted(run.resources, key=lambda r: (r.type, r.name))
    ]
    from ops.review.plan_capacity import ladder_rows
    from ops.review.plan_node_types import node_type_rows
    from ops.review.spend_cap import cap_findings, cap_projection, config_source

    cluster, counts = cluster_from_settings(config)
    projection = cap_projection(cluster, counts)
    identities = plan_cluster(cluster, counts, adoption_from_settings(config)).identities
    return {"format": PLAN_FORMAT_VERSION, "stack": stack, "cluster_file": cluster_file,
            "resources": resources, "price_per_hour": price_per_hour(cluster, counts),
            "spend_cap": projection,
            "warnings": run.warnings + [line for line in check_identities(identities)
                                        if line not in run.warnings],
            "node_types": node_type_rows(cluster, counts),
            "capacity_ladders": ladder_rows(cluster, counts),
            "identities": [identity_row(identity) for identity in identities],
            "policy": plan_findings(resources, pack_config(config, root))
            + cap_findings(projection, config_source(config, stack, root))}


def price_per_hour(config: ClusterConfig, counts: dict[str, int]) -> dict[str, Any]:
    """The cluster's approximate USD per hour at its pinned size and at max_workers (the
    program has just accepted these settings)."""
    from ops.review.prices import cluster_price

    return cluster_price(config, counts).as_dict()


def plan_stack_isolated(
    stack: str, root: Path = PROJECT_ROOT, state: Path | None = None
) -> subprocess.Popen[str]:
    """Start planning `stack` in a fresh interpreter (set_mocks is process-global); collect
    the result with `collect_plan`. Two can run at once. `state`: the local state folder the
    plan reads (the stack's backend record), else the usual."""
    return _isolated(["--stack", stack, "--root", str(root)], state)


def _isolated(arguments: list[str], state: Path | None = None) -> subprocess.Popen[str]:
    """`python -m ops.review.plan` in the caller's folder (its relative cluster YAML and its
    `.ray-gcp/` state mean the same there), our code importable wherever it is installed."""
    path = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path,
           **({STATE_DIR_ENV: str(state)} if state is not None else {})}
    return subprocess.Popen(
        [sys.executable, "-m", "ops.review.plan", *arguments],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


USER_ERROR_EXIT = 2
"""`python -m ops.review.plan`'s exit status for a problem the user can fix: its stderr is then
the one message `invoke plan` shows, and nothing else."""


def collect_plan(process: subprocess.Popen[str], stack: str, where: str = "") -> Plan:
    """The plan a `plan_stack_isolated` run printed; its error once, under one header."""
    stdout, stderr = process.communicate()
    place = f" {where}" if where else ""
    if process.returncode != 0:
        raise OpsError(f"planning stack {stack!r}{place} failed:\n{stderr.strip()}")
    return _parsed(stdout, stderr, f"planning stack {stack!r}{place}")


def _parsed(stdout: str, stderr: str, what: str) -> Plan:
    try:
        return json.loads(stdout)
    except json.JSONDecodeError:
        raise OpsError(f"{what} printed no plan: {stderr.strip() or stdout[:200]}") from None


def check_before_create(stack: str | None, cluster_yaml: str | None = None,
                        refuse_cap: bool = True) -> Plan:
    """Every check `invoke plan` makes, by the code `invoke plan` runs (`plan_yaml` for a
    cluster YAML, else `plan_stack`), before `invoke up` (or a first `preview -c`) writes a
    stack file or the engine creates anything: a refusal is `invoke plan`'s own message, once.
    The plan runs in this process, before the up: `run_program` leaves pulumi's runtime as it
    found it, and the Automation API configures it afresh for the real run, so the up pays
    for its imports once (a fresh interpreter cost 1.6 CPU-s more). Then (`refuse_cap`) a
    plan whose pinned nodes alone cost more an hour than the spend cap is refused, as `invoke
    plan` refuses it. Returns the plan as `invoke plan --json` prints it (its policy findings
    judge what the engine's preview cannot)."""
    try:
        plan = plan_yaml(cluster_yaml) if cluster_yaml else plan_stack(stack or "")
    except Exception as error:
        if not is_user_error(error):
            raise
        raise OpsError(str(error)) from None
    plan = json.loads(render_json(plan))
    if refuse_cap:
        refuse_over_cap(plan["stack"], plan["policy"],
                        "before the up: nothing was created or changed")
    return plan


def render_json(plan: Plan) -> str:
    """Canonical text: sorted keys, fixed indent, trailing newline, non-ASCII kept."""
    return json.dumps(plan, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def render_table(plan: Plan) -> str:
    """For people: the node types (role, machine, zones, counts, spot, disk, price) and the
    cluster's total, then one line per resource (kind, logical name, parent, type token), the
    spend cap, each warning once and the policy findings; every line ends in a newline."""
    from ops.review.plan_capacity import ladder_lines
    from ops.review.plan_node_types import render_node_types
    from ops.review.spend_cap import table_lines as cap_table_lines

    rows = [("KIND", "NAME", "PARENT", "TYPE")] + [
        (r["kind"], r["name"], r["parent"] or "-", r["type"]) for r in plan["resources"]
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
        + "  " + row[3]
        for row in rows
    ]
    types = render_node_types(plan.get("node_types", []), plan["price_per_hour"])
    types += ladder_lines(plan.get("capacity_ladders", []))
    types += identity_lines(plan.get("identities", []))
    closing = [*cap_table_lines(plan.get("spend_cap")),
               *(f"warning: {line}" for line in plan.get("warnings", [])),
               *table_lines(plan["policy"])]
    return f"stack {plan['stack']} ({plan['cluster_file']}): " \
        f"{len(plan.get('node_types', []))} node types, {len(plan['resources'])} resources\n" \
        + "".join(f"{line}\n" for line in [*types, "", *lines, *closing])


def identity_row(identity: NodeIdentity) -> dict[str, Any]:
    return {"role": identity.role, "node_types": list(identity.node_types),
            "account": identity.email, "scopes": list(identity.scopes),
            "grants": [str(grant) for grant in identity.grants]}


def identity_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per node role and account: who the nodes run as, their scopes, what they may do."""
    return [f"{row['role']} ({', '.join(row['node_types'])}) runs as {row['account']}, "
            f"scopes {', '.join(s.rsplit('/', 1)[-1] for s in row['scopes']) or 'none'}: "
            f"{'; '.join(row['grants'])}" for row in rows]


def render(plan: Plan, output_format: str) -> str:
    if output_format not in FORMATS:
        raise OpsError(f"unknown --format {output_format!r}: use {' or '.join(FORMATS)}")
    return render_json(plan) if output_format == "json" else render_table(plan)


def write_plan(stack: str | None, output: str | None, output_format: str, root: str | None,
               cluster_yaml: str | None = None) -> None:
    """`invoke plan`: the arguments checked, then the plan rendered to `output` or stdout; a
    plan whose pinned nodes alone cost more an hour than the spend cap then fails it."""
    if cluster_yaml:
        plan = plan_cluster_yaml(stack, cluster_yaml, root, output_format, output)
        write_output(render(plan, output_format), output)
        refuse_over_cap(plan["stack"], plan["policy"])
        return
    name, tree = resolve_plan_args(stack, output_format, root, output)
    plan = plan_stack(name, tree)
    write_output(render(plan, output_format), output)
    refuse_over_cap(name, plan["policy"])


def plan_cluster_yaml(stack: str | None, cluster_yaml: str, root: str | None,
                      output_format: str, output: str | None) -> Plan:
    """`invoke plan -c cluster.yaml`: the stack the YAML deploys as (named after its
    cluster_name), planned as `invoke up -c` would deploy it; nothing is written (its stack
    file, when there is one, gives the worker counts)."""
    if stack or root:
        raise OpsError("--config plans the YAML as its own stack in this checkout: drop "
                       f"{'--stack' if stack else '--root'}")
    if output_format not in FORMATS:
        raise OpsError(f"unknown --format {output_format!r}: use {' or '.join(FORMATS)}")
    if output:
        in_existing_folder(output, "--output")
    return plan_yaml(cluster_yaml)


def plan_yaml(cluster_yaml: str) -> Plan:
    """The stack `cluster_yaml` deploys as, planned as `invoke up -c` deploys it: with its
    stack file's settings when it has one, else with the YAML alone."""
    found = stack_for_cluster_yaml(cluster_yaml)
    if found.exists:
        return plan_stack(found.name)
    return plan_settings({CONFIG_KEY: str(found.cluster_yaml)}, found.name)


def main(argv: list[str] | None = None) -> int:
    """`python -m ops.review.plan --stack S [--root DIR]` or `--config YAML`: canonical JSON on
    stdout (one plan per interpreter, which is how `invoke diff` isolates its two runs and
    `invoke up` checks before it creates). A problem the user can fix: its one message on
    stderr, exit status USER_ERROR_EXIT."""
    from model.quick_exit import skip_the_last_collection

    skip_the_last_collection()
    parser = argparse.ArgumentParser(prog="python -m ops.review.plan")
    chosen = parser.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--stack")
    chosen.add_argument("--config")
    parser.add_argument("--root", type=Path, default=PROJECT_ROOT)
    args = parser.parse_args(argv)
    try:
        plan = plan_yaml(args.config) if args.config else plan_stack(args.stack, args.root)
    except Exception as error:
        if not is_user_error(error):
            raise
        print(error, file=sys.stderr)
        return USER_ERROR_EXIT
    sys.stdout.write(render_json(plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
