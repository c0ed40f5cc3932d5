"""Every task, given a broken stack file or wrong arguments, exits non-zero with one message
naming the file (or the argument) and no traceback.

The tasks run from a copy of the project whose stacks/ holds the broken files, through
invoke's own command-line parsing, all in one subprocess (tests/support/task_runner.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.warm_python import run_module

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RUNNER = PROJECT_ROOT / "tests" / "support" / "task_runner.py"

BROKEN_STACKS = {
    "syntax": "config:\n  ray-gcp:cluster: [stacks/clusters/full.yaml\n",
    "typo": "config:\n  ray-gcp:clustr: stacks/clusters/full.yaml\n",
    "missing": "config:\n  ray-gcp:cluster: stacks/clusters/no-such.yaml\n",
    "types": "config:\n  ray-gcp:cluster: stacks/clusters/full.yaml\n"
             "  ray-gcp:workerCounts: {ray_worker_small: two}\n",
    "list": "- config\n",
}
# What each broken file's message must say besides its name.
EXPECTED = {
    "syntax": "not valid YAML at line 3",
    "typo": "unknown key: did you mean ray-gcp:cluster?",
    "missing": "no-such.yaml does not exist",
    "types": "is not a whole number",
    "list": "must be a mapping",
}

# Every task that takes --stack, with arguments that would be fine for a good stack.
STACK_TASKS = [
    ["up"], ["preview"], ["down"], ["refresh"], ["attach"], ["exec", "true"],
    ["submit", "tasks.py"], ["rsync-up", "tasks.py", "/tmp/x"], ["rsync-down", "/tmp/x", "x"],
    ["file-mounts"], ["status"], ["ssh-config"],
    ["scale", "--type", "ray_worker_small", "--count", "1"], ["plan"], ["diff", "--base", "HEAD"],
]

# Wrong arguments: (command line, text the one-line message must hold).
WRONG_ARGUMENTS = [
    (["plan", "-s", "full", "--format", "yaml"], "unknown --format 'yaml': use json or table"),
    (["plan", "-s", "full", "--json", "--format", "table"], "--json and --format table disagree"),
    (["plan", "-s", "full", "--root", "/no/such/dir"], "--root /no/such/dir has no stacks/"),
    (["plan", "-s", "full", "-o", "/no/such/dir/plan.json"], "--output /no/such/dir/plan.json"),
    (["plan", "-s", "nope"], "stacks/Pulumi.nope.yaml: no stack 'nope'"),
    # No stack named and several in the folder: never pulumi's selected stack (issue 43).
    (["plan"], "which cluster? this folder has"),
    (["status"], "which cluster? this folder has"),
    (["down"], "which cluster? this folder has"),
    (["up"], "which cluster? this folder has"),
    (["scale", "-s", "full", "--type", "ray_worker_small", "--count", "two"],
     "--count 'two' is not a whole number"),
    (["scale", "-s", "full", "--type", "ray_worker_huge", "--count", "1"],
     "use one of ray_worker_small"),
    (["scale", "-s", "full", "--type", "ray_worker_small", "--count", "9"],
     "9 is outside ray_worker_small's range: set a whole number from min_workers 1 to "
     "max_workers 2"),
    (["attach", "-s", "full", "--tmux", "--screen"], "--tmux and --screen are alternatives"),
    (["attach", "-s", "full", "-p", "dashboard"], "--port-forward 'dashboard'"),
    (["attach", "-s", "full", "-p", "99999"], "--port-forward '99999'"),
    (["exec", "-s", "full", "-A", "--node", "n1", "true"], "--all-nodes and --node"),
    (["exec", "-s", "full", "-A", "--parallel", "many", "true"], "--parallel 'many' is not a"),
    (["exec", "-s", "full", "-A", "--parallel", "0", "true"], "--parallel 0: give at least 1"),
    (["exec", "-s", "full", "--parallel", "5", "true"], "--parallel and --out work with"),
    (["rsync-up", "-s", "full", "tasks.py", "/tmp/x", "--parallel", "5"],
     "--parallel works with --all-nodes"),
    (["submit", "-s", "full", "no-such-script.py"], "no-such-script.py is not a file"),
    (["rsync-up", "-s", "full", "no-such-dir", "/tmp/x"], "no-such-dir does not exist"),
    (["rsync-down", "-s", "full", "/tmp/x", "/no/such/dir/x"], "target /no/such/dir/x: its folder"),
    (["ssh-config", "-s", "full", "-o", "/no/such/dir/c"], "--output /no/such/dir/c: its folder"),
    (["local-up", "--config", "stacks/Pulumi.syntax.yaml"], "stacks/Pulumi.syntax.yaml"),
    (["local-up", "--config", "no-such.yaml"], "no-such.yaml"),
    (["up", "-s", "full"], "the pulumi CLI is not on PATH nor in"),
    (["changed-stacks", "--base", "HEAD"], "stacks/Pulumi.syntax.yaml: not valid YAML"),
    (["diff", "-s", "full", "--base", "no-such-ref"], "git knows no ref 'no-such-ref'"),
    (["plan", "--no-such-flag"], "No idea what '--no-such-flag' is"),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git checkout of the project whose working tree adds the broken stack files."""
    root = tmp_path_factory.mktemp("project")
    ignore = shutil.ignore_patterns("__pycache__", ".ray-gcp")
    for folder in ("model", "infra", "ops", "bootstrap", "stacks", "engine"):
        shutil.copytree(PROJECT_ROOT / folder, root / folder, ignore=ignore)
    # .gitignore as a checkout has it: the tasks' own imports write __pycache__/ in the copy
    for name in ("tasks.py", "Pulumi.yaml", "pyproject.toml", ".gitignore"):
        shutil.copy(PROJECT_ROOT / name, root / name)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    for name, text in BROKEN_STACKS.items():
        (root / "stacks" / f"Pulumi.{name}.yaml").write_text(text)
    return root


