"""The PR workflow's offline job, run here as a runner runs it: its own shell steps (changed
stacks, the diff, the comment's body) read from .github/workflows/preview.yml, in bash, with
their `env:` and GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files, on a two-commit repository (a base
branch on `origin`, a pull request's commit that edits one stack's cluster YAML). The comment
it would post names that stack and the change, under the marker the posting step finds it by.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.engine_cli import copy_project
from tests.support.engine_stack import ENGINE_VERSION, PROJECT_ROOT

WORKFLOW = PROJECT_ROOT / ".github" / "workflows" / "preview.yml"
EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


def _workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com",
                           "-c", "init.defaultBranch=main", *args], cwd=folder, check=True,
                          capture_output=True, text=True).stdout


class Runner:
    """A job's steps by id: `${{ github.base_ref }}` and `${{ steps.ID.outputs.NAME }}` in
    their env, GITHUB_OUTPUT per step, one step summary."""

    def __init__(self, workspace: Path, base_ref: str) -> None:
        self.workspace = workspace
        self.context = {"github.base_ref": base_ref}
        self.outputs: dict[str, dict[str, str]] = {}
        self.summary = workspace.parent / "summary.md"
        # The runner's `uv` (setup-uv's): the one ./uv runs, not ./uv itself (which runs the
        # first `uv` on PATH).
        uv_dir = workspace.parent / "bin"
        uv_dir.mkdir(exist_ok=True)
        real_uv = shutil.which("uv") or PROJECT_ROOT / ".tools" / "uv" / "bin" / "uv"
        (uv_dir / "uv").symlink_to(real_uv)
        self.path = os.pathsep.join([str(uv_dir), os.environ["PATH"]])

    def value(self, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            expression = match.group(1)
            step = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expression)
            if step:
                return self.outputs.get(step.group(1), {}).get(step.group(2), "")
            return self.context[expression]
        return EXPRESSION.sub(one, str(text))

    def run(self, step: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        output = self.workspace.parent / f"output-{step['id']}"
        output.write_text("")
        env = {**os.environ, "PATH": self.path, "GITHUB_OUTPUT": str(output),
               "GITHUB_STEP_SUMMARY": str(self.summary),
               **{key: self.value(value) for key, value in (step.get("env") or {}).items()}}
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", step["run"]],
                              cwd=self.workspace, env=env, capture_output=True, text=True,
                              timeout=600)
        self.outputs[step["id"]] = dict(
            line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        return done


@pytest.fixture
def pull_request(tmp_path: Path) -> Path:
    """A clone whose origin/main is the project as it is, and whose HEAD adds a setup command
    to stacks/clusters/minimal.yaml."""
    upstream = copy_project(tmp_path / "upstream")
    (upstream / ".venv").unlink()
    (upstream / "infra" / ".venv").unlink()
    _git(upstream, "init", "-q")
    _git(upstream, "add", "-A")
    _git(upstream, "commit", "-qm", "base")
    work = tmp_path / "work"
    _git(tmp_path, "clone", "-q", str(upstream), str(work))
    (work / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    cluster = work / "stacks" / "clusters" / "minimal.yaml"
    cluster.write_text(cluster.read_text() + "setup_commands:\n  - echo pr-preview-check\n")
    _git(work, "commit", "-qam", "a setup command")
    shutil.rmtree(upstream)  # the clone's origin/main is all the job reads
    return work


@pytest.mark.slow  # two offline plans of a stack (base and head): about 100 s on 2 loaded cores
def test_the_offline_job_comments_the_changed_stacks_diff(pull_request: Path) -> None:
    steps = {step["id"]: step for step in _workflow()["jobs"]["offline-diff"]["steps"]
             if "id" in step}
    runner = Runner(pull_request, base_ref="main")
    for step_id in ("changed", "diff", "body"):
        done = runner.run(steps[step_id])
        assert done.returncode == 0, f"{step_id}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"

    assert runner.outputs["changed"] == {"list": "minimal", "stacks": '["minimal"]'}
    assert runner.outputs["diff"] == {"failed": ""}
    comment = (pull_request / "comment.md").read_text()
    marker = steps["body"]["env"]["MARKER"]
    assert comment.startswith(marker + "\n")
    assert "minimal" in comment and "echo pr-preview-check" in comment
    assert runner.summary.read_text() in comment  # the job summary holds the same diff


def test_the_real_preview_uses_the_cli_version_the_engine_tests_run() -> None:
    """pulumi/actions installs a released CLI: the one engine/go.mod pins and tests run."""
    preview = _workflow()["jobs"]["pulumi-preview"]
    action = next(step for step in preview["steps"]
                  if step.get("uses", "").startswith("pulumi/actions@"))
    assert str(action["with"]["pulumi-version"]) == ENGINE_VERSION
    assert f"github.com/pulumi/pulumi/pkg/v3 v{ENGINE_VERSION}" in (
        PROJECT_ROOT / "engine" / "go.mod").read_text()
    auth = next(step for step in preview["steps"]
                if step.get("uses", "").startswith("google-github-actions/auth@"))
    assert set(auth["with"]) == {"workload_identity_provider", "service_account"}
    assert preview["permissions"]["id-token"] == "write"
