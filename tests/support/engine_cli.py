"""The pulumi CLI as a user runs it on this project: a copy of the repository's tracked files
(Pulumi.yaml as it is: `main: infra/`, runtime options `toolchain: uv`, `virtualenv: .venv`,
`stackConfigDir: stacks`) with the repository's .venv linked in, driven by `pulumi ...
--stack S` on an EngineWorkspace's hermetic backend (tests/support/engine_stack.py), with the
language
host double (tests/fakes/language_host) first on the engine's PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.support.engine_stack import OPERATION_TIMEOUT_S, PROJECT_ROOT, EngineWorkspace

LANGUAGE_HOST_DIR = Path(__file__).parents[1] / "fakes" / "language_host"


def copy_project(target: Path) -> Path:
    """The repository's tracked files (tests left out) in `target`, its .venv linked."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT_ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in listed:
        if not name or name.startswith("tests/") or not (PROJECT_ROOT / name).is_file():
            continue
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT_ROOT / name, target / name)
    (target / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    # The engine starts the dynamic-provider plugin (pulumi-resource-pulumi-python) in the
    # program's folder (`main: infra/`), and that script resolves Pulumi.yaml's relative
    # `virtualenv: .venv` from there, not from Pulumi.yaml's folder: pulumi/pulumi#7061 (open).
    # A user's checkout needs the same link, infra/.venv -> ../.venv (docs/development.md,
    # "The pulumi engine").
    (target / "infra" / ".venv").symlink_to(Path("..") / ".venv")
    return target


class CliProject:
    """`pulumi` commands in a copy of the project (or in `folder`, another project of its
    own), on `space`'s backend and fake cloud."""

    def __init__(self, space: EngineWorkspace, folder: Path | None = None) -> None:
        self.space = space
        self.folder = folder or copy_project(space.root / "repo")
        self.pulumi = str(Path(space.env["ENGINE_ROOT"]) / "bin" / "pulumi")
        self.env = {**os.environ, **space.env,
                    "PATH": os.pathsep.join([str(LANGUAGE_HOST_DIR), space.env["PATH"]])}
        # The project's own settings pick the virtualenv; the test Python's pin is not given.
        self.env.pop("PULUMI_PYTHON_CMD", None)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([self.pulumi, *args, "--non-interactive"], cwd=self.folder,
                              env=self.env, capture_output=True, text=True,
                              timeout=OPERATION_TIMEOUT_S)
        if check and done.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed:\n{done.stdout[-4000:]}\n"
                                 f"{done.stderr[-4000:]}")
        return done

    def preview_changes(self, stack: str) -> dict[str, int]:
        """`pulumi preview --diff` (as a user reads it) must pass; the change summary from
        the same preview's --json."""
        self.run("preview", "--diff", "--stack", stack)
        answer = json.loads(self.run("preview", "--json", "--stack", stack).stdout)
        return dict(answer.get("changeSummary") or {})

    def export(self, stack: str) -> dict[str, Any]:
        return json.loads(self.run("stack", "export", "--stack", stack).stdout)["deployment"]
