"""`invoke diff`: plan a stack as it was at a git ref and as it is now, then compare.

The base side is the whole tree at the ref, extracted with `git archive` into a temp dir
(the working tree is never checked out or touched), planned by that tree's own
`python -m ops.review.plan` (`ops.plan` at a ref from before `ops/` had rooms) with the temp
dir first on the import path. So a pull request that changes only the program (`infra/`,
`bootstrap/`) shows what that change does, as does one that changes only a stack's YAML. A
ref from before the planner existed (neither file) is planned with the working tree's program
and the ref's stack files, and the output says so. Both sides run at once, each in its own
interpreter.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from model.stack_config import CONFIG_KEY, PROJECT_ROOT, STATE_DIR_ENV
from model.yaml_text import YamlFileError, parse_yaml_text
from ops.errors import OpsError
from ops.review.guardrails import Finding, refuse_mandatory
from ops.review.plan import (
    PLAN_FORMAT_VERSION,
    Plan,
    collect_plan,
    plan_stack_isolated,
    resolve_plan_args,
    write_output,
)
from ops.review.plan_diff import diff_plans, unchanged_count
from ops.review.plan_markdown import price_line, render_markdown
from ops.review.spend_cap import markdown_lines as cap_markdown

STACKS_DIR = "stacks"
PLANNER = "ops/review/plan.py"
# Where the planner lived before ops/ was split into rooms; a base ref may be that old.
FLAT_PLANNER = "ops/plan.py"
# Paths (relative to the project root) whose change can alter any stack's plan (the flat
# `ops/plan*.py` too: a ref from before the split has them).
PROGRAM_PATTERNS = ("model/*", "infra/*", "bootstrap/*", "ops/review/*", "ops/stack.py", "policy/*",
                    "ops/pulumi_types.py", "ops/plan*.py", "pyproject.toml")


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=False)


def _require_ref(ref: str, root: Path) -> None:
    if _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode != 0:
        raise OpsError(f"git knows no ref {ref!r}: fetch it (e.g. `git fetch origin main`) or "
                       "pass a commit, branch or tag to --base")


def git_show(ref: str, path: str, root: Path = PROJECT_ROOT) -> str | None:
    """A file's text at `ref` (path relative to `root`), or None when it did not exist."""
    result = _git(root, "show", f"{ref}:./{path}")
    if result.returncode == 0:
        return result.stdout
    _require_ref(ref, root)
    return None


def _stack_path(stack: str) -> str:
    return f"{STACKS_DIR}/Pulumi.{stack}.yaml"


def cluster_file_of(stack_text: str, source: str) -> str | None:
    """The `ray-gcp:cluster` a stack file's text names; `source` names the file in errors."""
    try:
        document = parse_yaml_text(stack_text, source)
    except YamlFileError as exc:
        raise OpsError(str(exc)) from None
    settings = document.get("config") if isinstance(document, dict) else None
    value = settings.get(CONFIG_KEY) if isinstance(settings, dict) else None
    return value if isinstance(value, str) else None


