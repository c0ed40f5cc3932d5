"""`invoke diff`: plan a stack as it was at a git ref and as it is now, then compare.

The base side is materialised from `git show REF:path` (the stack file and its cluster YAML)
into a temp dir: the working tree is never checked out or touched. Both sides run the
working tree's program, each in its own interpreter and at the same time, so the diff shows
what the config change does, not what a program change does.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import yaml

from infra.stack_config import CONFIG_KEY, PROJECT_ROOT
from ops.errors import OpsError
from ops.plan import Plan, collect_plan, plan_stack_isolated
from ops.plan_diff import diff_plans, unchanged_count
from ops.plan_markdown import render_markdown

STACKS_DIR = "stacks"


def git_show(ref: str, path: str, root: Path = PROJECT_ROOT) -> str | None:
    """A file's text at `ref` (path relative to `root`), or None when it did not exist."""
    result = subprocess.run(
        ["git", "-C", str(root), "show", f"{ref}:./{path}"],
        capture_output=True, text=True, check=False,
    )
    if result.returncode == 0:
        return result.stdout
    verify = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "--quiet",
                             f"{ref}^{{commit}}"], capture_output=True, text=True, check=False)
    if verify.returncode != 0:
        raise OpsError(f"git knows no ref {ref!r}: fetch it (e.g. `git fetch origin main`) or "
                       "pass a commit, branch or tag to --base")
    return None


def _stack_path(stack: str) -> str:
    return f"{STACKS_DIR}/Pulumi.{stack}.yaml"


def cluster_file_of(stack_text: str) -> str | None:
    value = ((yaml.safe_load(stack_text) or {}).get("config") or {}).get(CONFIG_KEY)
    return value if isinstance(value, str) else None


def materialise_stack(ref: str, stack: str, dest: Path, root: Path = PROJECT_ROOT) -> bool:
    """Write the stack file and its cluster YAML as of `ref` under `dest` (same relative
    layout); False when the stack did not exist at `ref`."""
    stack_text = git_show(ref, _stack_path(stack), root)
    if stack_text is None:
        return False
    (dest / STACKS_DIR).mkdir(parents=True, exist_ok=True)
    (dest / _stack_path(stack)).write_text(stack_text)
    cluster = cluster_file_of(stack_text)
    if cluster and not Path(cluster).expanduser().is_absolute():
        cluster_text = git_show(ref, cluster, root)
        if cluster_text is None:
            raise OpsError(f"at {ref}, {_stack_path(stack)} names {cluster}, which does not "
                           "exist there: the base side cannot be planned")
        (dest / cluster).parent.mkdir(parents=True, exist_ok=True)
        (dest / cluster).write_text(cluster_text)
    return True


def empty_plan(stack: str) -> Plan:
    return {"format": 1, "stack": stack, "cluster_file": "", "resources": []}


def plan_both(stack: str, ref: str, root: Path = PROJECT_ROOT) -> tuple[Plan, Plan]:
    """(plan at `ref`, plan of the working tree), planned in parallel subprocesses."""
    with tempfile.TemporaryDirectory(prefix="ray-gcp-base-") as tmp:
        base_root = Path(tmp)
        base_exists = materialise_stack(ref, stack, base_root, root)
        head_exists = (root / _stack_path(stack)).exists()
        if not base_exists and not head_exists:
            raise OpsError(f"stack {stack!r} exists neither at {ref} nor in the working tree")
        base_run = plan_stack_isolated(stack, base_root) if base_exists else None
        head_run = plan_stack_isolated(stack, root) if head_exists else None
        try:
            base = _collect(base_run, stack, f"at {ref}")
            head = _collect(head_run, stack, "in the working tree")
        finally:
            for run in (base_run, head_run):
                if run is not None and run.poll() is None:
                    run.kill()
    return base, head


def _collect(process: subprocess.Popen[str] | None, stack: str, where: str) -> Plan:
    if process is None:
        return empty_plan(stack)
    try:
        return collect_plan(process, stack)
    except Exception as error:
        raise OpsError(f"planning stack {stack!r} {where} failed:\n{error}") from None


def diff_stack_markdown(stack: str, ref: str, root: Path = PROJECT_ROOT) -> str:
    base, head = plan_both(stack, ref, root)
    rows = diff_plans(base, head)
    return render_markdown(rows, stack, f"`{ref}`", "working tree", unchanged_count(base, head))


def changed_stacks(ref: str, root: Path = PROJECT_ROOT) -> list[str]:
    """Stacks whose stack file or cluster YAML differ between `ref` and the working tree."""
    result = subprocess.run(
        ["git", "-C", str(root), "diff", "--name-only", "--relative", ref, "--", STACKS_DIR],
        capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        raise OpsError(f"git diff against {ref!r} failed: {result.stderr.strip()}")
    changed = {line.strip() for line in result.stdout.splitlines() if line.strip()}
    stacks: set[str] = set()
    for path in sorted((root / STACKS_DIR).glob("Pulumi.*.yaml")):
        relative = path.relative_to(root).as_posix()
        name = path.name[len("Pulumi."):-len(".yaml")]
        sides = [path.read_text(), git_show(ref, relative, root) or ""]
        clusters = {c for c in (cluster_file_of(text) for text in sides) if c}
        if relative in changed or clusters & changed:
            stacks.add(name)
    stacks |= {Path(p).name[len("Pulumi."):-len(".yaml")] for p in changed
               if Path(p).name.startswith("Pulumi.") and not (root / p).exists()}
    return sorted(stacks)