def run_all(project: Path, command_lines: list[list[str]]) -> list[dict]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("PULUMI_STACK", "RAY_GCP_STACK_OUTPUTS")}
    env.update(PYTHONPATH=str(project), RAY_GCP_STATE_DIR=str(project / ".ray-gcp"),
               PATH=os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin",
               XDG_CACHE_HOME=str(project / "no-engine"))  # no engine `invoke engine` installed
    result = subprocess.run([sys.executable, str(RUNNER), json.dumps(command_lines)],
                            cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def broken_stack_runs(project: Path) -> list[dict]:
    lines = [[*argv[:1], "-s", stack, *argv[1:]] for stack in BROKEN_STACKS for argv in STACK_TASKS]
    return run_all(project, lines)


@pytest.fixture(scope="module")
def wrong_argument_runs(project: Path) -> list[dict]:
    return run_all(project, [argv for argv, _ in WRONG_ARGUMENTS])


def _shown(run: dict) -> str:
    return run["stdout"] + run["stderr"]


def test_every_task_names_the_broken_stack_file_and_the_fix(broken_stack_runs):
    assert len(broken_stack_runs) == len(BROKEN_STACKS) * len(STACK_TASKS)
    for run in broken_stack_runs:
        stack = run["argv"][2]
        shown = _shown(run)
        assert run["code"] not in (0, None), run
        assert "Traceback" not in shown and "unexpected" not in shown, run
        assert f"stacks/Pulumi.{stack}.yaml" in shown, run
        assert EXPECTED[stack] in shown, run


def test_wrong_arguments_end_in_one_message_without_a_traceback(wrong_argument_runs):
    for run, (_, expected) in zip(wrong_argument_runs, WRONG_ARGUMENTS, strict=True):
        shown = _shown(run)
        assert run["code"] not in (0, None), run
        assert "Traceback" not in shown and "unexpected" not in shown, run
        assert expected in shown, run


def test_plan_with_a_broken_stack_file_fails_the_same_from_the_shell(project):
    env = dict(os.environ)
    env.pop("PULUMI_STACK", None)
    result = run_module(["invoke", "plan", "-s", "syntax"], cwd=project, env=env, timeout=120)
    assert result.returncode == 1
    assert result.stderr.startswith("error: stacks/Pulumi.syntax.yaml: not valid YAML at line 3")
    assert "Traceback" not in result.stdout + result.stderr


def test_an_unwritable_state_dir_names_the_variable_and_the_fix(tmp_path, monkeypatch):
    from invoke import Context
    from invoke.exceptions import Exit

    import tasks

    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(blocker / "state"))
    with pytest.raises(Exit) as exited:
        tasks.local_down(Context())
    assert "set RAY_GCP_STATE_DIR to a writable folder" in str(exited.value.message)