def materialise_tree(ref: str, dest: Path, root: Path = PROJECT_ROOT) -> None:
    """Extract the tree at `ref` under `dest`: the part of it at `root` (`root` may be a
    subdirectory of the repository), without touching the working tree or the index."""
    _require_ref(ref, root)
    prefix = _git(root, "rev-parse", "--show-prefix").stdout.strip()
    archive = subprocess.Popen(
        ["git", "-C", str(root), "archive", "--format=tar", f"{ref}:{prefix}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert archive.stdout is not None
    try:
        with tarfile.open(fileobj=archive.stdout, mode="r|") as tar:
            for member in tar:
                _refuse_outside(member, dest, ref)
                # git keeps one bit of a file's mode; its archive writes it through
                # tar.umask (0002: 0664): give the files the modes a checkout gives them.
                member.mode = 0o755 if member.isdir() or member.mode & 0o100 else 0o644
                tar.extract(member, dest)
        # tarfile stops at the first end-of-archive block; git pads the archive to a whole
        # 10 KiB record after it, which may still be on its way. Closing the pipe before it
        # arrives kills git with SIGPIPE (a failure with nothing on stderr): read it out.
        while archive.stdout.read(65536):
            pass
    except tarfile.TarError as error:
        archive.kill()
        raise OpsError(f"could not extract the tree at {ref}: {error}") from None
    finally:
        archive.stdout.close()
        stderr = archive.stderr.read().decode() if archive.stderr else ""
        archive.wait()
    if archive.returncode != 0:
        reason = stderr.strip() or f"exit status {archive.returncode}, nothing on stderr"
        raise OpsError(f"git archive {ref} failed: {reason}")


def _refuse_outside(member: tarfile.TarInfo, dest: Path, ref: str) -> None:
    """What a git tree can hold: plain files, folders and links, each named inside the tree
    (resolved through the links already extracted), a link pointing down from its folder
    (no `..`, not absolute: a chain of such links cannot leave the tree, whatever order the
    archive lists them in). Checked here rather than with tarfile's `filter="data"`, which
    Python 3.11 has only from 3.11.4 (Debian 12's is 3.11.2)."""
    top = os.path.realpath(dest)
    place = os.path.realpath(os.path.join(top, member.name))
    downward = not member.issym() or not (
        os.path.isabs(member.linkname) or ".." in PurePosixPath(member.linkname).parts)
    if not (downward and os.path.commonpath([top, place]) == top and (
            member.isfile() or member.isdir() or member.issym())):
        raise OpsError(f"could not extract the tree at {ref}: {member.name!r} is not a file, "
                       "folder or link inside the tree")


def planner_module(tree: Path) -> str | None:
    """The module `python -m` runs to plan with `tree`'s own program; None when it has none."""
    for path in (PLANNER, FLAT_PLANNER):
        if (tree / path).is_file():
            return path.removesuffix(".py").replace("/", ".")
    return None


def has_planner(tree: Path) -> bool:
    return planner_module(tree) is not None


def plan_tree_isolated(stack: str, tree: Path, state: Path) -> subprocess.Popen[str]:
    """Plan `stack` with the program that lives in `tree` (its own planner, `infra`,
    `bootstrap`), in a fresh interpreter whose import path starts at `tree`, with the local
    state folder `state` (whatever tree it runs from)."""
    env = {**os.environ, STATE_DIR_ENV: str(state), "PYTHONPATH": os.pathsep.join(
        [str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen(
        [sys.executable, "-m", str(planner_module(tree)), "--stack", stack, "--root", str(tree)],
        cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def materialise_stack(ref: str, stack: str, dest: Path, root: Path = PROJECT_ROOT) -> bool:
    """Write the stack file and its cluster YAML as of `ref` under `dest` (same relative
    layout); False when the stack did not exist at `ref`. Only the fallback for refs
    without a planner needs this: otherwise the whole tree is materialised."""
    stack_text = git_show(ref, _stack_path(stack), root)
    if stack_text is None:
        return False
    (dest / STACKS_DIR).mkdir(parents=True, exist_ok=True)
    (dest / _stack_path(stack)).write_text(stack_text)
    cluster = cluster_file_of(stack_text, f"{_stack_path(stack)} at {ref}")
    if cluster and not Path(cluster).expanduser().is_absolute():
        cluster_text = git_show(ref, cluster, root)
        if cluster_text is None:
            raise OpsError(f"at {ref}, {_stack_path(stack)} names {cluster}, which does not "
                           "exist there: the base side cannot be planned")
        (dest / cluster).parent.mkdir(parents=True, exist_ok=True)
        (dest / cluster).write_text(cluster_text)
    return True


def empty_plan(stack: str) -> Plan:
    return {"format": PLAN_FORMAT_VERSION, "stack": stack, "cluster_file": "", "resources": []}


@dataclass
class PlanPair:
    base: Plan
    head: Plan
    notes: list[str] = field(default_factory=list)  # how a side was planned, when unusual


def _start(stack: str, tree: Path, state: Path) -> subprocess.Popen[str]:
    """The tree's own planner when it has one, else this checkout's with `tree`'s stacks."""
    return plan_tree_isolated(stack, tree, state) if has_planner(tree) else \
        plan_stack_isolated(stack, tree, state)


def plan_both(stack: str, ref: str, root: Path = PROJECT_ROOT) -> PlanPair:
    """The plan at `ref` (its tree, its program) and of the working tree at `root`, planned
    in parallel subprocesses. Both use the working tree's local state folder (a base tree
    planned in its temp folder would otherwise use its own), and this machine's cache: the
    stack's plan secret there names the file_mounts archive alike on both sides (a base tree
    whose planner predates the cache keeps its secret in the state folder instead)."""
    state = Path(os.environ.get(STATE_DIR_ENV) or root / ".ray-gcp")
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ray-gcp-base-") as tmp:
        base_root = Path(tmp)
        base_exists = git_show(ref, _stack_path(stack), root) is not None
        head_exists = (root / _stack_path(stack)).exists()
        if not base_exists and not head_exists:
            raise OpsError(f"stack {stack!r} exists neither at {ref} nor in the working tree")
        base_run = None
        if base_exists:
            materialise_tree(ref, base_root, root)
            if not has_planner(base_root):
                notes.append(f"`{ref}` has no `{PLANNER}`: its stack files were planned with "
                             "the working tree's program, so program changes do not show.")
            base_run = _start(stack, base_root, state)
        head_run = _start(stack, root, state) if head_exists else None
        try:
            base = _collect(base_run, stack, f"at {ref}")
            head = _collect(head_run, stack, "in the working tree")
        finally:
            for run in (base_run, head_run):
                if run is not None and run.poll() is None:
                    run.kill()
    if base.get("format") != head.get("format"):
        raise OpsError(f"the plan at {ref} has format {base.get('format')} and the working "
                       f"tree's {head.get('format')}: they cannot be compared")
    return PlanPair(base, head, notes)


def _collect(process: subprocess.Popen[str] | None, stack: str, where: str) -> Plan:
    if process is None:
        return empty_plan(stack)
    return collect_plan(process, stack, where)


def diff_stack_markdown(stack: str, ref: str, root: Path = PROJECT_ROOT) -> str:
    return diff_stack(stack, ref, root)[0]


def diff_markdown(pair: PlanPair, stack: str, ref: str) -> str:
    rows = diff_plans(pair.base, pair.head)
    return render_markdown(rows, stack, f"`{ref}`", "working tree",
                           unchanged_count(pair.base, pair.head), notes=pair.notes,
                           price=price_line(pair.base.get("price_per_hour"),
                                            pair.head.get("price_per_hour")),
                           warnings=pair.head.get("warnings", []),
                           findings=pair.head.get("policy"),
                           spend_cap=cap_markdown(pair.base.get("spend_cap"),
                                                  pair.head.get("spend_cap")))


def diff_stack(stack: str, ref: str, root: Path = PROJECT_ROOT) -> tuple[str, list[Finding]]:
    """The diff's Markdown and the working tree's policy violations."""
    pair = plan_both(stack, ref, root)
    return diff_markdown(pair, stack, ref), pair.head.get("policy") or []


def write_diff(stack: str | None, base: str, output: str | None) -> None:
    """`invoke diff`: the arguments checked, then the Markdown to `output` or stdout; a
    mandatory policy violation then fails it."""
    name, _ = resolve_plan_args(stack, "json", None, output, missing_ok=True)
    markdown, findings = diff_stack(name, base)
    write_output(markdown, output)
    refuse_mandatory(name, findings)


def _stack_name(path: str) -> str | None:
    name = Path(path).name
    if Path(path).parent.as_posix() == STACKS_DIR and name.startswith("Pulumi.") \
            and name.endswith(".yaml"):
        return name[len("Pulumi."):-len(".yaml")]
    return None


def touches_program(paths: set[str]) -> bool:
    """Whether any of these changed paths can change every stack's plan."""
    return any(fnmatch.fnmatchcase(path, pattern)
               for path in paths for pattern in PROGRAM_PATTERNS)


def changed_stacks(ref: str, root: Path = PROJECT_ROOT) -> list[str]:
    """Stacks whose plan may differ between `ref` and the working tree (untracked files
    included): every stack of either side when the program changed (`PROGRAM_PATTERNS`),
    else those whose stack file or cluster YAML changed."""
    _require_ref(ref, root)
    result = _git(root, "diff", "--name-only", "--relative", ref)
    if result.returncode != 0:
        raise OpsError(f"git diff against {ref!r} failed: {result.stderr.strip()}")
    untracked = _git(root, "ls-files", "--others", "--exclude-standard").stdout
    changed = {line.strip() for line in [*result.stdout.splitlines(), *untracked.splitlines()]
               if line.strip()}
    at_ref = _git(root, "ls-tree", "--name-only", f"{ref}:./{STACKS_DIR}/").stdout.split()
    now = {path.relative_to(root).as_posix()
           for path in (root / STACKS_DIR).glob("Pulumi.*.yaml")}
    every = {name for path in {*now, *(f"{STACKS_DIR}/{p}" for p in at_ref)}
             if (name := _stack_name(path))}
    if touches_program(changed):
        return sorted(every)
    stacks: set[str] = set()
    for name in every:
        relative = _stack_path(name)
        sides = [((root / relative).read_text() if relative in now else "", relative),
                 (git_show(ref, relative, root) or "", f"{relative} at {ref}")]
        clusters = {c for c in (cluster_file_of(text, where) for text, where in sides) if c}
        if relative in changed or clusters & changed:
            stacks.add(name)
    return sorted(stacks)
