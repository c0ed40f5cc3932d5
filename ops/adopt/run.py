"""`invoke adopt -c cluster.yaml`: find the cluster `ray up` made from this YAML, say what the
new stack takes over and what it cannot, write the stack (its file names the YAML and
`ray-gcp:adopt`, model/adoption.py), preview it: the preview must import, create and update in
place only; it replacing or deleting anything ends the adoption with the stack removed again.
Then the in-place changes are explained, the question asked (`-y` skips it; no terminal
refuses, as ops.confirm does), and the up imports what Ray made and adds what only the stack
makes. Nothing in the cloud is changed before the answer."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from model.adoption import ADOPT_KEY, Adoption
from ops.adopt.cloud import read_ray_made
from ops.adopt.report import explain, render
from ops.adopt.survey import survey
from ops.confirm import confirm
from ops.errors import OpsError
from ops.lifecycle.cluster_yaml import place_stack
from ops.lifecycle.events import EventPrinter
from ops.lifecycle.pulumi_cli import run_operation
from ops.stacks.stack import (
    ClusterYamlStack,
    require_cli,
    select_stack,
    stack_for_cluster_yaml,
)

if TYPE_CHECKING:
    from pulumi.automation.events import EngineEvent

REPLACING = ("replace", "create-replacement", "delete-replaced", "import-replacement")


@dataclass
class Steps:
    """A preview's steps by resource name: what would be replaced or deleted, and the inputs
    each update changes."""

    replaced: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    imported: list[str] = field(default_factory=list)
    updates: dict[str, list[str]] = field(default_factory=dict)

    def __call__(self, event: EngineEvent) -> None:
        if event.resource_pre_event is None:
            return
        meta = event.resource_pre_event.metadata
        name, op = meta.urn.rsplit("::", 1)[-1], meta.op.value
        if op in REPLACING and name not in self.replaced:
            self.replaced.append(name)
        elif op == "delete" and name not in self.deleted:
            self.deleted.append(name)
        elif op == "import":
            self.imported.append(name)
        elif op == "update":
            self.updates[name] = sorted(meta.diffs or [])


def adopt(cluster_yaml: str, yes: bool, out: TextIO = sys.stdout,
          ask: Callable[[str], str] = input) -> None:
    """The task: see the module docstring."""
    from model.config import load_cluster_config

    found = stack_for_cluster_yaml(cluster_yaml)
    if found.exists:
        raise OpsError(f"{cluster_yaml}: stack {found.name!r} deploys it already; adopt makes "
                       f"a new stack: work on that one with `invoke up -c {cluster_yaml}`")
    require_cli()
    config = load_cluster_config(found.cluster_yaml)
    made = read_ray_made(config)
    judged = survey(config, made.instances, made.account, made.account_roles, made.ssh_keys,
                    made.firewalls)
    print(render(judged), file=out, flush=True)
    if judged.refusals:
        raise OpsError(f"nothing adopted: {len(judged.refusals)} thing(s) cannot be taken "
                       "over (listed above, each with the way out)")
    place_stack(found, out)
    try:
        _write_adoption(found, judged.adoption)
        steps = _preview(found.name, out)
        if steps.replaced or steps.deleted:
            raise OpsError(
                "nothing adopted: the preview would "
                + " and ".join(part for part in (
                    f"replace {', '.join(steps.replaced)}" if steps.replaced else "",
                    f"delete {', '.join(steps.deleted)}" if steps.deleted else "") if part)
                + "; the stack was removed again")
        print(explain(steps.updates), file=out, flush=True)
        confirm(f"stack {found.name!r} takes over Ray cluster {config.cluster_name!r} "
                f"({len(steps.imported)} resources imported, nothing replaced or deleted)",
                yes, ask=ask, out=out, nothing="adopted")
    except BaseException:
        _remove_stack(found)
        raise
    run_operation(found.name, "up", out=out)
    print(f"adopted: stack {found.name!r} now deploys {cluster_yaml}; `invoke up -c "
          f"{cluster_yaml}` applies later changes, `invoke down -c {cluster_yaml}` removes "
          "everything (Ray's account and its roles stay)", file=out, flush=True)


def _write_adoption(found: ClusterYamlStack, adoption: Adoption) -> None:
    """`ray-gcp:adopt` into the new stack file, beside the YAML's path."""
    import yaml

    document = yaml.safe_load(found.stack_file.read_text()) or {}
    document.setdefault("config", {})[ADOPT_KEY] = adoption.as_config()
    found.stack_file.write_text(yaml.safe_dump(document, sort_keys=False))


def _preview(name: str, out: TextIO) -> Steps:
    steps = Steps()
    printer = EventPrinter(out)
    stack = select_stack(name, create=True)
    print(f"preview stack {name!r}", file=out, flush=True)

    def both(event: EngineEvent) -> None:
        steps(event)
        printer(event)

    from pulumi import automation as auto

    try:
        stack.preview(on_event=both)
    except auto.CommandError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if "error:" in line]
        raise OpsError(f"nothing adopted: the preview failed: "
                       f"{lines[-1] if lines else 'see the messages above'}") from None
    return steps


def _remove_stack(found: ClusterYamlStack) -> None:
    """The new stack (empty: nothing was imported) and its file, so a later adopt starts
    clean."""
    from pulumi import automation as auto

    with contextlib.suppress(auto.CommandError, OpsError):
        select_stack(found.name).workspace.remove_stack(found.name)
    found.stack_file.unlink(missing_ok=True)
